"""Operators whose output shape depends on the input values.

``_contrib_boolean_mask`` keeps the rows (along ``axis``) where ``index`` is
non-zero: how many is known only when the data is.  Shape inference gives
the output every extent except that one (``None``), as MXNet's
``infer_shape`` cannot know it either; the reference backend computes it
exactly; a compiled graph runs the node as a host step and its manifest
marks the outputs whose shape is data-dependent (docs/deployment-formats.md).
"""

from __future__ import annotations

import numpy as np

from .common import check_axis, fmt_shape
from .registry import Attr, OpDef, register_op, shape_error, to_int


@register_op("_contrib_boolean_mask", aliases=("_npi_boolean_mask",))
class BooleanMask(OpDef):
    """``data`` rows (along ``axis``) where the 1-D ``index`` is non-zero, in order."""

    attrs = {"axis": Attr(to_int, 0)}
    arguments = ("data", "index")

    def data_dependent_outputs(self, p):
        return [0]

    def infer_shape(self, p, in_shapes, out_shapes):
        d, idx = in_shapes
        if idx is not None and len(idx) != 1:
            raise shape_error(p, f"index must be 1-D, got {fmt_shape(idx)}")
        if d is None:
            return list(in_shapes), list(out_shapes)
        axis = check_axis(p, p.axis, len(d), "axis")
        if idx is None:
            idx = (d[axis],)
        elif None not in (idx[0], d[axis]) and idx[0] != d[axis]:
            raise shape_error(p, f"index length {idx[0]} differs from data {fmt_shape(d)} "
                                 f"along axis {axis}")
        out = d[:axis] + (None,) + d[axis + 1:]
        return [d, idx], [out]

    def infer_type(self, p, in_types, out_types):
        t = in_types[0] if in_types[0] is not None else out_types[0]
        return [t, in_types[1]], [t]

    def forward(self, p, inputs, ctx):
        data, index = inputs
        axis = check_axis(p, p.axis, data.ndim, "axis")
        if index.ndim != 1 or index.shape[0] != data.shape[axis]:
            raise shape_error(p, f"index {fmt_shape(index.shape)} does not match data "
                                 f"{fmt_shape(data.shape)} along axis {axis}")
        keep = np.flatnonzero(index != 0)
        return [np.ascontiguousarray(np.take(data, keep, axis=axis))]
