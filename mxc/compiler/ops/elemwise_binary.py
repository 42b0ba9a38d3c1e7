"""Elementwise binary ops on equally shaped inputs (``elemwise_*``, ``_mod`` ...).

This module also holds the elementwise *kernels* shared by the broadcast
(:mod:`.broadcast`) and tensor-scalar (:mod:`.elemwise_scalar`) families, so
``elemwise_div``, ``broadcast_div`` and ``_div_scalar`` agree by construction.

A kernel takes two numpy arrays that already have the op's dtype (``DType``;
one of them may be 0-d) and returns the result in that dtype, with MXNet
1.9.1's CPU semantics:

* ``+ - * /`` and comparisons work in ``DType`` itself (float16 arithmetic is
  done in float32 and rounded once, like mshadow's ``half_t``); integer
  division truncates toward zero.
* ``pow``/``hypot`` and the reversed division go through MXNet's ``math::``
  helpers, which compute every non-double type in float32 and convert back
  (truncating for integer types).
* ``mod`` is computed in double and takes the sign of the divisor (Python's
  ``%``); a zero divisor gives 0.
* ``maximum``/``minimum`` propagate NaN; comparison and logical ops return
  0/1 in ``DType``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...errors import AttributeInvalidError
from .common import (BinaryOp, ElemwiseShapeMixin, cast_to, compute_dtype, is_integer_dtype,
                     sum_to_shape)
from .registry import REQUIRED, Attr, OpDef, register_op, to_int

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------
# dtype helpers
# ---------------------------------------------------------------------------
def math_dtype(dtype) -> np.dtype:
    """Where MXNet's ``math::`` functions compute: double stays double, the rest float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def to_dtype_trunc(x, dtype) -> np.ndarray:
    """Convert like a C cast: integers truncate toward zero; no warnings for NaN/inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(dtype, copy=False)


def scalar_as(value: float, dtype) -> np.ndarray:
    """A double converted to ``DType`` as mshadow does (half goes through float)."""
    v = np.asarray(value, dtype=np.float64)
    if np.dtype(dtype) == np.float16:
        v = v.astype(np.float32)
    return to_dtype_trunc(v, dtype)


# ---------------------------------------------------------------------------
# kernel builders
# ---------------------------------------------------------------------------
def in_dtype(fn: Callable) -> Kernel:
    """A kernel doing ``fn`` in DType (float16 through float32, one rounding)."""
    def kernel(a, b):
        dt = np.result_type(a, b)
        work = compute_dtype(dt)
        with np.errstate(all="ignore"):
            return to_dtype_trunc(fn(a.astype(work, copy=False), b.astype(work, copy=False)), dt)
    return kernel


def via_float(fn: Callable) -> Kernel:
    """A kernel doing ``fn`` where MXNet's ``math::`` helpers do (see :func:`math_dtype`)."""
    def kernel(a, b):
        dt = np.result_type(a, b)
        work = math_dtype(dt)
        with np.errstate(all="ignore"):
            return to_dtype_trunc(fn(a.astype(work, copy=False), b.astype(work, copy=False)), dt)
    return kernel


def predicate(fn: Callable) -> Kernel:
    """A kernel returning ``fn(a, b)`` (boolean) as 0/1 in DType."""
    def kernel(a, b):
        dt = np.result_type(a, b)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(dt)
    return kernel


def swapped(kernel: Kernel) -> Kernel:
    """``kernel(b, a)``: the reversed-operand form (``_rminus_scalar`` ...)."""
    return lambda a, b: kernel(b, a)


def _divide(a, b):
    dt = np.result_type(a, b)
    if not is_integer_dtype(dt):
        return in_dtype(np.true_divide)(a, b)
    a, b = np.broadcast_arrays(a, b)
    safe = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe)
    # floor -> truncation: step toward zero where the division was inexact and signs differ
    q = q + ((np.remainder(a, safe) != 0) & ((a < 0) != (safe < 0)))
    return np.where(b == 0, 0, q).astype(dt)   # C would trap on x/0; MXNet defines nothing


