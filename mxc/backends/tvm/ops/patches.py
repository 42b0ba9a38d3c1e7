"""Patch extraction (``mxc/compiler/ops/patches.py``): ``im2col`` lowers to a pad
and one gather whose indices the op definition computes (``gather_index``);
``col2im`` stays on the host (overlapping blocks are summed by a scatter-add)."""

from __future__ import annotations

from ..converter import Lowering, register_converter, register_host_only
from ._common import R

register_host_only("col2im", reason="summing overlapping blocks back is a scatter-add; host")


@register_converter("im2col")
def im2col(ctx: Lowering):
    n, c, h, w = ctx.in_shapes[0]
    index, (hp, wp), (ph, pw) = ctx.node.opdef.gather_index(ctx.p, c, h, w)
    padded = ctx.emit(R.nn.pad(ctx.inputs[0], [0, 0, 0, 0, ph, ph, pw, pw]))
    flat = ctx.reshape(padded, (n, c * hp * wp))
    out = ctx.emit(R.take(flat, ctx.const(index.reshape(-1)), axis=1))
    return ctx.reshape(out, ctx.out_shape)
