"""Elementwise unary math: ``y = f(x)``, same shape and dtype as ``x``.

Where the computation happens matters for matching MXNet 1.9.1 bit for bit:

* Ops built on MXNet's ``math::`` helpers (exp, log, trig, rounding, abs,
  square ...) compute float64 in double and *every other dtype* in float32:
  float16 is widened and rounded back once, integer tensors go through
  float32 and are truncated back (``exp`` of an int32 tensor is an int32
  tensor).  These subclass :class:`MathUnaryOp`.
* A few ops work in the tensor's own type (``negative``, ``sign``, ``relu``,
  ``logical_not``): :class:`ExactUnaryOp`.

Rounding conventions (checked against MXNet): ``round`` rounds halves away
from zero; ``rint`` picks the *lower* neighbour on an exact tie
(``rint(2.5) == 2``, ``rint(-2.5) == -3``: MXNet's own rule, not IEEE
half-to-even); ``fix`` and ``trunc`` round toward zero.

Identity-like ops (``_copy``, ``BlockGrad``, ``make_loss``, ``zeros_like``,
``ones_like``) and ``clip``/``hard_sigmoid``/``smooth_l1`` live in
:mod:`.elemwise_misc`.
"""

from __future__ import annotations

import math

import numpy as np

from .common import UnaryOp, cast_to, compute_dtype
from .elemwise_binary import math_dtype, to_dtype_trunc
from .registry import register_op

# MXNet's single-precision constants (mshadow_op.h keeps PI as a float)
PI_F32 = np.float32(math.pi)
DEG_PER_RAD_F32 = np.float32(180.0) / PI_F32
RAD_PER_DEG_F32 = PI_F32 / np.float32(180.0)


class MathUnaryOp(UnaryOp):
    """``y = fn(x)`` computed in :func:`math_dtype` (float32 unless float64).

    ``grad``, when set, is ``(x, y, dy) -> dx``: the op's derivative rule.
    """

    grad = None
    #: computed in float64 and rounded: the result of a correctly rounded libm (glibc's
    #: ``expf``/``logf``, which MXNet's float32 kernels call), not numpy's faster float32 loops
    rounded_from_double = False

    def work_dtype(self, dtype) -> np.dtype:
        if self.rounded_from_double and np.dtype(dtype) == np.float32:
            return np.dtype(np.float64)
        return math_dtype(dtype)

    def has_backward(self) -> bool:
        return type(self).grad is not None

    def backward(self, p, out_grads, inputs, outputs):
        if type(self).grad is None:
            return super().backward(p, out_grads, inputs, outputs)
        x, y, dy = inputs[0], outputs[0], out_grads[0]
        with np.errstate(all="ignore"):
            return [np.asarray(type(self).grad(x, y, dy)).astype(x.dtype, copy=False)]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        work = self.work_dtype(x.dtype)
        with np.errstate(all="ignore"):
            y = type(self).fn(x.astype(work, copy=False))
            return [cast_to(to_dtype_trunc(y, x.dtype), ctx.out_dtypes[0] or x.dtype)]


class ExactUnaryOp(MathUnaryOp):
    """``y = fn(x)`` in the tensor's own dtype (float16 through float32)."""

    def work_dtype(self, dtype) -> np.dtype:
        return compute_dtype(dtype)


def _vectorized(scalar_fn):
    """Apply a ``math`` function elementwise in double, keeping the array's dtype."""
    vec = np.vectorize(scalar_fn, otypes=[np.float64])

    def fn(x):
        x = np.asarray(x)
        if x.size == 0:
            return x.copy()
        return vec(x.astype(np.float64)).astype(x.dtype)
    return fn


def _tgamma(v: float) -> float:
    """C ``tgamma``: poles give +-inf at zero and NaN at negative integers."""
    try:
        return math.gamma(v)
    except ValueError:
        return math.copysign(math.inf, v) if v == 0 else math.nan
    except OverflowError:
        return math.inf


def _lgamma(v: float) -> float:
    """C ``lgamma`` (log of |gamma|): +inf at the poles."""
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):
        return math.inf


_erf = _vectorized(math.erf)
_gamma = _vectorized(_tgamma)
_gammaln = _vectorized(_lgamma)


