"""DeepNumpy reductions (``mxc/compiler/ops/numpy/reduce.py``).

``sum``/``prod``/``mean``/``max``/``min`` lower through their legacy twins
(:mod:`.twins`); ``argmax``/``argmin``/``all``/``any`` here.
"""

from __future__ import annotations

from ...converter import Lowering, register_converter, register_host_only
from .._common import R, pos_axis
from .indexing import truth
from ._twins import register_twins


@register_converter("_npi_argmax", "_npi_argmin")
def arg_reduce(ctx: Lowering):
    x = ctx.inputs[0]
    fn = R.argmax if ctx.op == "_npi_argmax" else R.argmin
    axis = ctx.p.axis
    if axis is None:
        x = ctx.reshape(x, (-1,) if False else (int(_size(ctx.in_shapes[0])),))
        y = ctx.emit(fn(x, axis=0))
    else:
        y = ctx.emit(fn(x, axis=pos_axis(axis, len(ctx.in_shapes[0])), keepdims=ctx.p.keepdims))
    return ctx.reshape(ctx.astype(y, ctx.out_dtype), ctx.out_shape)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@register_converter("_np_all", "_np_any")
def logical_reduce(ctx: Lowering):
    x = ctx.inputs[0]
    nz = truth(ctx, x, ctx.in_dtypes[0])
    ndim = len(ctx.in_shapes[0])
    axes = list(range(ndim)) if ctx.p.axis is None else \
        sorted(pos_axis(a, ndim) for a in ctx.p.axis)
    as_int = ctx.emit(R.astype(nz, "int32"))
    red = R.min(as_int, axis=axes) if ctx.op == "_np_all" else R.max(as_int, axis=axes)
    return ctx.reshape(ctx.astype(ctx.emit(red), "bool"), ctx.out_shape)


def _moments_supported(node, io):
    p = node.params
    if p.ddof != 0 or p.dtype is not None:
        return "std/var with ddof != 0 or an explicit dtype are not lowered"
    return True


@register_converter("_npi_std", "_npi_var", supports=_moments_supported)
def moments(ctx: Lowering):
    work = "float64" if ctx.in_dtypes[0] == "float64" else "float32"
    x = ctx.astype(ctx.inputs[0], work)
    ndim = len(ctx.in_shapes[0])
    axes = list(range(ndim)) if ctx.p.axis is None else \
        sorted(pos_axis(a, ndim) for a in ctx.p.axis)
    fn = R.std if ctx.op == "_npi_std" else R.variance
    y = ctx.emit(fn(x, axis=axes, keepdims=False)) if axes else ctx.emit(R.zeros_like(x))
    return ctx.reshape(ctx.astype(y, ctx.out_dtype), ctx.out_shape)


@register_converter("_np_cumsum")
def cumsum(ctx: Lowering):
    x = ctx.astype(ctx.inputs[0], ctx.out_dtype)
    if ctx.p.axis is None:
        x = ctx.reshape(x, ctx.out_shape)
        axis = 0
    else:
        axis = pos_axis(ctx.p.axis, len(ctx.in_shapes[0]))
    return R.cumsum(x, axis=axis)


register_host_only(
    "_npi_norm", "_npi_average", "_np_trace", "_npi_percentile",
    reason="statistics and scans that appear outside hot paths in DeepNumpy models; "
           "the host kernel (double accumulation) is kept")


register_twins(__name__)
