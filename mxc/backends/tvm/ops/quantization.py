"""Quantize / dequantize / requantize (``mxc/compiler/ops/quantization.py``).

MXNet's int8 conventions: ranges are symmetric ``R = max(|min|, |max|)``;
codes are ``saturate(rint(x * scale))`` (round half to even, as oneDNN)
with ``scale = 127.5 / R`` (int8) or ``255.5 / R`` (uint8) for quantize_v2
and ``in_range / 2**31 * 127 (255) / R`` for requantize.  Uncalibrated
ranges are computed from the data at run time.  The quantized conv/FC
kernels stay on the host.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, const

K_INT8_RANGE = 127.5
K_UINT8_RANGE = 255.5
INT32_RANGE = float(np.float32(2147483647))
F = "float32"


def _out_type(p) -> str:
    if p.out_type == "auto":
        if (p.min_calib_range is not None and p.max_calib_range is not None
                and p.min_calib_range >= 0.0):
            return "uint8"
        return "int8"
    return p.out_type


def _calibrated(p) -> bool:
    return p.min_calib_range is not None and p.max_calib_range is not None


def _vec(value: float):
    from tvm import relax
    return relax.const(np.full((1,), value, dtype=F), F)


def _max_abs(ctx: Lowering, lo, hi):
    return ctx.emit(R.maximum(R.abs(lo), R.abs(hi)))


def _saturate_round(ctx: Lowering, xf, dtype: str):
    info = np.iinfo(dtype)
    y = ctx.emit(R.clip(R.round(xf), float(info.min), float(info.max)))   # half to even
    return ctx.astype(y, dtype)


@register_converter("_contrib_quantize_v2")
def quantize_v2(ctx: Lowering):
    p = ctx.p
    x = ctx.inputs[0]
    out_type = _out_type(p)
    in_dt = ctx.in_dtypes[0]
    if in_dt in ("int8", "uint8"):
        if _calibrated(p):
            lo, hi = p.min_calib_range, p.max_calib_range
        else:
            lo, hi = (0.0, 255.0) if in_dt == "uint8" else (-127.0, 127.0)
        return [ctx.astype(x, out_type), _vec(float(np.float32(lo))),
                _vec(float(np.float32(hi)))]
    xf = ctx.astype(x, F)
    if _calibrated(p):
        lo, hi = _vec(float(np.float32(p.min_calib_range))), \
            _vec(float(np.float32(p.max_calib_range)))
    else:
        flat = ctx.reshape(xf, (int(np.prod(ctx.in_shapes[0])),))
        lo = ctx.emit(R.min(flat, axis=[0], keepdims=True))
        hi = ctx.emit(R.max(flat, axis=[0], keepdims=True))
    real = _max_abs(ctx, lo, hi)
    levels = K_UINT8_RANGE if out_type == "uint8" else K_INT8_RANGE
    scale = ctx.emit(R.divide(const(levels, F), real))
    q = _saturate_round(ctx, ctx.emit(R.multiply(xf, scale)), out_type)
    if out_type == "uint8":
        return [q, lo, hi]
    return [q, ctx.emit(R.negative(real)), real]


@register_converter("_contrib_dequantize")
def dequantize(ctx: Lowering):
    q, lo, hi = ctx.inputs
    levels = K_UINT8_RANGE if ctx.in_dtypes[0] == "uint8" else K_INT8_RANGE
    scale = ctx.emit(R.divide(_max_abs(ctx, ctx.astype(lo, F), ctx.astype(hi, F)),
                              const(levels, F)))
    return ctx.emit(R.multiply(ctx.astype(q, F), scale))


@register_converter("_contrib_requantize")
def requantize(ctx: Lowering):
    p = ctx.p
    x, lo, hi = ctx.inputs
    out_type = _out_type(p)
    in_range = _max_abs(ctx, ctx.astype(lo, F), ctx.astype(hi, F))
    if _calibrated(p):
        real = _vec(float(max(abs(np.float32(p.min_calib_range)),
                              abs(np.float32(p.max_calib_range)))))
    else:
        flat = ctx.reshape(ctx.astype(x, "int64"), (int(np.prod(ctx.in_shapes[0])),))
        data_range = ctx.astype(ctx.emit(R.max(R.abs(flat), axis=[0], keepdims=True)), F)
        real = ctx.emit(R.divide(R.multiply(data_range, in_range), const(INT32_RANGE, F)))
    first = ctx.emit(R.divide(in_range, const(INT32_RANGE, F)))
    levels = 255.0 if out_type == "uint8" else 127.0
    scale = ctx.emit(R.multiply(first, R.divide(const(levels, F), real)))
    q = _saturate_round(ctx, ctx.emit(R.multiply(ctx.astype(x, F), scale)), out_type)
    if out_type == "uint8":
        return [q, _vec(0.0), real]
    return [q, ctx.emit(R.negative(real)), real]


register_host_only(
    "_contrib_quantized_conv", "_contrib_quantized_fully_connected",
    reason="oneDNN's int8 kernels (uint8/int8 operands, raw int8 bias codes, int32 "
           "accumulation) are not lowered yet; they run on the host")
