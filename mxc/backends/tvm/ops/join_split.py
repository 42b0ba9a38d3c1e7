"""Joining, splitting, tiling and padding (``mxc/compiler/ops/join_split.py``)."""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ..converter import Lowering, register_converter
from ._common import R, pos_axis, scalar_as


@register_converter("Concat")
def concat(ctx: Lowering):
    ndim = len(ctx.out_shape)
    xs = [ctx.astype(x, ctx.out_dtype) for x in ctx.inputs]
    if len(xs) == 1:
        return xs[0]
    return R.concat(xs, axis=pos_axis(ctx.p.dim, ndim))


@register_converter("stack")
def stack(ctx: Lowering):
    ndim = len(ctx.out_shape)
    return R.stack(list(ctx.inputs), axis=pos_axis(ctx.p.axis, ndim))


def split_pieces(ctx: Lowering, axis: int, bounds: list[int]):
    """Pieces ``[bounds[i], bounds[i+1])`` along *axis*, reshaped to the output shapes
    (which drop the axis under ``squeeze_axis``)."""
    x = ctx.inputs[0]
    outs = []
    for i, shape in enumerate(ctx.out_shapes):
        b, e = bounds[i], bounds[i + 1]
        if b == 0 and e == ctx.in_shapes[0][axis]:
            piece = x
        else:
            piece = ctx.emit(R.strided_slice(x, axes=[axis], begin=[b], end=[e]))
        outs.append(ctx.reshape(piece, shape))
    return outs


@register_converter("SliceChannel")
def slice_channel(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    axis = pos_axis(ctx.p.axis, ndim)
    n = ctx.p.num_outputs
    step = ctx.in_shapes[0][axis] // n
    return split_pieces(ctx, axis, [i * step for i in range(n + 1)])


@register_converter("_split_v2")
def split_v2(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    axis = pos_axis(ctx.p.axis, ndim)
    size = ctx.in_shapes[0][axis]
    if ctx.p.sections > 0:
        step = size // ctx.p.sections
        bounds = [i * step for i in range(ctx.p.sections + 1)]
    else:
        bounds = list(ctx.p.indices) + [size]
    return split_pieces(ctx, axis, bounds)


@register_converter("tile")
def tile(ctx: Lowering):
    reps = tuple(ctx.p.reps)
    ndim = len(ctx.in_shapes[0])
    x = ctx.inputs[0]
    if len(reps) > ndim:
        x = ctx.reshape(x, (1,) * (len(reps) - ndim) + ctx.in_shapes[0])
    elif len(reps) < ndim:
        reps = (1,) * (ndim - len(reps)) + reps
    if all(r == 1 for r in reps):
        return ctx.reshape(x, ctx.out_shape)
    return R.tile(x, reps)


@register_converter("repeat")
def repeat(ctx: Lowering):
    x = ctx.inputs[0]
    axis = ctx.p.axis
    if axis is None:
        x = ctx.reshape(x, (int(np.prod(ctx.in_shapes[0])),))
        axis = 0
    else:
        axis = pos_axis(axis, len(ctx.in_shapes[0]))
    return R.repeat(x, ctx.p.repeats, axis=axis)


@register_converter("reverse")
def reverse(ctx: Lowering):
    x = ctx.inputs[0]
    ndim = len(ctx.in_shapes[0])
    for a in sorted({pos_axis(a, ndim) for a in ctx.p.axis}):
        x = ctx.emit(R.flip(x, a))
    return x


@register_converter("Pad")
def pad(ctx: Lowering):
    x = ctx.inputs[0]
    dt = ctx.in_dtypes[0]
    widths = [int(w) for w in ctx.p.pad_width]
    if ctx.p.mode == "constant":
        value = float(scalar_as(ctx.p.constant_value, dt))
        return R.nn.pad(x, widths, pad_mode="constant", pad_value=value)
    shape = ctx.in_shapes[0]
    before = widths[0::2]
    mode = ctx.p.mode

    def build(t):
        def f(*idx):
            src = []
            for d, i in enumerate(idx):
                j = i - before[d]
                n = shape[d]
                if mode == "edge":
                    j = tirx.max(tirx.min(j, n - 1), 0)
                else:  # reflect (no edge repeat), as numpy's "reflect"
                    period = max(2 * (n - 1), 1)
                    m = tirx.floormod(j, period)
                    j = tirx.Select(m >= n, period - m, m) if n > 1 else tirx.const(0, "int64")
                src.append(j)
            return t[tuple(src)]
        return te.compute(ctx.out_shape, f, name=f"mxc_pad_{mode}")
    return ctx.emit_te(build, x, primfunc_name_hint=f"mxc_pad_{mode}")


@register_converter("Crop")
def crop(ctx: Lowering):
    _, _, H, W = ctx.in_shapes[0]
    _, _, h, w = ctx.out_shape
    if ctx.p.center_crop:
        oy, ox = (H - h) // 2, (W - w) // 2
    else:
        oy, ox = ctx.p.offset
    return R.strided_slice(ctx.inputs[0], axes=[2, 3], begin=[oy, ox], end=[oy + h, ox + w])