def _mod(a, b):
    dt = np.result_type(a, b)
    if is_integer_dtype(dt):
        a, b = np.broadcast_arrays(a, b)
        safe = np.where(b == 0, 1, b)
        return np.where(b == 0, 0, np.remainder(a, safe)).astype(dt)
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = np.fmod(a64, b64)
        r = np.where((r != 0) & ((r < 0) != (b64 < 0)), r + b64, r)
        r = np.where(b64 == 0, 0.0, r)
    return to_dtype_trunc(r, dt)


def _maximum(a, b):
    dt = np.result_type(a, b)
    pick_a = (a > b) | (np.isnan(a) if dt.kind == "f" else False)
    return np.where(pick_a, a, b).astype(dt)


def _minimum(a, b):
    dt = np.result_type(a, b)
    pick_a = (a < b) | (np.isnan(a) if dt.kind == "f" else False)
    return np.where(pick_a, a, b).astype(dt)


#: name -> kernel; the single source of elementwise binary semantics
KERNELS: dict[str, Kernel] = {
    "plus": in_dtype(np.add),
    "minus": in_dtype(np.subtract),
    "mul": in_dtype(np.multiply),
    "div": _divide,
    "mod": _mod,
    "power": via_float(np.power),
    "hypot": via_float(np.hypot),
    "maximum": _maximum,
    "minimum": _minimum,
    "equal": predicate(np.equal),
    "not_equal": predicate(np.not_equal),
    "greater": predicate(np.greater),
    "greater_equal": predicate(np.greater_equal),
    "lesser": predicate(np.less),
    "lesser_equal": predicate(np.less_equal),
    "logical_and": predicate(lambda a, b: (a != 0) & (b != 0)),
    "logical_or": predicate(lambda a, b: (a != 0) | (b != 0)),
    "logical_xor": predicate(lambda a, b: (a != 0) != (b != 0)),
}


# ---------------------------------------------------------------------------
# same-shape binary ops
# ---------------------------------------------------------------------------
#: ``kernel -> (a, b, y, dy) -> (da, db)``: derivative rules of the arithmetic kernels
GRADIENTS = {
    "plus": lambda a, b, y, dy: (dy, dy),
    "minus": lambda a, b, y, dy: (dy, -dy),
    "mul": lambda a, b, y, dy: (dy * b, dy * a),
    "div": lambda a, b, y, dy: (dy / b, -dy * a / (b * b)),
}


def binary_backward(op, p, out_grads, inputs, outputs):
    """Gradients of a (possibly broadcasting) arithmetic op, reduced to the input shapes."""
    rule = GRADIENTS.get(op.kernel)
    if rule is None:
        raise NotImplementedError(f"operator {op.name} has no gradient in mxc")
    a, b = inputs
    da, db = rule(a, b, outputs[0], out_grads[0])
    return [sum_to_shape(da, a.shape).astype(a.dtype, copy=False),
            sum_to_shape(db, b.shape).astype(b.dtype, copy=False)]


class ElemwiseBinaryOp(BinaryOp):
    """``out = kernel(lhs, rhs)``; inputs and output share one shape and dtype.

    Subclasses set ``kernel`` to a key of :data:`KERNELS`; the ones in
    :data:`GRADIENTS` have a backward rule.
    """

    kernel: str = ""

    def has_backward(self) -> bool:
        return self.kernel in GRADIENTS

    def backward(self, p, out_grads, inputs, outputs):
        return binary_backward(self, p, out_grads, inputs, outputs)

    def forward(self, p, inputs, ctx):
        a, b = (np.asarray(x) for x in inputs)
        dt = np.result_type(a, b)
        out = KERNELS[self.kernel](a.astype(dt, copy=False), b.astype(dt, copy=False))
        return [cast_to(out, ctx.out_dtypes[0] or dt)]


@register_op("elemwise_add", aliases=("_add", "_plus", "_Plus"))
class ElemwiseAdd(ElemwiseBinaryOp):
    kernel = "plus"


