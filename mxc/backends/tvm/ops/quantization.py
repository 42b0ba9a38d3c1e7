"""Quantize / dequantize / requantize (``mxc/compiler/ops/quantization.py``).

MXNet's int8 conventions: ranges are symmetric ``R = max(|min|, |max|)``;
codes are ``saturate(rint(x * scale))`` (round half to even, as oneDNN)
with ``scale = 127.5 / R`` (int8) or ``255.5 / R`` (uint8) for quantize_v2
and ``in_range / 2**31 * 127 (255) / R`` for requantize.  Uncalibrated
ranges are computed from the data at run time.  The classic quantized
conv/FC accumulate uint8/int8 x int8 in int32 with MXNet's bias handling
and S8S8/S8U8 output ranges.
"""

from __future__ import annotations

import numpy as np

from ....compiler.ops.quantization import K_INT8_RANGE, code_levels
from ..converter import Lowering, register_converter
from ._common import R, const
from ._quant_helpers import INT32_RANGE, max_abs, product_range, saturate, vec

F = "float32"


def _reduce_all(ctx: Lowering, x, fn):
    """*fn* (``R.min``/``R.max``) over every element of *x*, shape ``(1,)``.

    A 4-D *x* keeps its last axis first (the image width of an NCHW input: a
    vector reduction) and reduces that after; over all axes at once TVM left a
    scalar loop (int8_mobilenet0.5_nocalib's input: 15 us each for 27,648 floats)."""
    shape = ctx.in_shapes[0]
    if len(shape) != 4:
        return ctx.emit(fn(ctx.reshape(x, (int(np.prod(shape)),)), axis=[0], keepdims=True))
    rows = ctx.emit(fn(x, axis=[0, 1, 2], keepdims=False))
    return ctx.emit(fn(rows, axis=[0], keepdims=True))


@register_converter("_contrib_quantize_v2")
def quantize_v2(ctx: Lowering):
    p = ctx.p
    x = ctx.inputs[0]
    out_type = ctx.node.opdef.out_type(p)
    in_dt = ctx.in_dtypes[0]
    if in_dt in ("int8", "uint8"):
        lo, hi = ctx.node.opdef.passthrough_range(p, in_dt)
        return [ctx.astype(x, out_type), vec(ctx, float(np.float32(lo))),
                vec(ctx, float(np.float32(hi)))]
    xf = ctx.astype(x, F)
    if ctx.node.opdef.calibrated(p):
        lo, hi = vec(ctx, float(np.float32(p.min_calib_range))), \
            vec(ctx, float(np.float32(p.max_calib_range)))
    else:
        lo, hi = (_reduce_all(ctx, xf, fn) for fn in (R.min, R.max))
    real = max_abs(ctx, lo, hi)
    scale = ctx.emit(R.divide(const(code_levels(out_type), F), real))
    q = saturate(ctx, ctx.emit(R.multiply(xf, scale)), out_type)
    if out_type == "uint8":
        return [q, lo, hi]
    return [q, ctx.emit(R.negative(real)), real]


@register_converter("_contrib_dequantize")
def dequantize(ctx: Lowering):
    q, lo, hi = ctx.inputs
    scale = ctx.emit(R.divide(max_abs(ctx, ctx.astype(lo, F), ctx.astype(hi, F)),
                              const(code_levels(ctx.in_dtypes[0]), F)))
    return ctx.emit(R.multiply(ctx.astype(q, F), scale))


