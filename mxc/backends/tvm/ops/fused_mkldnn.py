"""Quantized oneDNN-fused nodes (``mxc/compiler/ops/fused_mkldnn.py``) as int8 Relax kernels.

Float ``_sg_mkldnn_*`` nodes never reach the backend: the default pipeline's
``inline-fused`` pass replaces them by their nested pattern, which the
ordinary converters lower and TVM fuses.  A quantized node is lowered as a
whole (``nested=True``), following the OpDef's facts step for step
(:mod:`mxc.compiler.ops.fused_mkldnn_kernels` is the reference):

* convolution: the BatchNorm is folded and the float weight quantized to int8
  **at compile time** (the weight and BatchNorm inputs must be bound
  constants); the bias codes need the data range, so they are computed at run
  time from the ``data_min``/``data_max`` inputs; ``conv2d`` of uint8/int8
  data with int8 weights accumulates in int32; requantize, relu and the
  residual sum run in float32 and round half to even with saturation (to
  the residual's type when there is a sum: ``FusedConv.stored_dtype``);
* fully connected: int8 weight codes are inputs; an int8 x int8 (or uint8)
  ``matmul`` into int32, the bias rescaled at run time (rounded half away
  from zero, as ``std::round``), then float output, requantize or int32, with
  the fused eltwise post-op (relu, gelu_erf, ...: ``FusedFullyConnected.eltwise``)
  applied to real values before the requantize scale, as oneDNN's post-op.

The uncalibrated int32 forms keep the accumulator exact (float64 where a
scale applies) and report MXNet's S8S8/S8U8 product range.
"""

from __future__ import annotations

import numpy as np

from ....compiler.ops.fused_mkldnn_kernels import conv_weights
from ....compiler.ops.quantization import K_INT8_RANGE, code_levels
from ..converter import Lowering, register_converter, register_host_only
from ._common import R, const, exact_product
from ._quant_helpers import INT32_RANGE, max_abs_f32, saturate, vec, weight_product_range

F = "float32"


def _scale(ctx: Lowering, levels: float, lo, hi):
    """``levels / max(|lo|, |hi|)`` as a (1,) float32 tensor."""
    return ctx.emit(R.divide(const(levels, F), max_abs_f32(ctx, lo, hi)))


def _saturate_as(ctx: Lowering, y, stored: str, dtype: str):
    """Saturate *y* to the 8-bit type *stored*, then read its bytes as *dtype*.

    Relax has no bit cast, so the two's-complement wrap is done on the float
    codes: an int8 code below 0 read as uint8 is ``code + 256``, a uint8 code
    above 127 read as int8 is ``code - 256``.
    """
    if stored == dtype:
        return saturate(ctx, y, dtype)
    info = np.iinfo(stored)
    y = ctx.emit(R.clip(R.round(y), float(info.min), float(info.max)))
    zero = const(0, ctx.dtype_of(y))
    if stored == "int8":
        wrap = ctx.emit(R.where(R.less(y, zero), const(256, ctx.dtype_of(y)), zero))
        y = ctx.emit(R.add(y, wrap))
    else:
        wrap = ctx.emit(R.where(R.greater(y, const(127, ctx.dtype_of(y))),
                                const(256, ctx.dtype_of(y)), zero))
        y = ctx.emit(R.subtract(y, wrap))
    return ctx.astype(y, dtype)


def _quantized_only(node, io):
    if not node.params.get("quantized"):
        return "float fused nodes are inlined by the inline-fused pass, not lowered whole"
    return True


def _post_ops(ctx: Lowering, kinds, y, sum_term=None, clip_bound=None):
    """The fused post-ops in order; *clip_bound(dtype)* is the bounded relu's bound in
    output codes (``FusedConv.conv_post_ops`` keeps a clip only before a sum)."""
    for kind in kinds:
        if kind == "relu":
            y = ctx.emit(R.maximum(y, const(0, ctx.dtype_of(y))))
        elif kind == "clip":
            y = ctx.emit(R.minimum(R.maximum(y, const(0, ctx.dtype_of(y))),
                                   clip_bound(ctx.dtype_of(y))))
        else:
            y = ctx.emit(R.add(y, sum_term(ctx.dtype_of(y))))
    return y