def erfinv(y):
    """Inverse error function, accurate to double rounding.

    Start from Winitzki's closed-form approximation (relative error ~2e-3)
    and polish with Newton steps on ``erf(x) - y`` (quadratic convergence,
    so four steps reach double precision).  ``|y| == 1`` gives +-inf and
    ``|y| > 1`` NaN.
    """
    y = np.asarray(y, dtype=np.float64)
    a = 0.147
    with np.errstate(all="ignore"):
        ln = np.log1p(-y * y)
        t = 2.0 / (math.pi * a) + 0.5 * ln
        x = np.copysign(np.sqrt(np.sqrt(t * t - ln / a) - t), y)
        inside = np.abs(y) < 1
        x = np.where(inside, x, 0.0)
        two_over_sqrt_pi = 2.0 / math.sqrt(math.pi)
        for _ in range(4):
            step = (_erf(x) - y) / (two_over_sqrt_pi * np.exp(-x * x))
            x = np.where(inside, x - step, x)
        x = np.where(np.abs(y) == 1, np.copysign(np.inf, y), x)
        x = np.where((np.abs(y) > 1) | np.isnan(y), np.nan, x)
    return x


def _round_half_away(x):
    """Nearest integer, halves away from zero (C ``round``); exact in any precision."""
    ax = np.abs(x)
    fl = np.floor(ax)
    r = fl + (ax - fl >= 0.5).astype(x.dtype)
    return np.copysign(r, x)


def _mxnet_rint(x):
    """MXNet's ``rint``: the nearer of floor/ceil, floor on a tie."""
    fl, ce = np.floor(x), np.ceil(x)
    return np.where((x - fl) <= (ce - x), fl, ce)


def _fix(x):
    """Toward zero, choosing between floor and ceil as MXNet does."""
    fl, ce = np.floor(x), np.ceil(x)
    return np.where(np.abs(fl) < np.abs(ce), fl, ce)


def _scaled(const_f32):
    """Multiply by a float32 constant (promoted as C promotes it for doubles)."""
    return lambda x: x * x.dtype.type(const_f32)


# ---------------------------------------------------------------------------
# basic
# ---------------------------------------------------------------------------
@register_op("abs")
class Abs(MathUnaryOp):
    fn = staticmethod(np.abs)
    grad = staticmethod(lambda x, y, dy: dy * np.sign(x))


@register_op("negative")
class Negative(ExactUnaryOp):
    fn = staticmethod(np.negative)
    grad = staticmethod(lambda x, y, dy: -dy)


@register_op("sign")
class Sign(ExactUnaryOp):
    """-1, 0 or 1; NaN maps to 0 (MXNet compares, it does not propagate)."""
    fn = staticmethod(lambda x: np.where(x < 0, -1, np.where(x > 0, 1, 0)).astype(x.dtype))


@register_op("relu")
class Relu(ExactUnaryOp):
    """``x if x > 0 else 0``; NaN passes through."""
    fn = staticmethod(lambda x: np.where(np.isnan(x) | (x > 0), x, x.dtype.type(0))
                      if x.dtype.kind == "f" else np.where(x > 0, x, 0).astype(x.dtype))
    grad = staticmethod(lambda x, y, dy: dy * (x > 0))


@register_op("logical_not")
class LogicalNot(ExactUnaryOp):
    """1 where ``x == 0`` else 0, in the input dtype (NaN counts as non-zero)."""
    fn = staticmethod(lambda x: (x == 0).astype(x.dtype))


@register_op("reciprocal")
class Reciprocal(MathUnaryOp):
    fn = staticmethod(lambda x: x.dtype.type(1) / x)
    grad = staticmethod(lambda x, y, dy: -dy / (x * x))


@register_op("square")
class Square(MathUnaryOp):
    fn = staticmethod(lambda x: x * x)
    grad = staticmethod(lambda x, y, dy: 2 * x * dy)


@register_op("sqrt")
class Sqrt(MathUnaryOp):
    fn = staticmethod(np.sqrt)
    grad = staticmethod(lambda x, y, dy: dy / (2 * y))


@register_op("rsqrt")
class Rsqrt(MathUnaryOp):
    fn = staticmethod(lambda x: x.dtype.type(1) / np.sqrt(x))


@register_op("cbrt")
class Cbrt(MathUnaryOp):
    fn = staticmethod(np.cbrt)


@register_op("rcbrt")
class Rcbrt(MathUnaryOp):
    fn = staticmethod(lambda x: x.dtype.type(1) / np.cbrt(x))


# ---------------------------------------------------------------------------
# exponentials and logarithms
# ---------------------------------------------------------------------------
@register_op("exp")
class Exp(MathUnaryOp):
    fn = staticmethod(np.exp)
    rounded_from_double = True
    grad = staticmethod(lambda x, y, dy: dy * y)