@register_converter("_contrib_requantize")
def requantize(ctx: Lowering):
    p = ctx.p
    x, lo, hi = ctx.inputs
    out_type = ctx.node.opdef.out_type(p)
    in_range = max_abs(ctx, ctx.astype(lo, F), ctx.astype(hi, F))
    if ctx.node.opdef.calibrated(p):
        real = vec(ctx, float(max(abs(np.float32(p.min_calib_range)),
                                  abs(np.float32(p.max_calib_range)))))
    else:
        # max |x| (int64: |INT32_MIN| is exact) over x as it is, not over a flattened
        # copy: a reshape pins the channels-last layout pass back to NCHW, and that int64
        # transpose cost more than mobilenet0.5_nocalib's convolutions; over all axes at
        # once TVM left a scalar loop, per channel first it vectorises (0.86 -> 0.55 ms)
        peak = R.abs(ctx.astype(x, "int64"))
        rank = len(ctx.in_shapes[0])
        if rank == 4:    # per channel first: a reduction the channel axis vectorises
            peak, rank = ctx.emit(R.max(peak, axis=[0, 2, 3], keepdims=False)), 1
        peak = ctx.emit(R.max(peak, axis=list(range(rank)), keepdims=False))
        data_range = ctx.astype(ctx.reshape(peak, (1,)), F)
        real = ctx.emit(R.divide(R.multiply(data_range, in_range), const(INT32_RANGE, F)))
    first = ctx.emit(R.divide(in_range, const(INT32_RANGE, F)))
    levels = 255.0 if out_type == "uint8" else 127.0
    scale = ctx.emit(R.multiply(first, R.divide(const(levels, F), real)))
    q = saturate(ctx, ctx.emit(R.multiply(ctx.astype(x, F), scale)), out_type)
    if out_type == "uint8":
        return [q, vec(ctx, 0.0), real]
    return [q, ctx.emit(R.negative(real)), real]


@register_converter("_contrib_quantized_conv")
def quantized_conv(ctx: Lowering):
    """uint8/int8 data x int8 weight -> int32; the int8 bias is added as raw codes."""
    p = ctx.p
    nw = 2 if p.no_bias else 3
    d_lo, d_hi, w_lo, w_hi = ctx.inputs[nw:nw + 4]
    acc = ctx.emit(R.nn.conv2d(ctx.inputs[0], ctx.inputs[1], strides=p.stride or (1, 1),
                               padding=p.pad or (0, 0), out_dtype="int32"))
    if not p.no_bias:
        acc = ctx.emit(R.add(acc, R.reshape(ctx.astype(ctx.inputs[2], "int32"), (1, -1, 1, 1))))
    lo, hi = product_range(ctx, d_lo, d_hi, w_lo, w_hi, 127.0)
    return [acc, lo, hi]


@register_converter("_contrib_quantized_fully_connected")
def quantized_fully_connected(ctx: Lowering):
    """int8/uint8 data x int8 weight -> int32; the bias moved into the accumulator's scale."""
    p = ctx.p
    nw = 2 if p.no_bias else 3
    d_lo, d_hi, w_lo, w_hi = ctx.inputs[nw:nw + 4]
    shape = ctx.in_shapes[0]
    rows = shape[0] if p.flatten else int(np.prod(shape[:-1]))
    x = ctx.reshape(ctx.inputs[0], (rows, int(np.prod(shape)) // rows))
    acc = ctx.emit(R.matmul(x, R.permute_dims(ctx.inputs[1], [1, 0]), out_dtype="int32"))
    uint8 = ctx.in_dtypes[0] == "uint8"
    if not p.no_bias:
        d_scale = ctx.emit(R.divide(const(code_levels(ctx.in_dtypes[0]), F),
                                    max_abs(ctx, d_lo, d_hi)))
        w_scale = ctx.emit(R.divide(const(K_INT8_RANGE, F), max_abs(ctx, w_lo, w_hi)))
        b_range = max_abs(ctx, *ctx.inputs[nw + 4:nw + 6])
        rescale = ctx.emit(R.divide(R.multiply(R.multiply(d_scale, w_scale), b_range),
                                    const(K_INT8_RANGE, F)))
        bias = ctx.emit(R.trunc(R.multiply(ctx.astype(ctx.inputs[2], F), rescale)))
        acc = ctx.emit(R.add(acc, R.reshape(ctx.astype(bias, "int32"), (1, -1))))
    lo, hi = product_range(ctx, d_lo, d_hi, w_lo, w_hi, 255.0 if uint8 else 127.0)
    return [ctx.reshape(acc, ctx.out_shapes[0]), lo, hi]
