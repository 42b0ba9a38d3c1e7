"""Broadcasting ops (``mxc/compiler/ops/broadcast.py``).

Binary ``broadcast_*`` ops use the shared kernels of :mod:`.elemwise_binary`
(Relax broadcasts numpy-style); explicit broadcasts use the inferred output shape.
"""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import R
from .elemwise_binary import binary_converter

BROADCAST = {
    "broadcast_add": "plus", "broadcast_sub": "minus", "broadcast_mul": "mul",
    "broadcast_div": "div", "broadcast_mod": "mod", "broadcast_power": "power",
    "broadcast_maximum": "maximum", "broadcast_minimum": "minimum",
    "broadcast_hypot": "hypot", "broadcast_equal": "equal",
    "broadcast_not_equal": "not_equal", "broadcast_greater": "greater",
    "broadcast_greater_equal": "greater_equal", "broadcast_lesser": "lesser",
    "broadcast_lesser_equal": "lesser_equal", "broadcast_logical_and": "logical_and",
    "broadcast_logical_or": "logical_or", "broadcast_logical_xor": "logical_xor",
}
for _op, _kernel in BROADCAST.items():
    register_converter(_op, module=__name__)(binary_converter(_kernel))


@register_converter("broadcast_to", "broadcast_axis", "broadcast_like")
def broadcast_explicit(ctx: Lowering):
    """The inferred output shape says everything (0-keeps, axes, like-shapes)."""
    x = ctx.inputs[0]
    if ctx.shape_of(x) == ctx.out_shape:
        return x
    return R.broadcast_to(x, ctx.out_shape)