@register_op("expm1")
class Expm1(MathUnaryOp):
    fn = staticmethod(np.expm1)


@register_op("log")
class Log(MathUnaryOp):
    fn = staticmethod(np.log)
    rounded_from_double = True
    grad = staticmethod(lambda x, y, dy: dy / x)


@register_op("log10")
class Log10(MathUnaryOp):
    fn = staticmethod(np.log10)


@register_op("log2")
class Log2(MathUnaryOp):
    fn = staticmethod(np.log2)


@register_op("log1p")
class Log1p(MathUnaryOp):
    fn = staticmethod(np.log1p)


@register_op("sigmoid")
class Sigmoid(MathUnaryOp):
    fn = staticmethod(lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)))
    grad = staticmethod(lambda x, y, dy: dy * y * (1 - y))


@register_op("softsign")
class Softsign(MathUnaryOp):
    fn = staticmethod(lambda x: x / (x.dtype.type(1) + np.abs(x)))


# ---------------------------------------------------------------------------
# rounding
# ---------------------------------------------------------------------------
@register_op("round")
class Round(MathUnaryOp):
    """Halves away from zero (``round(-2.5) == -3``)."""
    fn = staticmethod(_round_half_away)


@register_op("rint")
class Rint(MathUnaryOp):
    """Nearest integer; an exact tie goes to the lower neighbour (``rint(1.5) == 1``)."""
    fn = staticmethod(_mxnet_rint)


@register_op("ceil")
class Ceil(MathUnaryOp):
    fn = staticmethod(np.ceil)


@register_op("floor")
class Floor(MathUnaryOp):
    fn = staticmethod(np.floor)


@register_op("trunc")
class Trunc(MathUnaryOp):
    fn = staticmethod(np.trunc)


@register_op("fix")
class Fix(MathUnaryOp):
    """Round toward zero."""
    fn = staticmethod(_fix)


# ---------------------------------------------------------------------------
# trigonometric and hyperbolic
# ---------------------------------------------------------------------------
@register_op("sin")
class Sin(MathUnaryOp):
    fn = staticmethod(np.sin)


@register_op("cos")
class Cos(MathUnaryOp):
    fn = staticmethod(np.cos)


@register_op("tan")
class Tan(MathUnaryOp):
    fn = staticmethod(np.tan)


@register_op("arcsin")
class Arcsin(MathUnaryOp):
    fn = staticmethod(np.arcsin)


@register_op("arccos")
class Arccos(MathUnaryOp):
    fn = staticmethod(np.arccos)


@register_op("arctan")
class Arctan(MathUnaryOp):
    fn = staticmethod(np.arctan)


@register_op("sinh")
class Sinh(MathUnaryOp):
    fn = staticmethod(np.sinh)


@register_op("cosh")
class Cosh(MathUnaryOp):
    fn = staticmethod(np.cosh)


@register_op("tanh")
class Tanh(MathUnaryOp):
    fn = staticmethod(np.tanh)
    grad = staticmethod(lambda x, y, dy: dy * (1 - y * y))


@register_op("arcsinh")
class Arcsinh(MathUnaryOp):
    fn = staticmethod(np.arcsinh)


@register_op("arccosh")
class Arccosh(MathUnaryOp):
    fn = staticmethod(np.arccosh)


@register_op("arctanh")
class Arctanh(MathUnaryOp):
    fn = staticmethod(np.arctanh)


@register_op("degrees")
class Degrees(MathUnaryOp):
    """``x * (180/pi)`` with MXNet's float32 constant, also for float64 inputs."""
    fn = staticmethod(_scaled(DEG_PER_RAD_F32))


@register_op("radians")
class Radians(MathUnaryOp):
    """``x * (pi/180)`` with MXNet's float32 constant, also for float64 inputs."""
    fn = staticmethod(_scaled(RAD_PER_DEG_F32))


# ---------------------------------------------------------------------------
# special functions
# ---------------------------------------------------------------------------
@register_op("erf")
class Erf(MathUnaryOp):
    fn = staticmethod(_erf)


@register_op("erfinv")
class Erfinv(MathUnaryOp):
    fn = staticmethod(lambda x: erfinv(x).astype(x.dtype))


@register_op("gamma")
class Gamma(MathUnaryOp):
    """The gamma function (C ``tgamma``), defined for negative non-integers too."""
    fn = staticmethod(_gamma)


@register_op("gammaln")
class Gammaln(MathUnaryOp):
    """``log(|gamma(x)|)`` (C ``lgamma``)."""
    fn = staticmethod(_gammaln)
