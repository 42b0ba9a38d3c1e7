"""Elementwise unary math (``mxc/compiler/ops/elemwise_unary.py``).

Ops built on MXNet's ``math::`` helpers compute in float32 (float64 stays
double) and cast back, so float16 and integer tensors behave as in MXNet;
``negative``/``sign``/``relu``/``logical_not`` work in the tensor's own dtype
(float16 through float32).  Functions TIR has no intrinsic for (expm1, cbrt,
tgamma, lgamma) call the C math library (libm on CPU, CUDA's on GPU); erfinv
is computed in TIR.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import tirx

from ..converter import Lowering, register_converter
from ._common import (
    R,
    compute_dtype,
    const,
    extern_unary,
    in_dtype,
    is_float,
    math_dtype,
    prim_dtype,
    te_elementwise,
)

PI_F32 = np.float32(math.pi)
DEG_PER_RAD_F32 = float(np.float32(180.0) / PI_F32)
RAD_PER_DEG_F32 = float(PI_F32 / np.float32(180.0))


def _math(fn):
    """A converter applying relax-level ``fn(x, dtype)`` in the math dtype."""
    def convert(ctx: Lowering):
        x = ctx.inputs[0]
        work = math_dtype(ctx.in_dtypes[0])
        return in_dtype(ctx, x, lambda v: fn(ctx, v, work), work)
    return convert


def _exact(fn):
    """A converter applying ``fn(x, dtype)`` in the tensor's compute dtype."""
    def convert(ctx: Lowering):
        x = ctx.inputs[0]
        work = compute_dtype(ctx.in_dtypes[0])
        return in_dtype(ctx, x, lambda v: fn(ctx, v, work), work)
    return convert


def _te_math(scalar_fn):
    """A converter applying a TIR scalar function in the math dtype."""
    def convert(ctx: Lowering):
        work = math_dtype(ctx.in_dtypes[0])
        x = ctx.astype(ctx.inputs[0], work)
        y = te_elementwise(ctx, scalar_fn, x, name=f"mxc_{ctx.op}")
        return ctx.astype(y, ctx.out_dtype)
    return convert


def _simple(op):
    return _math(lambda ctx, x, dt: op(x))


_RELAX_MATH = {
    "abs": R.abs, "sqrt": R.sqrt, "exp": R.exp, "log": R.log, "ceil": R.ceil,
    "floor": R.floor, "trunc": R.trunc, "sin": R.sin, "cos": R.cos, "tan": R.tan,
    "arcsin": R.asin, "arccos": R.acos, "arctan": R.atan, "sinh": R.sinh, "cosh": R.cosh,
    "tanh": R.tanh, "arcsinh": R.asinh, "arccosh": R.acosh, "arctanh": R.atanh, "erf": R.erf,
}
for _name, _op in _RELAX_MATH.items():
    register_converter(_name)(_simple(_op))


# -- arithmetic with constants ------------------------------------------------------
@register_converter("reciprocal")
@_math
def _reciprocal(ctx, x, dt):
    return R.divide(const(1, dt), x)


@register_converter("square")
@_math
def _square(ctx, x, dt):
    return R.multiply(x, x)


@register_converter("rsqrt")
@_math
def _rsqrt(ctx, x, dt):
    return R.divide(const(1, dt), R.sqrt(x))


@register_converter("log10")
@_math
def _log10(ctx, x, dt):
    return R.divide(R.log(x), const(math.log(10.0), dt))


@register_converter("log2")
@_math
def _log2(ctx, x, dt):
    return R.divide(R.log(x), const(math.log(2.0), dt))


@register_converter("sigmoid")
@_math
def _sigmoid(ctx, x, dt):
    return R.divide(const(1, dt), R.add(const(1, dt), R.exp(R.negative(x))))


@register_converter("softsign")
@_math
def _softsign(ctx, x, dt):
    return R.divide(x, R.add(const(1, dt), R.abs(x)))


@register_converter("degrees")
@_math
def _degrees(ctx, x, dt):
    return R.multiply(x, const(DEG_PER_RAD_F32, dt))


