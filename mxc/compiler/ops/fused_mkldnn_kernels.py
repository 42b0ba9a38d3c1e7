"""Reference kernels of the quantized ``_sg_mkldnn_conv`` / ``_sg_mkldnn_fully_connected``.

What oneDNN computes for MXNet 1.9.1, step by step (``L(t)`` is 127.5 for
int8 and 255.5 for uint8 codes, ``R(a, b) = max(|a|, |b|)``):

convolution
  1. fold the nested BatchNorm into the float weight and bias:
     ``alpha = gamma / sqrt(var + eps)``, ``w' = w * alpha``,
     ``b' = beta + alpha * (b - mean)``;
  2. ``data_scale = L(data) / R(data_min, data_max)``; the weight scale is per
     output channel when the node is calibrated, one for the tensor otherwise:
     ``ws = 127.5 / R(w)``; weight codes ``round(w' * ws)`` (half away from zero,
     as ``std::round``, the extreme 127.5 saturating to 127), bias codes
     ``round(b' * ws * data_scale)`` (int32);
  3. ``acc = conv(data codes, weight codes) + bias codes`` in int32;
  4. calibrated: ``acc * L(out) / R(calib) / data_scale / ws`` then the fused
     post-ops, rounded half to even and saturated to the output type;
     uncalibrated: the int32 ``acc`` itself, whose range is MXNet's
     S8S8/S8U8 product range of the weight's and the data's ranges,
     ``+-(R(w) / 127) * (R(data) / (127 or 255)) * 2**31``;
  5. post-ops in pattern order: activation, ``+ sum_scale * residual codes``
     (``sum_scale = output_scale / (L(residual) / R(sum_min, sum_max))``),
     activation after the sum; a fused ``clip`` (ReLU6) is a bounded relu with
     its bound times ``output_scale`` before a sum, and is dropped without one
     (``FusedConv.conv_post_ops``: the uint8 saturation cuts at the calibrated
     maximum);
  6. with a sum, the result is written in place into the residual's buffer:
     the codes saturate to the residual's type and are read back as the
     declared output type (``FusedConv.stored_dtype``).

fully connected
  weight and bias arrive as int8 codes with their ranges; the bias is moved
  into the accumulator's scale, ``round(b * data_scale * ws * R(bias) / 127.5)``;
  the output is requantized (calibrated), float (``enable_float_output``) or
  int32 with the S8S8/S8U8 multiplication range.
"""

from __future__ import annotations

import numpy as np

from .quantization import (K_INT8_RANGE, _F, _max_abs, _product_range, _range_out,
                           _saturate_round, _scalar, code_levels)
from . import quantization as _quant
from ._nn_helpers import erf
from .registry import ForwardContext, get_op