def _eltwise(ctx: Lowering, elt, y):
    """oneDNN's eltwise post-op ``(algorithm, alpha)`` (``FusedFullyConnected.eltwise``) on
    float32 *y*, as :func:`mxc.compiler.ops.fused_mkldnn_kernels.eltwise_forward`."""
    if elt is None:
        return y
    alg, alpha = elt
    zero, one = const(0, F), const(1, F)
    if alg == "relu":
        e = (R.where(R.greater(y, zero), y, R.multiply(y, const(alpha, F))) if alpha
             else R.maximum(y, zero))
    elif alg == "bounded_relu":
        e = R.minimum(R.maximum(y, zero), const(alpha, F))
    elif alg == "logistic":
        e = R.sigmoid(y)
    elif alg == "tanh":
        e = R.tanh(y)
    elif alg == "soft_relu":   # log(1 + e^y) without overflow: max(y, 0) + log(1 + e^-|y|)
        e = R.add(R.maximum(y, zero), R.log(R.add(one, R.exp(R.negative(R.abs(y))))))
    elif alg == "elu":
        e = R.where(R.greater(y, zero), y,
                    R.multiply(const(alpha, F), R.subtract(R.exp(y), one)))
    elif alg == "gelu_erf":
        e = R.multiply(R.multiply(const(0.5, F), y),
                       R.add(one, R.erf(R.divide(y, const(float(np.sqrt(np.float32(2))), F)))))
    elif alg == "square":
        e = R.multiply(y, y)
    elif alg == "sqrt":
        e = R.sqrt(y)
    elif alg == "exp":
        e = R.exp(y)
    else:
        e = R.abs(y)
    return ctx.emit(e)


@register_converter("_sg_mkldnn_conv", supports=_quantized_only, nested=True)
def quantized_conv(ctx: Lowering):
    op, p = ctx.node.opdef, ctx.p
    conv = op.nested_node(p, "Convolution")
    nb = op.n_base(p)

    def value(entry):
        arr = ctx.const_value(op.input_position(p, entry))
        if arr is None:
            raise ctx.error(f"input {entry.node.ref} must be a bound parameter: the int8 "
                            f"weights are quantized at compile time")
        return arr

    codes, wscales, bias, weight = conv_weights(op, p, value)
    data_pos = op.input_position(p, conv.inputs[0])
    data, d_lo, d_hi = ctx.inputs[data_pos], ctx.inputs[nb], ctx.inputs[nb + 1]
    data_scale = _scale(ctx, code_levels(ctx.in_dtypes[data_pos]), d_lo, d_hi)
    kernel, stride, dilate, pad, _ = conv.opdef.geometry(conv.params)
    acc = ctx.emit(R.nn.conv2d(data, ctx.const(codes), strides=stride, padding=pad,
                               dilation=dilate, groups=conv.params.num_group,
                               out_dtype="int32"))
    channel = (1, -1, 1, 1)
    if bias is not None:
        bscale = ctx.emit(R.multiply(ctx.const(wscales), data_scale))
        bcodes = ctx.emit(R.round(R.multiply(ctx.const(bias), bscale)))
        acc = ctx.emit(R.add(acc, R.reshape(ctx.astype(bcodes, "int32"), channel)))
    if op.calibrated(p):
        out_dt = op.quantized_out_dtype(p)
        out_scale = np.float32(code_levels(out_dt)) / np.float32(
            max(abs(np.float32(p.min_calib_range)), abs(np.float32(p.max_calib_range))))
        req = ctx.emit(R.divide(R.divide(const(out_scale, F), data_scale), ctx.const(wscales)))
        y = exact_product(ctx, ctx.astype(acc, F), ctx.emit(R.reshape(req, channel)))
        out_scale_t = const(out_scale, F)
    else:
        out_dt = "int32"
        y = ctx.astype(acc, "float64")
        out_scale_t = ctx.emit(R.multiply(data_scale, const(wscales[0], F)))

    def sum_term(dt):
        idx = op.sum_index(p)
        s_scale = _scale(ctx, code_levels(ctx.in_dtypes[idx]), ctx.inputs[nb + 2], ctx.inputs[nb + 3])
        factor = ctx.emit(R.divide(out_scale_t, s_scale))
        return ctx.astype(exact_product(ctx, ctx.inputs[idx], factor), dt)

    def clip_bound(dt):
        bound = ctx.emit(R.multiply(const(op.clip_bound(p), F), out_scale_t))
        return ctx.astype(bound, dt)

    y = _post_ops(ctx, op.conv_post_ops(p), y, sum_term, clip_bound)
    if op.calibrated(p):
        idx = op.sum_index(p)
        stored = op.stored_dtype(p, None if idx is None else ctx.in_dtypes[idx])
        out = _saturate_as(ctx, y, stored, out_dt)
        return [out, vec(ctx, float(np.float32(p.min_calib_range))),
                vec(ctx, float(np.float32(p.max_calib_range)))]
    out = saturate(ctx, y, out_dt)
    w_range = max(abs(float(weight.min())), abs(float(weight.max())))
    lo, hi = weight_product_range(ctx, w_range, d_lo, d_hi,
                                  127.0 if ctx.in_dtypes[data_pos] == "int8" else 255.0)
    return [out, lo, hi]


