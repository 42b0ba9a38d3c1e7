"""Elementwise binary ops (``mxc/compiler/ops/elemwise_binary.py``) and the shared kernels.

:func:`binary_kernel` is the single source of binary semantics for the
``elemwise_*``, ``broadcast_*`` and ``*_scalar`` converters, mirroring the
reference ``KERNELS``:

* ``+ - *`` and float ``/`` work in the compute dtype (float16 via float32);
  integer ``/`` truncates toward zero and ``x / 0 == 0``;
* ``mod`` takes the divisor's sign (floats computed in double); ``x % 0 == 0``;
* ``power``/``hypot`` go through float32 (double stays double) and cast back;
* ``maximum``/``minimum`` propagate NaN;
* comparisons and logical ops return 0/1 in the operands' dtype.
"""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, is_float, is_int, math_dtype


def _in(ctx: Lowering, fn, a, b, work: str, dt: str):
    a = ctx.astype(a, work)
    b = ctx.astype(b, work)
    return ctx.astype(ctx.emit(fn(a, b)), dt)


def _zero_guarded(ctx: Lowering, fn, a, b, dt: str):
    """``fn(a, b)`` with 0 wherever ``b == 0`` (integer division/modulo)."""
    zero = const(0, dt)
    is_zero = ctx.emit(R.equal(b, zero))
    safe = ctx.emit(R.where(is_zero, const(1, dt), b))
    return ctx.emit(R.where(is_zero, zero, fn(a, safe)))


def _pick(ctx: Lowering, cmp, a, b, dt: str):
    """``a`` where ``cmp(a, b)`` or ``a`` is NaN, else ``b`` (NaN-propagating max/min)."""
    cond = cmp(a, b)
    if is_float(dt):
        cond = R.logical_or(cond, R.isnan(a))
    return ctx.emit(R.where(cond, a, b))


def _predicate(ctx: Lowering, cmp, a, b, dt: str):
    return ctx.emit(R.astype(cmp(a, b), dt))


def _nonzero(x, dt):
    return R.not_equal(x, const(0, dt))


def binary_kernel(ctx: Lowering, kernel: str, a, b, dt: str):
    """MXNet's elementwise *kernel* on operands already of dtype *dt* (broadcasting)."""
    cd = compute_dtype(dt)
    if kernel == "plus":
        return _in(ctx, R.add, a, b, cd, dt)
    if kernel == "minus":
        return _in(ctx, R.subtract, a, b, cd, dt)
    if kernel == "mul":
        return _in(ctx, R.multiply, a, b, cd, dt)
    if kernel == "div":
        if is_int(dt):
            return _zero_guarded(ctx, R.divide, a, b, dt)   # TIR integer division truncates
        return _in(ctx, R.divide, a, b, cd, dt)
    if kernel == "rdiv":   # scalar / x through the math dtype
        return _in(ctx, R.divide, a, b, math_dtype(dt), dt)
    if kernel == "mod":
        if is_int(dt):
            return _zero_guarded(ctx, R.floor_mod, a, b, dt)
        a64 = ctx.astype(a, "float64")
        b64 = ctx.astype(b, "float64")
        r = _zero_guarded(ctx, R.floor_mod, a64, b64, "float64")
        return ctx.astype(r, dt)
    if kernel == "power":
        return _in(ctx, R.power, a, b, math_dtype(dt), dt)
    if kernel == "hypot":
        return _in(ctx, lambda x, y: R.sqrt(R.add(R.multiply(x, x), R.multiply(y, y))),
                   a, b, math_dtype(dt), dt)
    if kernel == "maximum":
        return _pick(ctx, R.greater, a, b, dt)
    if kernel == "minimum":
        return _pick(ctx, R.less, a, b, dt)
    cmps = {"equal": R.equal, "not_equal": R.not_equal, "greater": R.greater,
            "greater_equal": R.greater_equal, "lesser": R.less, "lesser_equal": R.less_equal}
    if kernel in cmps:
        return _predicate(ctx, cmps[kernel], a, b, dt)
    logic = {"logical_and": R.logical_and, "logical_or": R.logical_or,
             "logical_xor": R.logical_xor}
    if kernel in logic:
        fn = logic[kernel]
        return _predicate(ctx, lambda x, y: fn(_nonzero(x, dt), _nonzero(y, dt)), a, b, dt)
    raise ctx.error(f"unknown elementwise kernel {kernel!r}")


def binary_converter(kernel: str):
    """A converter for a two-input op (same shapes or broadcasting) using *kernel*."""
    def convert(ctx: Lowering):
        dt = ctx.out_dtype if ctx.out_dtype == ctx.in_dtypes[0] else ctx.in_dtypes[0]
        a = ctx.astype(ctx.inputs[0], dt)
        b = ctx.astype(ctx.inputs[1], dt)
        return ctx.astype(binary_kernel(ctx, kernel, a, b, dt), ctx.out_dtype)
    convert.__name__ = f"convert_{kernel}"
    return convert


ELEMWISE = {
    "elemwise_add": "plus", "elemwise_sub": "minus", "elemwise_mul": "mul",
    "elemwise_div": "div", "_mod": "mod", "_power": "power", "_maximum": "maximum",
    "_minimum": "minimum", "_hypot": "hypot", "_equal": "equal", "_not_equal": "not_equal",
    "_greater": "greater", "_greater_equal": "greater_equal", "_lesser": "lesser",
    "_lesser_equal": "lesser_equal", "_logical_and": "logical_and",
    "_logical_or": "logical_or", "_logical_xor": "logical_xor",
}
for _op, _kernel in ELEMWISE.items():
    register_converter(_op)(binary_converter(_kernel))


@register_converter("add_n")
def add_n(ctx: Lowering):
    """Left-to-right sum in the inputs' dtype (float16 rounds after every addition)."""
    dt = ctx.out_dtype
    acc = ctx.astype(ctx.inputs[0], dt)
    for x in ctx.inputs[1:]:
        acc = binary_kernel(ctx, "plus", acc, ctx.astype(x, dt), dt)
    return acc