def round_away(x: np.ndarray) -> np.ndarray:
    """``std::round``: half away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def fold_batchnorm(op, p, weight, bias, value):
    """Float weight and bias with the nested BatchNorm folded in (as MXNet, in float32).

    *value(entry)* gives the array of a nested variable entry.
    """
    bn = op.nested_node(p, "BatchNorm")
    if bn is None:
        return weight.astype(_F), None if bias is None else bias.astype(_F)
    gamma, beta, mean, var = (np.asarray(value(e)).astype(_F) for e in bn.inputs[1:5])
    bp = bn.params
    g = np.ones_like(gamma) if bp.fix_gamma else gamma
    # float + double eps: MXNet's alpha is computed in double, then stored as float
    alpha = (g.astype(np.float64) / np.sqrt(var.astype(np.float64) + bp.eps)).astype(_F)
    shape = (-1,) + (1,) * (weight.ndim - 1)
    w = (weight.astype(_F) * alpha.reshape(shape)).astype(_F)
    b = beta - alpha * mean if bias is None else beta + alpha * (bias.astype(_F) - mean)
    return w, b.astype(_F)


def weight_codes(w: np.ndarray, channelwise: bool):
    """int8 weight codes and their per-output-channel scales ``127.5 / R``.

    Per channel when *channelwise*, else one scale (repeated) for the tensor.
    """
    flat = w.reshape(w.shape[0], -1)
    if channelwise:
        rng = np.maximum(np.abs(flat.min(axis=1)), np.abs(flat.max(axis=1))).astype(_F)
    else:
        rng = np.full(w.shape[0], _max_abs(flat.min(), flat.max()), dtype=_F)
    scales = (K_INT8_RANGE / rng).astype(_F)
    # oneDNN's scaled reorder: round half to even, saturate (127.5 -> 127)
    codes = np.clip(np.rint(flat * scales[:, None]), -128, 127).reshape(w.shape)
    return codes.astype(np.int8), scales


def conv_weights(op, p, value):
    """``(int8 weight codes, per-channel scales, folded float bias or None)`` of a conv node."""
    conv = op.nested_node(p, "Convolution")
    bias = None if conv.params.no_bias else value(conv.inputs[2])
    weight, bias = fold_batchnorm(op, p, np.asarray(value(conv.inputs[1])), bias, value)
    codes, scales = weight_codes(weight, op.calibrated(p))
    return codes, scales, bias, weight


def quantized_conv_forward(op, p, inputs, ctx):
    nb = op.n_base(p)
    base, ranges = inputs[:nb], [_scalar(v) for v in inputs[nb:]]
    conv = op.nested_node(p, "Convolution")

    def value(entry):
        return base[op.input_position(p, entry)]

    data = value(conv.inputs[0])
    wcodes, wscales, bias, weight = conv_weights(op, p, value)
    data_scale = _F(code_levels(data.dtype) / _max_abs(ranges[0], ranges[1]))
    acc = _integer_conv(data, wcodes, conv)
    channel = (1, -1) + (1,) * (acc.ndim - 2)
    if bias is not None:
        acc = acc + np.rint((bias * (wscales * data_scale).astype(_F)).astype(_F)).reshape(channel)
    if op.calibrated(p):
        out_dt = np.dtype(op.quantized_out_dtype(p))
        out_scale = _F(code_levels(out_dt) / _max_abs(p.min_calib_range, p.max_calib_range))
        y = acc.astype(_F) * (out_scale / data_scale / wscales).astype(_F).reshape(channel)
    else:
        out_scale = _F(data_scale * wscales[0])
        y = acc.astype(np.float64)
    for kind in op.conv_post_ops(p):
        if kind == "relu":
            y = np.maximum(y, 0)
        elif kind == "clip":   # bounded relu, its bound scaled to output codes (in float)
            y = np.minimum(np.maximum(y, 0), _F(_F(op.clip_bound(p)) * out_scale))
        else:
            s = base[op.sum_index(p)]
            sum_scale = _F(out_scale / _F(code_levels(s.dtype) / _max_abs(ranges[2], ranges[3])))
            y = y + s.astype(_F) * sum_scale
    if op.calibrated(p):
        idx = op.sum_index(p)
        stored = np.dtype(op.stored_dtype(p, None if idx is None else str(base[idx].dtype)))
        codes = _saturate_round(y, stored).view(out_dt)
        return [codes, _range_out(_F(p.min_calib_range)), _range_out(_F(p.max_calib_range))]
    lo, hi = _product_range(_F(weight.min()), _F(weight.max()), ranges[0], ranges[1], 127,
                            127 if data.dtype == np.int8 else 255)
    return [_saturate_round(y, np.int32), _range_out(lo), _range_out(hi)]


def _integer_conv(data, wcodes, node) -> np.ndarray:
    """The float Convolution kernel on integer codes, in float64 (exact for int8 sums)."""
    conv = get_op("Convolution")
    ctx = ForwardContext(node=node, out_dtypes=["float64"])
    x = data.astype(np.float64)
    w = wcodes.astype(np.float64)
    params = conv.parse_attrs({**node.attrs, "no_bias": "True"}, node)
    out = conv.forward(params, [x, w], ctx)[0]
    return np.rint(out).astype(np.int64)


def eltwise_forward(alg: str, alpha: float, y: np.ndarray) -> np.ndarray:
    """oneDNN's eltwise post-op *alg* (``FusedFullyConnected.eltwise``) on float32 *y*."""
    y = y.astype(_F, copy=False)
    a = _F(alpha)
    with np.errstate(over="ignore"):
        if alg == "relu":
            out = np.where(y > 0, y, y * a) if alpha else np.maximum(y, _F(0))
        elif alg == "bounded_relu":
            out = np.minimum(np.maximum(y, _F(0)), a)
        elif alg == "logistic":
            out = _F(1) / (_F(1) + np.exp(-y))
        elif alg == "tanh":
            out = np.tanh(y)
        elif alg == "soft_relu":
            out = np.logaddexp(_F(0), y)
        elif alg == "elu":
            out = np.where(y > 0, y, a * np.expm1(y))
        elif alg == "gelu_erf":
            out = _F(0.5) * y * (_F(1) + erf(y / np.sqrt(_F(2))).astype(_F))
        elif alg == "square":
            out = y * y
        elif alg == "sqrt":
            out = np.sqrt(y)
        elif alg == "exp":
            out = np.exp(y)
        else:
            out = np.abs(y)
    return out.astype(_F)


