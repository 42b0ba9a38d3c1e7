"""Shape queries (``mxc/compiler/ops/shape_query.py``): constants once the
input's shape is known."""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import reference_constant


@register_converter("shape_array", "size_array")
def shape_constant(ctx: Lowering):
    return reference_constant(ctx)
