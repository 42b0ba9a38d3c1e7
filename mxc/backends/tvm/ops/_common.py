"""Helpers shared by the converter families: dtype rules, scalar constants, TE kernels.

MXNet's dtype conventions (see ``mxc/compiler/ops/elemwise_binary.py``):

* *math dtype*: ``math::`` helpers compute float64 in double and every other
  dtype in float32, converting back with a C cast (integers truncate).
* *compute dtype*: plain arithmetic works in the tensor's own dtype, float16
  through float32 with one rounding at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from tvm import relax, te, tirx

from ....compiler.ops.common import is_integer_dtype as is_int  # noqa: F401 (re-exported)
from ..converter import Lowering

R = relax.op

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def math_dtype(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def compute_dtype(dtype: str) -> str:
    """float16/bfloat16 arithmetic goes through float32 (one rounding at the end)."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def scalar_as(value: float, dtype: str):
    """A double converted to *dtype* as mshadow does (half via float, ints truncate)."""
    v = np.asarray(value, dtype=np.float64)
    if dtype in ("float16", "bfloat16"):
        v = v.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        return v.astype(dtype)


def const(value, dtype: str) -> relax.Expr:
    """A scalar (0-d) Relax constant of *dtype*."""
    return relax.const(np.asarray(value, dtype=dtype), dtype)


def exact_product(ctx: Lowering, x: relax.Expr, scale: relax.Expr) -> relax.Expr:
    """``float32(x * scale)`` rounded once and never contracted into an FMA with a later add.

    For float32 (or int8/int16) operands the product is exact in float64, so
    the cast back is the single rounding numpy and MXNet's kernels make; LLVM
    cannot fuse a multiply across the cast into a following addition.
    """
    wide = ctx.emit(relax.op.multiply(ctx.astype(x, "float64"), ctx.astype(scale, "float64")))
    return ctx.astype(wide, "float32")


def pos_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def axes_tuple(axis, ndim: int) -> list[int] | None:
    """``axis`` param (None, int or tuple) as a sorted list of non-negative axes."""
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    return sorted({pos_axis(int(a), ndim) for a in axis})


def in_dtype(ctx: Lowering, x: relax.Expr, fn: Callable[[relax.Expr], relax.Expr],
             work: str, out_dtype: str | None = None) -> relax.Expr:
    """``fn`` applied to *x* cast to *work*, the result cast to *out_dtype*."""
    out_dtype = out_dtype or ctx.out_dtype
    y = ctx.emit(fn(ctx.astype(x, work)))
    return ctx.astype(y, out_dtype)


def te_elementwise(ctx: Lowering, fn: Callable, *xs: relax.Expr,
                   dtype: str | None = None, name: str = "mxc_elemwise") -> relax.Expr:
    """An elementwise TE kernel ``fn(*scalars) -> scalar`` over equally shaped *xs*."""
    def compute(*ts):
        return te.compute(ts[0].shape, lambda *i: fn(*(t(*i) for t in ts)), name=name)
    return ctx.emit_te(compute, *xs, primfunc_name_hint=name)


def prim_dtype(v) -> str:
    """The dtype name of a TIR scalar expression (TVM 0.27 keeps it in ``.ty``)."""
    return str(v.ty.dtype)


def extern_unary(fname_f32: str, fname_f64: str) -> Callable:
    """A scalar function calling a C math function (libm on CPU, CUDA's math library on GPU)."""
    def fn(v):
        dt = prim_dtype(v)
        return tirx.call_pure_extern(dt, fname_f64 if dt == "float64" else fname_f32, v)
    return fn


def broadcast_to_shape(ctx: Lowering, x: relax.Expr, shape: Sequence[int]) -> relax.Expr:
    shape = tuple(int(d) for d in shape)
    if ctx.shape_of(x) == shape:
        return x
    return ctx.emit(R.broadcast_to(x, shape))


def bool_to(ctx: Lowering, cond: relax.Expr, dtype: str) -> relax.Expr:
    """A boolean tensor as 0/1 in *dtype*."""
    return ctx.emit(R.astype(cond, dtype))


def nonzero(ctx: Lowering, x: relax.Expr) -> relax.Expr:
    """``x != 0`` as bool (NaN counts as non-zero)."""
    return ctx.emit(R.not_equal(x, const(0, ctx.dtype_of(x))))


def identity(ctx: Lowering):
    return ctx.inputs[0]


def reference_constant(ctx: Lowering) -> list:
    """The node's outputs as constants, computed now by the op's reference kernel.

    Only for ops whose outputs depend on shapes and attributes alone (``_zeros``,
    ``_arange``, ``shape_array`` ...): the kernel runs on zero-filled inputs,
    so the constant agrees with the oracle by construction.
    """
    from ....compiler.ops.registry import ForwardContext
    ins = [np.zeros(s, dtype=t) for s, t in zip(ctx.in_shapes, ctx.in_dtypes)]
    fctx = ForwardContext(node=ctx.node, out_shapes=ctx.out_shapes, out_dtypes=ctx.out_dtypes,
                          in_shapes=ctx.in_shapes, in_dtypes=ctx.in_dtypes)
    outs = ctx.node.opdef.forward(ctx.p, ins, fctx)
    return [ctx.const(np.asarray(o).astype(t).reshape(s))
            for o, s, t in zip(outs, ctx.out_shapes, ctx.out_dtypes)]


def as_index(ctx: Lowering, x: relax.Expr, dtype: str = "int64") -> relax.Expr:
    """An index tensor C-cast to an integer dtype (floats truncate toward zero)."""
    return ctx.astype(x, dtype)
