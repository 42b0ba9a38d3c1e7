"""Slicing (``mxc/compiler/ops/slicing.py``): Python slice semantics per axis."""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, pos_axis


def _slice_axes(ctx: Lowering, x, specs):
    """Apply ``{axis: (begin, end, step)}`` (Python semantics, None allowed)."""
    shape = ctx.in_shapes[0]
    pos_axes, begins, ends, strides = [], [], [], []
    for axis, (b, e, s) in sorted(specs.items()):
        start, stop, step = slice(b, e, s).indices(shape[axis])
        if step > 0:
            if (start, stop, step) == (0, shape[axis], 1):
                continue
            pos_axes.append(axis)
            begins.append(start)
            ends.append(max(stop, start))
            strides.append(step)
        else:   # negative step: gather the explicit indices
            idx = np.arange(start, stop, step, dtype="int64")
            x = ctx.emit(R.take(x, ctx.const(idx), axis=axis))
    if pos_axes:
        x = ctx.emit(R.strided_slice(x, axes=pos_axes, begin=begins, end=ends,
                                     strides=strides))
    return x


@register_converter("slice")
def slice_(ctx: Lowering):
    p = ctx.p
    specs = {}
    for i, b in enumerate(p.begin):
        e = p.end[i] if i < len(p.end) else None
        s = p.step[i] if i < len(p.step) and p.step[i] is not None else 1
        specs[i] = (b, e, s)
    return ctx.reshape(_slice_axes(ctx, ctx.inputs[0], specs), ctx.out_shape)


@register_converter("slice_axis")
def slice_axis(ctx: Lowering):
    axis = pos_axis(ctx.p.axis, len(ctx.in_shapes[0]))
    return _slice_axes(ctx, ctx.inputs[0], {axis: (ctx.p.begin, ctx.p.end, 1)})


@register_converter("slice_like")
def slice_like(ctx: Lowering):
    """The output shape is the target: take the leading part of every sliced axis."""
    specs = {a: (0, n, 1) for a, n in enumerate(ctx.out_shape)}
    return _slice_axes(ctx, ctx.inputs[0], specs)