@register_op("elemwise_sub", aliases=("_sub", "_minus", "_Minus"))
class ElemwiseSub(ElemwiseBinaryOp):
    kernel = "minus"


@register_op("elemwise_mul", aliases=("_mul", "_Mul"))
class ElemwiseMul(ElemwiseBinaryOp):
    kernel = "mul"


@register_op("elemwise_div", aliases=("_div", "_Div"))
class ElemwiseDiv(ElemwiseBinaryOp):
    """Integer inputs divide with truncation toward zero (C semantics)."""
    kernel = "div"


@register_op("_mod", aliases=("_Mod",))
class Mod(ElemwiseBinaryOp):
    """Remainder with the sign of the divisor (Python ``%``); ``x % 0 == 0``."""
    kernel = "mod"


@register_op("_power", aliases=("_Power",))
class Power(ElemwiseBinaryOp):
    kernel = "power"


@register_op("_maximum", aliases=("_Maximum",))
class Maximum(ElemwiseBinaryOp):
    kernel = "maximum"


@register_op("_minimum", aliases=("_Minimum",))
class Minimum(ElemwiseBinaryOp):
    kernel = "minimum"


@register_op("_hypot", aliases=("_Hypot",))
class Hypot(ElemwiseBinaryOp):
    """``sqrt(a^2 + b^2)``; integer inputs go through float32 and truncate."""
    kernel = "hypot"


@register_op("_equal", aliases=("_Equal",))
class Equal(ElemwiseBinaryOp):
    """0/1 in the input dtype (not bool), like every legacy comparison."""
    kernel = "equal"


@register_op("_not_equal", aliases=("_Not_Equal",))
class NotEqual(ElemwiseBinaryOp):
    kernel = "not_equal"


@register_op("_greater", aliases=("_Greater",))
class Greater(ElemwiseBinaryOp):
    kernel = "greater"


@register_op("_greater_equal", aliases=("_Greater_Equal",))
class GreaterEqual(ElemwiseBinaryOp):
    kernel = "greater_equal"


@register_op("_lesser", aliases=("_Lesser",))
class Lesser(ElemwiseBinaryOp):
    kernel = "lesser"


@register_op("_lesser_equal", aliases=("_Lesser_Equal",))
class LesserEqual(ElemwiseBinaryOp):
    kernel = "lesser_equal"


@register_op("_logical_and", aliases=("_Logical_And",))
class LogicalAnd(ElemwiseBinaryOp):
    """1 where both inputs are non-zero (NaN counts as non-zero), in the input dtype."""
    kernel = "logical_and"


@register_op("_logical_or", aliases=("_Logical_Or",))
class LogicalOr(ElemwiseBinaryOp):
    kernel = "logical_or"


@register_op("_logical_xor", aliases=("_Logical_Xor",))
class LogicalXor(ElemwiseBinaryOp):
    kernel = "logical_xor"


# ---------------------------------------------------------------------------
# add_n
# ---------------------------------------------------------------------------
@register_op("add_n", aliases=("ElementWiseSum",))
class AddN(ElemwiseShapeMixin, OpDef):
    """Sum of ``num_args`` equally shaped inputs named ``arg0 .. arg{n-1}``.

    Summed left to right in the inputs' dtype (float16 rounds after every
    addition, as MXNet's ``half_t`` expression does).
    """

    attrs = {"num_args": Attr(to_int, REQUIRED, "number of inputs to sum (>= 1)")}

    def validate(self, p):
        if p.num_args < 1:
            raise AttributeInvalidError(
                f"operator {self.name} (node {p.node_ref}): attribute num_args="
                f"{p.num_args} is invalid: must be at least 1")

    def input_names(self, p):
        return [f"arg{i}" for i in range(p.num_args)]

    def forward(self, p, inputs, ctx):
        xs = [np.asarray(x) for x in inputs]
        dt = np.result_type(*xs)
        acc = xs[0].astype(dt, copy=True)
        add = KERNELS["plus"]
        for x in xs[1:]:
            acc = add(acc, x.astype(dt, copy=False))
        return [cast_to(acc, ctx.out_dtypes[0] or dt)]
