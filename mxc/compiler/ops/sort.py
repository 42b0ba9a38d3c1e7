"""Ordering: ``sort``, ``argsort`` and ``topk``.

Without an axis (``axis=None``) these work on the flattened array.  Indices
are returned as float32 unless ``dtype`` says otherwise; ``sort`` and
``topk(ret_typ='value')`` also compute a hidden int32 index output (MXNet's
second output, not listed by ``list_outputs``).  Ties keep the original
order (MXNet uses an unstable sort; the oracle's inputs have no ties).
"""

from __future__ import annotations

import numpy as np

from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool,
                       to_int)
from .common import check_axis, merged_shape, numel

_INDEX_DTYPES = ("uint8", "int32", "int64", "float16", "float32", "float64")


def ordered(x: np.ndarray, axis: int, ascend: bool) -> np.ndarray:
    """Stable argsort along *axis*; descending keeps ties in index order too."""
    if ascend:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    rev = np.flip(x, axis=axis)
    return n - 1 - np.flip(np.argsort(rev, axis=axis, kind="stable"), axis=axis)


def _axis_of(p, ndim):
    return None if p.axis is None else check_axis(p, p.axis, ndim)


def _work_view(x: np.ndarray, axis):
    """The array sorted along its last axis: flattened when axis is None."""
    if axis is None:
        return x.reshape(1, -1), -1
    return x, axis


@register_op("topk")
class TopK(OpDef):
    """``topk``: the ``k`` largest (or smallest) entries along ``axis``."""

    attrs = {
        "axis": Attr(optional(to_int), -1),
        "k": Attr(to_int, 1),
        "ret_typ": Attr(enum("value", "indices", "mask", "both"), "indices"),
        "is_ascend": Attr(to_bool, False),
        "dtype": Attr(enum(*_INDEX_DTYPES), "float32"),
    }

    def num_outputs(self, p):
        return 1 if p.ret_typ in ("indices", "mask") else 2

    def num_visible_outputs(self, p):
        return 2 if p.ret_typ == "both" else 1

    def _k(self, p, extent):
        if extent is None:
            return None if p.k <= 0 else p.k
        k = extent if p.k <= 0 else p.k
        if not 1 <= k <= extent:
            raise shape_error(p, f"k={p.k} must be in [1, {extent}]")
        return k

    def _target(self, p, dshape):
        axis = _axis_of(p, len(dshape))
        if p.ret_typ == "mask":
            return tuple(dshape)
        if axis is None:
            return (self._k(p, numel(dshape)),)
        return dshape[:axis] + (self._k(p, dshape[axis]),) + dshape[axis + 1:]

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape = in_shapes[0]
        outs = list(out_shapes)
        if dshape is not None:
            target = self._target(p, dshape)
            outs = [merged_shape(p, o, target, f"output {i} shape") for i, o in enumerate(outs)]
        return [dshape], outs

    def infer_type(self, p, in_types, out_types):
        t = in_types[0]
        outs = list(out_types)
        if p.ret_typ == "indices":
            outs[0] = p.dtype
            return list(in_types), outs
        t = t or outs[0]
        outs[0] = t
        if len(outs) > 1:
            outs[1] = "int32" if p.ret_typ == "value" else p.dtype
        return [t], outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axis = _axis_of(p, x.ndim)
        w, ax = _work_view(x, axis)
        k = self._k(p, w.shape[ax])
        idx = np.take(ordered(w, ax, p.is_ascend), np.arange(k), axis=ax)
        if p.ret_typ == "mask":
            mask = np.zeros(w.shape, dtype=x.dtype)
            np.put_along_axis(mask, idx, 1, axis=ax)
            return [mask.reshape(x.shape)]
        vals = np.take_along_axis(w, idx, axis=ax)
        if axis is None:
            vals, idx = vals.reshape(-1), idx.reshape(-1)
        if p.ret_typ == "indices":
            return [idx.astype(p.dtype)]
        idx_dtype = "int32" if p.ret_typ == "value" else p.dtype
        return [vals, idx.astype(idx_dtype)]


@register_op("sort")
class Sort(OpDef):
    """``sort``: sorted values along ``axis`` (plus a hidden int32 index output)."""

    attrs = {"axis": Attr(optional(to_int), -1), "is_ascend": Attr(to_bool, True)}

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape = in_shapes[0]
        outs = list(out_shapes)
        if dshape is not None:
            axis = _axis_of(p, len(dshape))
            target = (numel(dshape),) if axis is None else tuple(dshape)
            outs = [merged_shape(p, o, target, f"output {i} shape") for i, o in enumerate(outs)]
        return [dshape], outs

    def infer_type(self, p, in_types, out_types):
        t = in_types[0] or out_types[0]
        return [t], [t, "int32"]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axis = _axis_of(p, x.ndim)
        w, ax = _work_view(x, axis)
        idx = ordered(w, ax, p.is_ascend)
        vals = np.take_along_axis(w, idx, axis=ax)
        if axis is None:
            vals, idx = vals.reshape(-1), idx.reshape(-1)
        return [vals, idx.astype(np.int32)]


@register_op("argsort")
class ArgSort(OpDef):
    """``argsort``: indices that sort along ``axis``, as ``dtype`` (float32)."""

    attrs = {
        "axis": Attr(optional(to_int), -1),
        "is_ascend": Attr(to_bool, True),
        "dtype": Attr(enum(*_INDEX_DTYPES), "float32"),
    }

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            if len(dshape) == 0:
                target = (1,)
            elif p.axis is None:
                target = (numel(dshape),)
            else:
                _axis_of(p, len(dshape))
                target = tuple(dshape)
            oshape = merged_shape(p, oshape, target, "output shape")
        return [dshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axis = _axis_of(p, x.ndim)
        w, ax = _work_view(x, axis)
        idx = ordered(w, ax, p.is_ascend)
        if axis is None:
            idx = idx.reshape(-1)
        return [idx.astype(p.dtype)]
