"""Identities, constant-likes, ``clip``, ``hard_sigmoid``, ``smooth_l1``
(``mxc/compiler/ops/elemwise_misc.py``)."""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, const, identity, math_dtype, scalar_as

register_converter("_copy", "BlockGrad", "make_loss", module=__name__)(identity)


@register_converter("zeros_like")
def zeros_like(ctx: Lowering):
    return R.zeros(ctx.out_shape, ctx.out_dtype)


@register_converter("ones_like")
def ones_like(ctx: Lowering):
    return R.ones(ctx.out_shape, ctx.out_dtype)


@register_converter("clip")
def clip(ctx: Lowering):
    """Bounds stored as float32 and converted to the dtype; upper bound tested first."""
    x = ctx.inputs[0]
    dt = ctx.in_dtypes[0]
    lo = const(scalar_as(np.float32(ctx.p.a_min), dt), dt)
    hi = const(scalar_as(np.float32(ctx.p.a_max), dt), dt)
    return R.where(R.greater(x, hi), hi, R.where(R.less(x, lo), lo, x))


@register_converter("hard_sigmoid")
def hard_sigmoid(ctx: Lowering):
    x = ctx.inputs[0]
    dt = ctx.in_dtypes[0]
    work = math_dtype(dt)
    alpha = const(float(np.float32(ctx.p.alpha)), work)
    beta = const(float(np.float32(ctx.p.beta)), work)
    y = ctx.emit(R.multiply(alpha, ctx.astype(x, work)))
    if dt == "float16":   # half arithmetic rounds after the multiply too
        y = ctx.astype(ctx.astype(y, "float16"), work)
    y = ctx.astype(ctx.emit(R.add(y, beta)), dt)
    one, zero = const(1, dt), const(0, dt)
    y = ctx.emit(R.where(R.less(one, y), one, y))
    return R.where(R.greater(zero, y), zero, y)


@register_converter("smooth_l1")
def smooth_l1(ctx: Lowering):
    dt = ctx.in_dtypes[0]
    work = math_dtype(dt)
    s = float(np.asarray(scalar_as(ctx.p.scalar, dt)).astype(work))
    s2 = np.asarray(s * s, dtype=work)
    inv = float(np.asarray(1, dtype=work) / s2)
    x = ctx.astype(ctx.inputs[0], work)
    half = const(0.5, work)
    inv_c = const(inv, work)
    half_inv = const(0.5 * inv, work)
    quad = R.multiply(R.multiply(R.multiply(half, x), x), const(float(s2), work))
    y = R.where(R.greater(x, inv_c), R.subtract(x, half_inv),
                R.where(R.less(x, R.negative(inv_c)), R.subtract(R.negative(x), half_inv), quad))
    return ctx.astype(ctx.emit(y), ctx.out_dtype)