@register_converter("radians")
@_math
def _radians(ctx, x, dt):
    return R.multiply(x, const(RAD_PER_DEG_F32, dt))


# -- rounding (MXNet's own tie rules) -----------------------------------------------
@register_converter("round")
@_math
def _round(ctx, x, dt):
    """Halves away from zero."""
    ax = ctx.emit(R.abs(x))
    fl = ctx.emit(R.floor(ax))
    up = ctx.emit(R.astype(R.greater_equal(R.subtract(ax, fl), const(0.5, dt)), dt))
    r = ctx.emit(R.add(fl, up))
    return R.where(R.less(x, const(0, dt)), R.negative(r), r)


@register_converter("rint")
@_math
def _rint(ctx, x, dt):
    """The nearer of floor/ceil, floor on a tie (MXNet's rule)."""
    fl = ctx.emit(R.floor(x))
    ce = ctx.emit(R.ceil(x))
    return R.where(R.less_equal(R.subtract(x, fl), R.subtract(ce, x)), fl, ce)


@register_converter("fix")
@_math
def _fix(ctx, x, dt):
    fl = ctx.emit(R.floor(x))
    ce = ctx.emit(R.ceil(x))
    return R.where(R.less(R.abs(fl), R.abs(ce)), fl, ce)


# -- ops in the tensor's own dtype ----------------------------------------------------
@register_converter("negative")
@_exact
def _negative(ctx, x, dt):
    return R.negative(x)


@register_converter("sign")
@_exact
def _sign(ctx, x, dt):
    zero = const(0, dt)
    return R.where(R.less(x, zero), const(-1, dt),
                   R.where(R.greater(x, zero), const(1, dt), zero))


@register_converter("relu")
@_exact
def _relu(ctx, x, dt):
    zero = const(0, dt)
    keep = R.greater(x, zero)
    if is_float(dt):
        keep = R.logical_or(keep, R.isnan(x))
    return R.where(keep, x, zero)


@register_converter("logical_not")
@_exact
def _logical_not(ctx, x, dt):
    return R.astype(R.equal(x, const(0, dt)), dt)


# -- C math library ---------------------------------------------------------------------
register_converter("expm1")(_te_math(extern_unary("expm1f", "expm1")))
register_converter("gamma")(_te_math(extern_unary("tgammaf", "tgamma")))
register_converter("gammaln")(_te_math(extern_unary("lgammaf", "lgamma")))
register_converter("cbrt")(_te_math(extern_unary("cbrtf", "cbrt")))


@register_converter("rcbrt")
def _rcbrt(ctx: Lowering):
    cbrt = extern_unary("cbrtf", "cbrt")
    return _te_math(lambda v: tirx.const(1, prim_dtype(v)) / cbrt(v))(ctx)


register_converter("log1p")(_te_math(tirx.log1p))


def erfinv_scalar(y):
    """erfinv in TIR: Giles' approximation polished by two Newton steps on erf.

    ``|y| == 1`` gives +-inf and ``|y| > 1`` NaN, as the C/MXNet versions do.
    """
    dt = prim_dtype(y)

    def c(v):
        return tirx.const(v, dt)

    w = -tirx.log((c(1.0) - y) * (c(1.0) + y))
    # central region (w < 5)
    wc = w - c(2.5)
    pc = c(2.81022636e-08)
    for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        pc = c(k) + pc * wc
    # tail region
    wt = tirx.sqrt(w) - c(3.0)
    pt = c(-0.000200214257)
    for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        pt = c(k) + pt * wt
    x = tirx.Select(w < c(5.0), pc, pt) * y
    two_over_sqrt_pi = c(2.0 / math.sqrt(math.pi))
    for _ in range(2):
        x = x - (tirx.erf(x) - y) / (two_over_sqrt_pi * tirx.exp(-x * x))
    ay = tirx.abs(y)
    inf = c(float("inf"))
    x = tirx.Select(ay == c(1.0), tirx.Select(y > c(0.0), inf, -inf), x)
    return tirx.Select(tirx.any(ay > c(1.0), tirx.isnan(y)), c(float("nan")), x)


register_converter("erfinv")(_te_math(erfinv_scalar))
