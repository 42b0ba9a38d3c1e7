"""Assignment ops (``mxc/compiler/ops/assign.py``).

``_slice_assign``/``_slice_assign_scalar`` lower to a select between the input
and a gather of the new values, with the slice positions taken from the op
definition (``index``); ``_grad_add`` is an add and
``_identity_with_attr_like_rhs`` a copy.  ``_contrib_index_copy`` stays on the
host: its row indices are data.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter, register_host_only
from ._common import R

register_host_only("_contrib_index_copy",
                   reason="rows to overwrite come from a data tensor (a scatter); host")


def _slice_maps(ctx: Lowering):
    """(mask of written positions, index of each position's source value)."""
    shape = ctx.in_shapes[0]
    index = ctx.node.opdef.index(ctx.p, shape)
    mask = np.zeros(shape, dtype=bool)
    mask[index] = True
    source = np.zeros(shape, dtype=np.int64)
    source[index] = np.arange(int(mask.sum()), dtype=np.int64).reshape(mask[index].shape)
    return mask, source


@register_converter("_slice_assign")
def slice_assign(ctx: Lowering):
    mask, source = _slice_maps(ctx)
    rhs = ctx.reshape(ctx.astype(ctx.inputs[1], ctx.out_dtype), (int(mask.sum()),))
    values = ctx.emit(R.take(rhs, ctx.const(source.reshape(-1)), axis=0))
    values = ctx.reshape(values, ctx.out_shape)
    return ctx.emit(R.where(ctx.const(mask), values, ctx.inputs[0]))


@register_converter("_slice_assign_scalar")
def slice_assign_scalar(ctx: Lowering):
    mask, _ = _slice_maps(ctx)
    fill = ctx.const(np.asarray(ctx.p.scalar).astype(ctx.out_dtype))
    return ctx.emit(R.where(ctx.const(mask), fill, ctx.inputs[0]))


@register_converter("_grad_add")
def grad_add(ctx: Lowering):
    return ctx.emit(R.add(ctx.inputs[0], ctx.inputs[1]))


@register_converter("_identity_with_attr_like_rhs")
def identity_like_rhs(ctx: Lowering):
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)
