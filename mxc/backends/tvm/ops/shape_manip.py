"""Shape manipulation (``mxc/compiler/ops/shape_manip.py``).

Lowering is shape-specialised, so every reshaping op (``Reshape`` with its
special codes, ``Flatten``, ``expand_dims``, ``squeeze``, ``reshape_like``)
is a plain reshape to the inferred output shape.
"""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import R


@register_converter("Reshape", "Flatten", "expand_dims", "squeeze", "reshape_like")
def reshape(ctx: Lowering):
    return ctx.reshape(ctx.inputs[0], ctx.out_shape)


@register_converter("Cast")
def cast(ctx: Lowering):
    """C cast to the inferred output dtype (floats truncate to integers)."""
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)


@register_converter("transpose")
def transpose(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    axes = list(ctx.p.axes) or list(reversed(range(ndim)))
    axes = [a + ndim if a < 0 else a for a in axes]
    if axes == list(range(ndim)):
        return ctx.inputs[0]
    return R.permute_dims(ctx.inputs[0], axes)


@register_converter("SwapAxis")
def swap_axis(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    d1, d2 = (a + ndim if a < 0 else a for a in (ctx.p.dim1, ctx.p.dim2))
    if d1 == d2:
        return ctx.inputs[0]
    axes = list(range(ndim))
    axes[d1], axes[d2] = axes[d2], axes[d1]
    return R.permute_dims(ctx.inputs[0], axes)
