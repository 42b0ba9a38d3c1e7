"""DeepNumpy elementwise ops without a legacy twin (``mxc/compiler/ops/numpy/elemwise.py``).

The twins (unary math, promoted binaries, tensor-scalar ops) lower through
:mod:`.twins`; here are the ``is*`` predicates and ``bitwise_not``.
"""

from __future__ import annotations

from tvm import tirx

from ...converter import Lowering, register_converter, register_host_only
from .._common import R, broadcast_to_shape, const, is_float, math_dtype, prim_dtype, \
    scalar_as, te_elementwise
from ._twins import register_twins


def _float_test(test, otherwise: bool):
    def convert(ctx: Lowering):
        x = ctx.inputs[0]
        if not is_float(ctx.in_dtypes[0]):
            return R.full(ctx.out_shape, const(otherwise, "bool"), "bool")
        return test(ctx, x)
    return convert


def _isinf_sign(positive: bool):
    def test(ctx, x):
        inf = R.isinf(x)
        zero = const(0, ctx.in_dtypes[0])
        side = R.greater(x, zero) if positive else R.less(x, zero)
        return R.logical_and(ctx.emit(inf), ctx.emit(side))
    return test


register_converter("_npi_isnan")(_float_test(lambda ctx, x: R.isnan(x), False))
register_converter("_npi_isinf")(_float_test(lambda ctx, x: R.isinf(x), False))
register_converter("_npi_isfinite")(_float_test(lambda ctx, x: R.isfinite(x), True))
register_converter("_npi_isposinf")(_float_test(_isinf_sign(True), False))
register_converter("_npi_isneginf")(_float_test(_isinf_sign(False), False))


@register_converter("_npi_bitwise_not")
def bitwise_not(ctx: Lowering):
    x = ctx.inputs[0]
    if ctx.in_dtypes[0] == "bool":
        return R.logical_not(x)
    return R.bitwise_not(x)


# -- binaries with no legacy twin: TIR intrinsics in the math dtype ------------------
_SCALAR_FNS = {
    "arctan2": tirx.atan2,
    "copysign": tirx.copysign,
    "ldexp": lambda a, b: a * tirx.power(tirx.const(2, prim_dtype(a)), b),
}


def _math_binary(kind: str, scalar: str | None = None):
    """``kind(lhs, rhs)`` for tensor pairs, or with ``scalar`` = "rhs"/"lhs" a constant."""
    fn = _SCALAR_FNS[kind]

    def convert(ctx: Lowering):
        work = math_dtype(ctx.out_dtype if is_float(ctx.out_dtype) else ctx.in_dtypes[0])
        xs = [broadcast_to_shape(ctx, ctx.astype(x, work), ctx.out_shape) for x in ctx.inputs]
        if scalar is None:
            y = te_elementwise(ctx, fn, *xs, name=f"mxc_np_{kind}")
        else:
            c = float(scalar_as(ctx.p.scalar, work))

            def with_scalar(v):
                k = tirx.const(c, work)
                return fn(v, k) if scalar == "rhs" else fn(k, v)
            y = te_elementwise(ctx, with_scalar, xs[0], name=f"mxc_np_{kind}_scalar")
        return ctx.astype(y, ctx.out_dtype)
    return convert


for _kind in ("arctan2", "copysign", "ldexp"):
    register_converter(f"_npi_{_kind}")(_math_binary(_kind))
    register_converter(f"_npi_{_kind}_scalar")(_math_binary(_kind, "rhs"))
    register_converter(f"_npi_r{_kind}_scalar")(_math_binary(_kind, "lhs"))


# -- bitwise ops on integers (logical ops on bool) ------------------------------------
_BITWISE = {"and": (R.bitwise_and, R.logical_and), "or": (R.bitwise_or, R.logical_or),
            "xor": (R.bitwise_xor, R.logical_xor)}


def _bitwise(kind: str, scalar: bool):
    int_fn, bool_fn = _BITWISE[kind]

    def convert(ctx: Lowering):
        dt = ctx.out_dtype
        fn = bool_fn if dt == "bool" else int_fn
        a = ctx.astype(ctx.inputs[0], dt)
        b = const(scalar_as(ctx.p.scalar, dt), dt) if scalar else ctx.astype(ctx.inputs[1], dt)
        return fn(a, b)
    return convert


for _kind in _BITWISE:
    register_converter(f"_npi_bitwise_{_kind}")(_bitwise(_kind, False))
    register_converter(f"_npi_bitwise_{_kind}_scalar")(_bitwise(_kind, True))


@register_converter("_npi_nan_to_num")
def nan_to_num(ctx: Lowering):
    import numpy as np
    x = ctx.inputs[0]
    dt = ctx.in_dtypes[0]
    if not is_float(dt):
        return x
    info = np.finfo(dt)
    p = ctx.p
    big = const(info.max if p.posinf is None else p.posinf, dt)
    small = const(info.min if p.neginf is None else p.neginf, dt)
    x = ctx.emit(R.where(R.isnan(x), const(p.nan, dt), x))
    pos = ctx.emit(R.logical_and(R.isinf(x), R.greater(x, const(0, dt))))
    x = ctx.emit(R.where(pos, big, x))
    return R.where(R.isinf(x), small, x)


register_host_only(
    "_npi_lcm", "_npi_lcm_scalar", "_npi_around",
    reason="rare NumPy elementwise functions with no Relax operator: the host kernel is "
           "cheap and lowering them would not pay")


register_twins(__name__)
