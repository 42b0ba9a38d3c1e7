"""Patch extraction (``mxc/compiler/ops/patches.py``): ``im2col`` lowers to a pad
and one gather whose indices the op definition computes (``gather_index``);
``col2im``, a scatter-add, lowers to its gather form: each padded image position
sums the column entries the op definition lists for it (``scatter_sources``),
then the padding is cropped."""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype


@register_converter("im2col")
def im2col(ctx: Lowering):
    n, c, h, w = ctx.in_shapes[0]
    index, (hp, wp), (ph, pw) = ctx.node.opdef.gather_index(ctx.p, c, h, w)
    padded = ctx.emit(R.nn.pad(ctx.inputs[0], [0, 0, 0, 0, ph, ph, pw, pw]))
    flat = ctx.reshape(padded, (n, c * hp * wp))
    out = ctx.emit(R.take(flat, ctx.const(index.reshape(-1)), axis=1))
    return ctx.reshape(out, ctx.out_shape)


@register_converter("col2im")
def col2im(ctx: Lowering):
    n, rows, blocks = ctx.in_shapes[0]
    _, c, h, w = ctx.out_shape
    sources = ctx.node.opdef.scatter_sources(ctx.p, c)
    dt = compute_dtype(ctx.in_dtypes[0])
    flat = ctx.reshape(ctx.astype(ctx.inputs[0], dt), (n, rows * blocks))
    zero = ctx.emit(R.zeros((n, 1), dt))
    padded = ctx.emit(R.concat([flat, zero], axis=1))       # index rows*blocks reads 0
    index = np.where(sources < 0, rows * blocks, sources)
    picked = ctx.emit(R.take(padded, ctx.const(index.reshape(-1)), axis=1))
    summed = ctx.emit(R.sum(ctx.reshape(picked, (n,) + index.shape), axis=[2]))
    ph, pw = ctx.p.pad or (0, 0)
    image = ctx.reshape(summed, (n, c, h + 2 * ph, w + 2 * pw))
    out = ctx.emit(R.strided_slice(image, axes=[2, 3], begin=[ph, pw], end=[ph + h, pw + w]))
    return ctx.astype(out, ctx.out_dtype)