def quantized_fc_forward(op, p, inputs, ctx):
    """oneDNN's int8 inner product as ``SgMKLDNNFCOp::Forward`` (subgraph/mkldnn/mkldnn_fc.cc)
    sets it up: ``data_scale = L(data) / R(data)``, ``ws = 127.5 / R(weight)``, the int8
    bias moved to ``round(b * data_scale * ws / (127.5 / R(bias)))`` int32 codes; then

    * ``enable_float_output``: ``eltwise(acc * ((1 / data_scale) / ws))``;
    * calibrated, no eltwise: ``acc * ((L(out) / R(calib)) / data_scale / ws)``;
    * calibrated, with an eltwise: ``eltwise(acc * ((1 / data_scale) / ws))``
      scaled by the eltwise post-op's scale ``L(out) / R(calib)`` (so a gelu sees
      real values, not codes), rounded half to even and saturated;
    * uncalibrated: the int32 ``acc`` (eltwise applied to it unscaled) with the
      S8S8/S8U8 multiplication range.
    """
    fc = op.nested_node(p, "FullyConnected")
    fp = fc.params
    nb = op.n_base(p)
    base, ranges = inputs[:nb], [_scalar(v) for v in inputs[nb:]]
    data, weight = base[0], base[1]
    d_lo, d_hi, w_lo, w_hi = ranges[:4]
    data_scale = _F(code_levels(data.dtype) / _max_abs(d_lo, d_hi))
    weight_scale = _F(K_INT8_RANGE / _max_abs(w_lo, w_hi))
    x = data.reshape(data.shape[0], -1) if fp.flatten else data.reshape(-1, data.shape[-1])
    acc = _quant.int_dot(x, weight)
    if op.has_bias(p):
        bias_scale = _F(K_INT8_RANGE / _max_abs(ranges[4], ranges[5]))
        rescale = _F(_F(data_scale * weight_scale) / bias_scale)
        acc = acc + round_away(base[2].astype(_F) * rescale).astype(np.int64)[None, :]
    shape = (data.shape[0], fp.num_hidden) if fp.flatten else data.shape[:-1] + (fp.num_hidden,)
    acc = acc.reshape(shape)
    elt = op.eltwise(p)
    to_real = _F(_F(_F(1) / data_scale) / weight_scale)
    if op.float_output(p):
        y = (acc.astype(_F) * to_real).astype(_F)
        return [y if elt is None else eltwise_forward(*elt, y)]
    if op.calibrated(p):
        out_dt = np.dtype(op.quantized_out_dtype(p))
        out_scale = _F(code_levels(out_dt) / _max_abs(p.min_calib_range, p.max_calib_range))
        if elt is None:
            y = acc.astype(_F) * _F(_F(out_scale / data_scale) / weight_scale)
        else:
            y = eltwise_forward(*elt, acc.astype(_F) * to_real) * out_scale
        return [_saturate_round(y, out_dt), _range_out(_F(p.min_calib_range)),
                _range_out(_F(p.max_calib_range))]
    if elt is None or elt == ("relu", 0.0):
        y = acc.astype(np.float64) if elt is None else np.maximum(acc.astype(np.float64), 0)
    else:
        y = eltwise_forward(*elt, acc.astype(_F))
    levels = 127 if data.dtype == np.int8 else 255
    lo, hi = _product_range(d_lo, d_hi, w_lo, w_hi, 127, levels)
    return [_saturate_round(y, np.int32), _range_out(lo), _range_out(hi)]


def quantized_selfatt_forward(op, p, inputs, ctx):
    """``_sg_mkldnn_selfatt_qk``/``_valatt`` on int8 (and uint8 attention) codes.

    qk: ``acc = Q.K^T`` per (batch, head); valatt: ``acc = att.V``.  The
    scale is ``L(out) / R(calib) / (s_a * s_b)`` (calibrated, int8 output),
    ``1 / (s_a * s_b)`` (``enable_float_output``) or 1 (int32), times
    ``1/sqrt(head_dim)`` for qk, applied in float32 and rounded half to even.
    """
    from .attention import _merge_heads, _split_heads
    nb = op.n_base(p)
    base, ranges = inputs[:nb], [_scalar(v) for v in inputs[nb:]]
    qkv = base[0]
    q, k, v = _split_heads(qkv.astype(np.int64), p.heads, 3)
    s_qkv = _F(code_levels(qkv.dtype) / _max_abs(ranges[0], ranges[1]))
    if op.name == "_sg_mkldnn_selfatt_qk":
        acc = np.matmul(q, k.transpose(0, 2, 1))
        s_b = s_qkv
        extra = _F(np.sqrt(_F(q.shape[-1])))
    else:
        att = base[1]
        acc = np.matmul(att.astype(np.int64), v)
        s_b = _F(code_levels(att.dtype) / _max_abs(ranges[2], ranges[3]))
        extra = _F(1)
    if op.float_output(p):
        scale = _F(_F(_F(1) / _F(s_qkv * s_b)) / extra)
        y = (acc.astype(_F) * scale).astype(_F)
    elif op.calibrated(p):
        out_scale = _F(K_INT8_RANGE / _max_abs(p.min_calib_range, p.max_calib_range))
        scale = _F(_F(out_scale / _F(s_qkv * s_b)) / extra)
        y = _saturate_round(acc.astype(_F) * scale, np.int8)
    else:
        y = _saturate_round(acc.astype(_F) * _F(_F(1) / extra), np.int32)
    if op.name != "_sg_mkldnn_selfatt_qk":
        y = _merge_heads(y, qkv.shape[1], p.heads)
    if op.float_output(p):
        return [y]
    if op.calibrated(p):
        return [y, _range_out(_F(p.min_calib_range)), _range_out(_F(p.max_calib_range))]
    if op.name == "_sg_mkldnn_selfatt_qk":
        lo, hi = _product_range(ranges[0], ranges[1], ranges[0], ranges[1], 127, 127)
    else:
        lo, hi = _product_range(ranges[0], ranges[1], ranges[2], ranges[3], 127, 255)
    return [y, _range_out(lo), _range_out(hi)]
