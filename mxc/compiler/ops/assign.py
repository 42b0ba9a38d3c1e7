"""Assignment operators: a copy of the input with part of it overwritten.

MXNet runs these in place on NDArrays (``x[1:3] = y``); in a graph they are
pure ops whose output is the updated copy:

* ``_slice_assign(lhs, rhs, begin, end, step)``: ``lhs[slice] = rhs``;
* ``_slice_assign_scalar(data, scalar, begin, end, step)``: ``data[slice] = scalar``;
* ``_contrib_index_copy(old, idx, new)``: rows ``idx`` of ``old`` replaced by ``new``;
* ``_grad_add``: elementwise sum (gradient accumulation);
* ``_identity_with_attr_like_rhs``: ``lhs`` (``rhs`` only lends its attributes).
"""

from __future__ import annotations

import numpy as np

from .common import BinaryOp, ElemwiseShapeMixin, fmt_shape, merge_all
from .registry import Attr, OpDef, register_op, shape_error, to_float
from .slicing import Slice, index_range, range_extent


class _SliceAssign(Slice):
    """The slice ``begin/end/step`` (MXNet's ``slice`` rules) of the first input."""

    def index(self, p, shape) -> tuple:
        """Index arrays (one per sliced axis) selecting the slice of *shape*."""
        self._check_rank(p, len(shape))
        axes = []
        for i in range(len(p.begin)):
            s = self._step(p, i)
            b, e = index_range(p, shape[i], p.begin[i], p.end[i], s)
            axes.append(b + s * np.arange(range_extent(b, e, s), dtype=np.int64))
        return np.ix_(*axes)

    def slice_shape(self, p, shape):
        return Slice.infer_shape(self, p, [shape], [None])[1][0]


@register_op("_slice_assign", aliases=("_crop_assign",))
class SliceAssign(_SliceAssign):
    arguments = ("lhs", "rhs")

    def infer_shape(self, p, in_shapes, out_shapes):
        lhs = merge_all(p, [in_shapes[0], out_shapes[0]], "lhs and output")
        rhs = in_shapes[1]
        if lhs is not None:
            want = self.slice_shape(p, lhs)
            want = tuple(want) + tuple(lhs[len(want):])
            rhs = merge_all(p, [rhs, want], f"rhs (the slice of lhs {fmt_shape(lhs)})")
        return [lhs, rhs], [lhs]

    def forward(self, p, inputs, ctx):
        lhs, rhs = inputs
        out = lhs.copy()
        idx = self.index(p, lhs.shape)
        out[idx] = rhs.astype(lhs.dtype, copy=False)
        return [out]


@register_op("_slice_assign_scalar", aliases=("_crop_assign_scalar",))
class SliceAssignScalar(_SliceAssign):
    attrs = dict(Slice.attrs, scalar=Attr(to_float, 0.0))

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]], "data and output")
        return [s], [s]

    def forward(self, p, inputs, ctx):
        out = inputs[0].copy()
        out[self.index(p, out.shape)] = np.asarray(p.scalar).astype(out.dtype)
        return [out]


@register_op("_contrib_index_copy")
class IndexCopy(OpDef):
    """``old`` with rows ``idx[i]`` replaced by ``new[i]``."""

    arguments = ("old_tensor", "index_vector", "new_tensor")

    def infer_shape(self, p, in_shapes, out_shapes):
        old = merge_all(p, [in_shapes[0], out_shapes[0]], "old tensor and output")
        idx, new = in_shapes[1], in_shapes[2]
        if idx is not None and len(idx) != 1:
            raise shape_error(p, f"index vector must be 1-D, got {fmt_shape(idx)}")
        if old is not None and new is not None:
            if len(new) != len(old) or tuple(new[1:]) != tuple(old[1:]):
                raise shape_error(p, f"new tensor {fmt_shape(new)} must match old "
                                     f"{fmt_shape(old)} outside the first axis")
        if idx is not None and new is not None:
            merge_all(p, [(idx[0],), (new[0],)], "index count and new rows")
        return [old, idx, new], [old]

    def infer_type(self, p, in_types, out_types):
        known = next((t for t in [in_types[0], in_types[2], out_types[0]] if t is not None),
                     None)
        return [known, in_types[1], known], [known]

    def forward(self, p, inputs, ctx):
        old, idx, new = inputs
        out = old.copy()
        out[idx.astype(np.int64)] = new.astype(old.dtype, copy=False)
        return [out]


@register_op("_grad_add")
class GradAdd(BinaryOp):
    """``lhs + rhs`` (the op MXNet's executor uses to accumulate gradients)."""

    fn = staticmethod(np.add)


@register_op("_identity_with_attr_like_rhs")
class IdentityWithAttrLikeRhs(ElemwiseShapeMixin, OpDef):
    """``lhs``; ``rhs`` only provides attributes (shape, storage)."""

    arguments = ("lhs", "rhs")

    def infer_type(self, p, in_types, out_types):
        t = in_types[0] or out_types[0]
        return [t, in_types[1]], [t]

    def forward(self, p, inputs, ctx):
        return [inputs[0].copy()]
