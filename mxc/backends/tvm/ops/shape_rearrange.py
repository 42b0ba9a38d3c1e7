"""Rearrangements across axes (``mxc/compiler/ops/shape_rearrange.py``):
``depth_to_space``/``space_to_depth`` as reshape-permute-reshape, ``diag`` as a
TE compute."""

from __future__ import annotations

from tvm import te, tirx

from ..converter import Lowering, register_converter
from ._common import R


@register_converter("depth_to_space")
def depth_to_space(ctx: Lowering):
    b = ctx.p.block_size
    n, c, h, w = ctx.in_shapes[0]
    x = ctx.reshape(ctx.inputs[0], (n, b, b, c // (b * b), h, w))
    x = ctx.emit(R.permute_dims(x, [0, 3, 4, 1, 5, 2]))
    return ctx.reshape(x, ctx.out_shape)


@register_converter("space_to_depth")
def space_to_depth(ctx: Lowering):
    b = ctx.p.block_size
    n, c, h, w = ctx.in_shapes[0]
    x = ctx.reshape(ctx.inputs[0], (n, c, h // b, b, w // b, b))
    x = ctx.emit(R.permute_dims(x, [0, 3, 5, 1, 2, 4]))
    return ctx.reshape(x, ctx.out_shape)


@register_converter("diag")
def diag(ctx: Lowering):
    k = ctx.p.k
    shape = ctx.in_shapes[0]
    out_shape = ctx.out_shape
    if len(shape) == 1:
        def build(x):
            def f(i, j):
                src = i - max(0, -k)
                ok = tirx.all(j - i == k, src >= 0, src < shape[0])
                return tirx.Select(ok, x[tirx.max(tirx.min(src, shape[0] - 1), 0)],
                                   tirx.const(0, x.dtype))
            return te.compute(out_shape, f, name="mxc_diag")
        return ctx.emit_te(build, ctx.inputs[0], primfunc_name_hint="mxc_diag")
    ndim = len(shape)
    a1, a2 = (a + ndim if a < 0 else a for a in (ctx.p.axis1, ctx.p.axis2))
    rest = [i for i in range(ndim) if i not in (a1, a2)]

    def extract(x):
        def f(*idx):
            d = idx[-1]
            full = [None] * ndim
            for pos, axis in enumerate(rest):
                full[axis] = idx[pos]
            full[a1] = d + max(0, -k)
            full[a2] = d + max(0, k)
            return x[tuple(full)]
        return te.compute(out_shape, f, name="mxc_diagonal")
    return ctx.emit_te(extract, ctx.inputs[0], primfunc_name_hint="mxc_diagonal")
