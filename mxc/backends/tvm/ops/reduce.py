"""Reductions (``mxc/compiler/ops/reduce.py``).

Results are reshaped to the inferred output shape, which covers MXNet's
``axis=None -> (1,)``, ``keepdims`` and ``exclude`` conventions.  Float
reductions accumulate in float32 (float16 widened; float64 stays double);
integer ``mean`` divides with C (truncating) division.
"""

from __future__ import annotations

from ....compiler.ops.reduce import reduce_axes
from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, is_float, math_dtype


def _reduced_axes(ctx: Lowering, exclude: bool | None = None) -> list[int]:
    """The axes the node reduces: the op's own rule (:func:`mxc.compiler.ops.reduce.reduce_axes`)."""
    p = ctx.p
    flag = exclude if exclude is not None else getattr(p, "exclude", False)
    return list(reduce_axes(p, len(ctx.in_shapes[0]), p.axis, flag))


def _reduce(fn, prepare=None, work=compute_dtype):
    def convert(ctx: Lowering):
        dt = ctx.in_dtypes[0]
        x = ctx.astype(ctx.inputs[0], work(dt))
        if prepare is not None:
            x = ctx.emit(prepare(x, work(dt)))
        axes = _reduced_axes(ctx)
        y = ctx.emit(fn(x, axis=axes, keepdims=False)) if axes else x
        return ctx.reshape(ctx.astype(y, ctx.out_dtype), ctx.out_shape)
    return convert


def _without_nan(fill):
    def prepare(x, dt):
        return R.where(R.isnan(x), const(fill, dt), x) if is_float(dt) else x
    return prepare


register_converter("sum")(_reduce(R.sum))
register_converter("prod")(_reduce(R.prod))
register_converter("max")(_reduce(R.max))
register_converter("min")(_reduce(R.min))
register_converter("nansum")(_reduce(R.sum, _without_nan(0)))
register_converter("nanprod")(_reduce(R.prod, _without_nan(1)))


@register_converter("mean")
def mean(ctx: Lowering):
    dt = ctx.in_dtypes[0]
    axes = _reduced_axes(ctx)
    n = 1
    for a in axes:
        n *= ctx.in_shapes[0][a]
    if is_float(dt):
        work = compute_dtype(dt)
        x = ctx.astype(ctx.inputs[0], work)
        y = ctx.emit(R.mean(x, axis=axes)) if axes else x
    else:   # sum in int64, C division
        x = ctx.astype(ctx.inputs[0], "int64")
        s = ctx.emit(R.sum(x, axis=axes)) if axes else x
        y = ctx.emit(R.divide(s, const(max(n, 1), "int64")))
    return ctx.reshape(ctx.astype(y, ctx.out_dtype), ctx.out_shape)


@register_converter("norm")
def norm(ctx: Lowering):
    work = math_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], work)
    axes = _reduced_axes(ctx, exclude=False)
    if ctx.p.ord == 1:
        y = R.sum(R.abs(x), axis=axes)
    else:
        y = R.sqrt(R.sum(R.multiply(x, x), axis=axes))
    return ctx.reshape(ctx.astype(ctx.emit(y), ctx.out_dtype), ctx.out_shape)


def _arg(fn, fixed_axis=None):
    def convert(ctx: Lowering):
        x = ctx.astype(ctx.inputs[0], compute_dtype(ctx.in_dtypes[0]))
        axis = fixed_axis if fixed_axis is not None else ctx.p.axis
        shape = ctx.in_shapes[0]
        if axis is None or len(shape) == 1:
            x = ctx.reshape(x, (_numel(shape),))
            y = ctx.emit(fn(x, axis=0))
        else:
            y = ctx.emit(fn(x, axis=axis + len(shape) if axis < 0 else axis))
        return ctx.reshape(ctx.astype(y, ctx.out_dtype), ctx.out_shape)
    return convert


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


register_converter("argmax")(_arg(R.argmax))
register_converter("argmin")(_arg(R.argmin))
register_converter("argmax_channel")(_arg(R.argmax, fixed_axis=1))