@register_converter("_sg_mkldnn_fully_connected", supports=_quantized_only, nested=True)
def quantized_fully_connected(ctx: Lowering):
    op, p = ctx.node.opdef, ctx.p
    fc = op.nested_node(p, "FullyConnected")
    fp = fc.params
    nb = op.n_base(p)
    data, weight = ctx.inputs[0], ctx.inputs[1]
    d_lo, d_hi, w_lo, w_hi = ctx.inputs[nb:nb + 4]
    d_dt = ctx.in_dtypes[0]
    dshape = ctx.in_shapes[0]
    rows = dshape[0] if fp.flatten else int(np.prod(dshape[:-1]))
    x = ctx.reshape(data, (rows, int(np.prod(dshape)) // rows))
    acc = ctx.emit(R.matmul(x, R.permute_dims(weight, [1, 0]), out_dtype="int32"))
    data_scale = _scale(ctx, code_levels(d_dt), d_lo, d_hi)
    weight_scale = _scale(ctx, float(K_INT8_RANGE), w_lo, w_hi)
    ds_ws = ctx.emit(R.multiply(data_scale, weight_scale))
    if op.has_bias(p):
        b_scale = _scale(ctx, float(K_INT8_RANGE), ctx.inputs[nb + 4], ctx.inputs[nb + 5])
        rescale = ctx.emit(R.divide(ds_ws, b_scale))
        b = ctx.emit(R.multiply(ctx.astype(ctx.inputs[2], F), rescale))
        b = ctx.emit(R.multiply(R.sign(b), R.floor(R.add(R.abs(b), const(0.5, F)))))
        acc = ctx.emit(R.add(acc, R.reshape(ctx.astype(b, "int32"), (1, -1))))
    acc = ctx.reshape(acc, ctx.out_shapes[0])
    elt = op.eltwise(p)
    to_real = ctx.emit(R.divide(R.divide(const(1.0, F), data_scale), weight_scale))
    if op.float_output(p):
        return [_eltwise(ctx, elt, ctx.emit(R.multiply(ctx.astype(acc, F), to_real)))]
    if op.calibrated(p):
        out_dt = op.quantized_out_dtype(p)
        levels = np.float32(code_levels(out_dt)) / np.float32(
            max(abs(np.float32(p.min_calib_range)), abs(np.float32(p.max_calib_range))))
        if elt is None:
            scale = ctx.emit(R.divide(R.divide(const(levels, F), data_scale), weight_scale))
            y = ctx.emit(R.multiply(ctx.astype(acc, F), scale))
        else:
            y = _eltwise(ctx, elt, ctx.emit(R.multiply(ctx.astype(acc, F), to_real)))
            y = ctx.emit(R.multiply(y, const(levels, F)))
        return [saturate(ctx, y, out_dt), vec(ctx, float(np.float32(p.min_calib_range))),
                vec(ctx, float(np.float32(p.max_calib_range)))]
    if elt is None or elt == ("relu", 0.0):
        y = ctx.astype(acc, "float64")
        if elt is not None:
            y = ctx.emit(R.maximum(y, const(0, "float64")))
    else:
        y = _eltwise(ctx, elt, ctx.astype(acc, F))
    # MXNet passes (data, weight) to its S8S8/S8U8 helper: data per 127, weight per 127/255
    la = ctx.emit(R.divide(max_abs_f32(ctx, d_lo, d_hi), const(127.0, F)))
    lb = ctx.emit(R.divide(max_abs_f32(ctx, w_lo, w_hi),
                           const(127.0 if d_dt == "int8" else 255.0, F)))
    hi = ctx.emit(R.multiply(R.multiply(la, lb), const(INT32_RANGE, F)))
    return [saturate(ctx, y, "int32"), ctx.emit(R.negative(hi)), hi]


register_host_only(
    "_sg_mkldnn_selfatt_qk", "_sg_mkldnn_selfatt_valatt",
    reason="quantized self-attention runs on the host (no MXNet case to check a lowering "
           "against); float self-attention nodes are inlined by inline-fused and lowered")
