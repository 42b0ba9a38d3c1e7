"""Sorting (``mxc/compiler/ops/sort.py``): ``topk``, ``sort``, ``argsort``.

``axis=None`` works on the flattened input.  Indices come out in the op's
index dtype (float32 by default).  ``topk ret_typ='mask'`` is built by
scattering ones at the top-k indices.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R


def _work(ctx: Lowering):
    """(input, axis) with ``axis=None`` meaning the flattened input."""
    x = ctx.inputs[0]
    shape = ctx.in_shapes[0]
    axis = ctx.p.axis
    if axis is None:
        return ctx.reshape(x, (int(np.prod(shape)),)), 0
    return x, axis + len(shape) if axis < 0 else axis


@register_converter("topk")
def topk(ctx: Lowering):
    p = ctx.p
    x, axis = _work(ctx)
    largest = not p.is_ascend
    if p.ret_typ == "value":
        vals = ctx.emit(R.topk(x, k=p.k, axis=axis, ret_type="values", largest=largest))
        outs = [ctx.reshape(vals, ctx.out_shapes[0])]
        if len(ctx.out_shapes) > 1:   # hidden int32 index output
            idx = ctx.emit(R.topk(x, k=p.k, axis=axis, ret_type="indices", largest=largest,
                                  dtype="int32"))
            outs.append(ctx.reshape(ctx.astype(idx, ctx.out_dtypes[1]), ctx.out_shapes[1]))
        return outs
    idx = ctx.emit(R.topk(x, k=p.k, axis=axis, ret_type="indices", largest=largest,
                          dtype="int64"))
    if p.ret_typ == "indices":
        return ctx.reshape(ctx.astype(idx, ctx.out_dtype), ctx.out_shape)
    if p.ret_typ == "both":
        vals = ctx.emit(R.gather_elements(x, idx, axis=axis))
        return [ctx.reshape(vals, ctx.out_shapes[0]),
                ctx.reshape(ctx.astype(idx, ctx.out_dtypes[1]), ctx.out_shapes[1])]
    # mask: ones at the chosen positions
    ones = ctx.emit(R.ones(ctx.shape_of(idx), ctx.out_dtype))
    zeros = ctx.emit(R.zeros(ctx.shape_of(x), ctx.out_dtype))
    mask = ctx.emit(R.scatter_elements(zeros, idx, ones, axis=axis))
    return ctx.reshape(mask, ctx.out_shape)


@register_converter("sort")
def sort(ctx: Lowering):
    x, axis = _work(ctx)
    desc = not ctx.p.is_ascend
    idx = ctx.emit(R.argsort(x, axis=axis, descending=desc, dtype="int64"))
    vals = ctx.emit(R.gather_elements(x, idx, axis=axis))
    outs = [ctx.reshape(vals, ctx.out_shapes[0])]
    if len(ctx.out_shapes) > 1:
        outs.append(ctx.reshape(ctx.astype(idx, ctx.out_dtypes[1]), ctx.out_shapes[1]))
    return outs


@register_converter("argsort")
def argsort(ctx: Lowering):
    x, axis = _work(ctx)
    idx = ctx.emit(R.argsort(x, axis=axis, descending=not ctx.p.is_ascend, dtype="int64"))
    return ctx.reshape(ctx.astype(idx, ctx.out_dtype), ctx.out_shape)
