"""Shape queries: ``shape_array`` and ``size_array`` return the input's shape
or element count as int64 arrays (constants once shapes are known)."""

from __future__ import annotations

import numpy as np

from .registry import OpDef, register_op
from .common import merged_shape


@register_op("shape_array")
class ShapeArray(OpDef):
    """``shape_array``: the input's shape as a 1-D int64 array."""

    # MXNet 1.9.1 registers shape_array without a parameter struct: any attribute (its
    # Python signature lists reshape_like's lhs_begin/...) stays on the node unread
    def infer_shape(self, p, in_shapes, out_shapes):
        oshape = out_shapes[0]
        if in_shapes[0] is not None:
            oshape = merged_shape(p, oshape, (len(in_shapes[0]),), "output shape")
        return list(in_shapes), [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["int64"]

    def forward(self, p, inputs, ctx):
        return [np.array(inputs[0].shape, dtype=np.int64)]


@register_op("size_array")
class SizeArray(OpDef):
    """``size_array``: the input's element count as a ``(1,)`` int64 array."""

    attrs = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [merged_shape(p, out_shapes[0], (1,), "output shape")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), ["int64"]

    def forward(self, p, inputs, ctx):
        return [np.array([inputs[0].size], dtype=np.int64)]
