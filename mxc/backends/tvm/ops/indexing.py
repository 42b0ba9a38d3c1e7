"""Gathering and scattering (``mxc/compiler/ops/indexing.py``).

Index arrays of any dtype are C-cast to integers (floats truncate toward
zero) before the op's out-of-range rule (clip or wrap) is applied, as in
MXNet; Relax's ``take`` does the clipping/wrapping itself.
"""

from __future__ import annotations

import numpy as np
from tvm.relax.expr import prim_value

from ..converter import Lowering, register_converter
from ._common import R, as_index, const, pos_axis, scalar_as


def _clip_or_wrap(ctx: Lowering, j, size: int, mode: str):
    if mode == "wrap":
        return ctx.emit(R.floor_mod(j, const(size, "int64")))
    return ctx.emit(R.clip(j, 0, size - 1))


@register_converter("take", supports=lambda node, io: (
    True if node.params.mode != "raise"
    else "take mode='raise' checks indices at run time; the TVM backend clips instead"))
def take(ctx: Lowering):
    axis = pos_axis(ctx.p.axis, len(ctx.in_shapes[0]))
    j = as_index(ctx, ctx.inputs[1])
    return R.take(ctx.inputs[0], j, axis=axis, mode=ctx.p.mode)


@register_converter("Embedding")
def embedding(ctx: Lowering):
    j = as_index(ctx, ctx.inputs[0])
    return R.take(ctx.inputs[1], j, axis=0, mode="clip")


@register_converter("pick")
def pick(ctx: Lowering):
    data, index = ctx.inputs
    shape = ctx.in_shapes[0]
    axis = pos_axis(ctx.p.axis, len(shape))
    j = _clip_or_wrap(ctx, as_index(ctx, index), shape[axis], ctx.p.mode)
    j = ctx.reshape(j, shape[:axis] + (1,) + shape[axis + 1:])
    out = ctx.emit(R.gather_elements(data, j, axis=axis))
    return ctx.reshape(out, ctx.out_shape)


@register_converter("batch_take")
def batch_take(ctx: Lowering):
    a, idx = ctx.inputs
    shape = ctx.in_shapes[0]
    rows = shape[0]
    cols = int(np.prod(shape[1:]))
    flat = ctx.reshape(a, (rows, cols))
    j = _clip_or_wrap(ctx, as_index(ctx, ctx.reshape(idx, (rows,))), cols, "clip")
    j = ctx.reshape(j, (rows, 1))
    out = ctx.emit(R.gather_elements(flat, j, axis=1))
    return ctx.reshape(out, ctx.out_shape)


@register_converter("one_hot")
def one_hot(ctx: Lowering):
    dt = ctx.out_dtype
    j = as_index(ctx, ctx.inputs[0], "int32")
    on = prim_value(scalar_as(ctx.p.on_value, dt).item(), dt)
    off = prim_value(scalar_as(ctx.p.off_value, dt).item(), dt)
    return R.one_hot(j, on, off, ctx.p.depth, axis=-1)


def _nd_indices(ctx: Lowering, idx, sizes):
    """MXNet's (M, ...) index layout -> Relax's (..., M) with negatives wrapped."""
    m = len(sizes)
    j = as_index(ctx, idx)
    rank = len(ctx.shape_of(j))
    j = ctx.emit(R.floor_mod(j, ctx.const(np.array(sizes, dtype="int64").reshape(
        (m,) + (1,) * (rank - 1)))))
    return ctx.emit(R.permute_dims(j, list(range(1, rank)) + [0]))


@register_converter("gather_nd", supports=lambda node, io: (
    "gather_nd must raise on out-of-range indices as MXNet does; compiled code cannot check "
    "at run time (Relax dataflow has no assertion), so it runs on the host"))
def gather_nd(ctx: Lowering):
    # kept for callers that lower a node regardless of ``supports`` (indices known valid)
    data, idx = ctx.inputs
    m = ctx.in_shapes[1][0]
    j = _nd_indices(ctx, idx, ctx.in_shapes[0][:m])
    return R.gather_nd(data, j)


@register_converter("scatter_nd")
def scatter_nd(ctx: Lowering):
    data, idx = ctx.inputs
    m = ctx.in_shapes[1][0]
    j = _nd_indices(ctx, idx, ctx.out_shape[:m])
    zeros = ctx.emit(R.zeros(ctx.out_shape, ctx.out_dtype))
    return R.scatter_nd(zeros, j, data, reduction="update")


@register_converter("where")
def where(ctx: Lowering):
    cond, x, y = ctx.inputs
    c = ctx.emit(R.not_equal(cond, const(0, ctx.in_dtypes[0])))
    cshape, xshape = ctx.in_shapes[0], ctx.in_shapes[1]
    if len(cshape) == 1 and len(xshape) > 1:
        c = ctx.reshape(c, (cshape[0],) + (1,) * (len(xshape) - 1))
    return R.where(c, x, y)


@register_converter("_ravel_multi_index")
def ravel_multi_index(ctx: Lowering):
    dims = list(ctx.p.shape)
    strides = [int(np.prod(dims[i + 1:])) for i in range(len(dims))]
    j = as_index(ctx, ctx.inputs[0])
    w = ctx.const(np.array(strides, dtype="int64").reshape(len(dims), 1))
    flat = ctx.emit(R.sum(R.multiply(j, w), axis=[0]))
    return ctx.astype(flat, ctx.out_dtype)


@register_converter("_unravel_index")
def unravel_index(ctx: Lowering):
    dims = list(ctx.p.shape)
    j = as_index(ctx, ctx.inputs[0])
    rows = [None] * len(dims)
    for k in range(len(dims) - 1, 0, -1):
        q = ctx.emit(R.divide(j, const(dims[k], "int64")))   # truncating (C) division
        rows[k] = ctx.emit(R.subtract(j, R.multiply(q, const(dims[k], "int64"))))
        j = q
    rows[0] = j
    out = ctx.emit(R.stack(rows, axis=0))
    return ctx.astype(out, ctx.out_dtype)
