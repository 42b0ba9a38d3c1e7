"""Basic slicing: ``slice`` (``crop``), ``slice_axis`` and ``slice_like``.

Index ranges follow MXNet's ``GetIndexRange`` exactly: ``None`` entries take
the step-dependent defaults, negative begin/end count from the end, and the
range is clamped to the axis (an empty range gives an extent of 0).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, contiguous, fmt_shape, merged_shape, normalize_axis, same_dtype
from .registry import (Attr, OpDef, optional, register_op, shape_error, to_int,
                       to_opt_int_tuple, to_shape)


def index_range(p, length: int, begin, end, step) -> tuple[int, int]:
    """One axis of MXNet's GetIndexRange: clamped ``(b, e)`` (b == -1: empty)."""
    if length == 0:
        return 0, 0
    b = begin if begin is not None else (length - 1 if step < 0 else 0)
    e = end if end is not None else (-1 if step < 0 else length)
    if b < 0:
        b += length
    if e < 0 and end is not None:
        e += length
    if b < 0 and step > 0:
        b = 0
    if b > length - 1 and step < 0:
        b = length - 1
    if b < 0 or b > length - 1:
        b = -1
    e = max(e, -1)
    e = min(e, length)
    return b, e


def range_extent(b: int, e: int, step: int) -> int:
    """MXNet's SetSliceOpOutputDimSize for one axis."""
    if e == b or b < 0:
        return 0
    if step > 0:
        return (e - b - 1) // step + 1 if e > b else 0
    return (b - e - 1) // (-step) + 1 if e < b else 0


@register_op("slice", aliases=("crop", "_sparse_slice", "_npx_slice", "_npi_slice"))
class Slice(OpDef):
    """``slice``: ``data[b0:e0:s0, b1:e1:s1, ...]`` over the leading axes."""

    attrs = {
        "begin": Attr(to_opt_int_tuple),
        "end": Attr(to_opt_int_tuple),
        "step": Attr(to_opt_int_tuple, ()),
    }

    def validate(self, p):
        if len(p.begin) != len(p.end):
            raise attr_error(p, "end", f"begin and end must have the same length "
                                             f"({len(p.begin)} vs {len(p.end)})", op=self)
        if p.step and len(p.step) != len(p.begin):
            raise attr_error(p, "step", "step and begin must have the same length", op=self)
        if any(s == 0 for s in p.step if s is not None):
            raise attr_error(p, "step", "entries cannot be 0", op=self)

    def _step(self, p, i):
        return p.step[i] if p.step and p.step[i] is not None else 1

    def _check_rank(self, p, ndim):
        if ndim == 0:
            raise shape_error(p, "slice needs an input of at least 1 dimension")
        if len(p.begin) > ndim:
            raise shape_error(p, f"begin={p.begin} has more entries than the {ndim}-D input")

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return [dshape], [oshape]
        self._check_rank(p, len(dshape))
        new = list(dshape)
        for i in range(len(p.begin)):
            if dshape[i] is None:
                continue
            s = self._step(p, i)
            b, e = index_range(p, dshape[i], p.begin[i], p.end[i], s)
            new[i] = range_extent(b, e, s)
        return [dshape], [merged_shape(p, oshape, tuple(new), "output shape")]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        self._check_rank(p, x.ndim)
        for i in range(len(p.begin)):
            s = self._step(p, i)
            b, e = index_range(p, x.shape[i], p.begin[i], p.end[i], s)
            n = range_extent(b, e, s)
            x = np.take(x, b + s * np.arange(n, dtype=np.int64), axis=i)
        return [contiguous(x)]


@register_op("slice_axis")
class SliceAxis(OpDef):
    """``slice_axis``: ``data[..., begin:end, ...]`` along one axis (end None = to the end)."""

    attrs = {"axis": Attr(to_int), "begin": Attr(to_int), "end": Attr(optional(to_int))}

    def _range(self, p, shape):
        axis = normalize_axis(p, p.axis, len(shape))
        size = shape[axis]
        if size is None:
            return axis, None, None
        b = p.begin + size if p.begin < 0 else p.begin
        if size == 0:
            return axis, 0, 0
        e = size if p.end is None else (p.end + size if p.end < 0 else p.end)
        if not (0 <= b < e <= size):
            raise shape_error(p, f"invalid begin={p.begin}, end={p.end} for axis {p.axis} of "
                                 f"extent {size}")
        return axis, b, e

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is None:
            return [dshape], [oshape]
        axis, b, e = self._range(p, dshape)
        new = dshape[:axis] + (None if b is None else e - b,) + dshape[axis + 1:]
        return [dshape], [merged_shape(p, oshape, new, "output shape")]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axis, b, e = self._range(p, x.shape)
        return [contiguous(np.take(x, np.arange(b, e), axis=axis))]


@register_op("slice_like")
class SliceLike(OpDef):
    """``slice_like``: slice ``data`` from 0 to ``shape_like``'s extents on ``axes`` (all)."""

    arguments = ("data", "shape_like")
    attrs = {"axes": Attr(to_shape, ())}

    def _axes(self, p, dshape, fshape):
        if not p.axes:
            if len(dshape) != len(fshape):
                raise shape_error(p, f"slicing on all axes needs inputs of the same rank, got "
                                     f"{fmt_shape(dshape)} and {fmt_shape(fshape)}")
            return list(range(len(dshape)))
        axes = []
        for a in p.axes:
            ax = a + len(dshape) if a < 0 else a
            if not 0 <= ax < len(dshape) or ax >= len(fshape):
                raise shape_error(p, f"axis {a} is out of range for inputs {fmt_shape(dshape)} "
                                     f"and {fmt_shape(fshape)}")
            axes.append(ax)
        return axes

    def _out(self, p, dshape, fshape):
        out = list(dshape)
        for ax in self._axes(p, dshape, fshape):
            if dshape[ax] is not None and fshape[ax] is not None and fshape[ax] > dshape[ax]:
                raise shape_error(p, f"axis {ax}: extent {fshape[ax]} of shape_like exceeds the "
                                     f"input's {dshape[ax]}")
            out[ax] = fshape[ax]
        return tuple(out)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, fshape = in_shapes
        oshape = out_shapes[0]
        if dshape is not None and fshape is not None:
            oshape = merged_shape(p, oshape, self._out(p, dshape, fshape), "output shape")
        return [dshape, fshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        return same_dtype(in_types, out_types, ins=(0,))

    def forward(self, p, inputs, ctx):
        x, like = inputs
        index = tuple(slice(0, n) for n in self._out(p, x.shape, like.shape))
        return [contiguous(x[index])]
