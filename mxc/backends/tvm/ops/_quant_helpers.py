"""Relax building blocks shared by the int8 lowerings: ranges, saturation, constants.

``quantization.py`` (quantize/requantize, the classic quantized conv/FC),
``quantized.py`` (the quantized twins of float ops) and ``fused_mkldnn.py``
(oneDNN's fused int8 nodes) follow the same MXNet conventions -- symmetric
ranges ``max(|min|, |max|)``, codes rounded half to even and saturated, the
S8S8/S8U8 product range ``(R_a / 127) * (R_b / levels) * 2**31`` -- and each
module used to carry its own copy of these helpers.  One copy lives here, so a
fix to MXNet's arithmetic lands in every lowering at once.  The leading
underscore keeps the module out of the converter families
(:func:`mxc.backends.tvm.converter.registered_converters` imports the others).

Where the copies differed, both forms are kept under names that say how:
:func:`max_abs_f32` casts its inputs to float32 first (the fused nodes' ranges
may arrive in another float type), :func:`weight_product_range` takes the
weight's range as a compile-time number (the fused convolution quantizes its
weight while compiling) where :func:`product_range` takes both ranges as
tensors.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering
from ._common import R, const

__all__ = ["INT32_RANGE", "vec", "max_abs", "max_abs_f32", "saturate", "product_range",
           "weight_product_range"]

F = "float32"
#: 2**31 - 1 as float32 (2**31): the int32 accumulator's range in MXNet's range formulas
INT32_RANGE = float(np.float32(2147483647))


def vec(ctx: Lowering, value: float):
    """*value* as a shape-``(1,)`` float32 constant: how MXNet returns a min/max range."""
    return ctx.const(np.full((1,), value, dtype=np.float32))


def max_abs(ctx: Lowering, lo, hi):
    """The symmetric range ``max(|lo|, |hi|)`` of the (1,) tensors *lo*, *hi*."""
    return ctx.emit(R.maximum(R.abs(lo), R.abs(hi)))


def max_abs_f32(ctx: Lowering, lo, hi):
    """:func:`max_abs` of *lo* and *hi* cast to float32 first (no cast when they are)."""
    return max_abs(ctx, ctx.astype(lo, F), ctx.astype(hi, F))


def saturate(ctx: Lowering, y, dtype: str):
    """Float *y* as integer *dtype*: rounded half to even (oneDNN's rounding), clipped."""
    info = np.iinfo(dtype)
    y = ctx.emit(R.clip(R.round(y), float(info.min), float(info.max)))
    return ctx.astype(y, dtype)


def product_range(ctx: Lowering, a_lo, a_hi, b_lo, b_hi, b_levels: float):
    """MXNet's S8S8/S8U8 range: ``(R_a / 127) * (R_b / b_levels) * 2**31``, symmetric."""
    la = ctx.emit(R.divide(max_abs(ctx, a_lo, a_hi), const(127.0, F)))
    lb = ctx.emit(R.divide(max_abs(ctx, b_lo, b_hi), const(b_levels, F)))
    hi = ctx.emit(R.multiply(R.multiply(la, lb), const(INT32_RANGE, F)))
    return ctx.emit(R.negative(hi)), hi


def weight_product_range(ctx: Lowering, w_range: float, d_lo, d_hi, d_levels: float):
    """:func:`product_range` with the weight's range *w_range* known at compile time:
    ``(R_w / 127) * (R_d / d_levels) * 2**31``, symmetric (the data range cast to float32)."""
    la = np.float32(np.float32(w_range) / np.float32(127))
    lb = ctx.emit(R.divide(max_abs_f32(ctx, d_lo, d_hi), const(d_levels, F)))
    hi = ctx.emit(R.multiply(R.multiply(lb, const(la, F)), const(INT32_RANGE, F)))
    return ctx.emit(R.negative(hi)), hi
