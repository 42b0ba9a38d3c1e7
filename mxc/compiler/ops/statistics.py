"""Statistics of a tensor: ``moments`` and ``_histogram``.

* ``moments(data, axes, keepdims)``: ``[mean, variance]`` over ``axes``
  (population variance); MXNet rejects ``axes=None`` ("pass all axes to axes").
* ``_histogram(data[, bins], bin_cnt, range)``: ``[counts (int64), bin edges]``;
  with ``bin_cnt`` the edges are ``bin_cnt`` equal bins over ``range`` (default
  the data's min and max), otherwise the ``bins`` input holds the edges.  Values
  outside the edges are not counted; the last bin includes its right edge
  (NumPy's rule).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape, merge_into
from .reduce import reduce_axes, reduce_shape
from .registry import Attr, OpDef, optional, register_op, shape_error, to_bool, to_float_tuple, \
    to_int, to_shape


@register_op("moments")
class Moments(OpDef):
    attrs = {"axes": Attr(optional(to_shape), None), "keepdims": Attr(to_bool, False)}

    def validate(self, p):
        if not p.axes:
            raise attr_error(p, "axes", "empty axes are not supported (as in MXNet): pass "
                                               "every axis for global moments", op=self)

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        outs = list(out_shapes)
        d = in_shapes[0]
        if d is not None:
            shape = reduce_shape(p, d, p.axes, p.keepdims, False)
            merge_into(p, outs, 0, shape, "mean")
            merge_into(p, outs, 1, shape, "variance")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axes = reduce_axes(p, x.ndim, p.axes, False)
        work = x.astype(np.float64)
        mean = work.mean(axis=axes, keepdims=True)
        var = ((work - mean) ** 2).mean(axis=axes, keepdims=True)
        shape = reduce_shape(p, x.shape, p.axes, p.keepdims, False)
        return [mean.reshape(shape).astype(x.dtype), var.reshape(shape).astype(x.dtype)]


@register_op("_histogram", aliases=("histogram",))
class Histogram(OpDef):
    attrs = {"bin_cnt": Attr(optional(to_int), None),
             "range": Attr(optional(to_float_tuple), None)}

    def validate(self, p):
        if p.bin_cnt is not None and p.bin_cnt <= 0:
            raise attr_error(p, "bin_cnt", "must be positive", op=self)
        if p.range is not None and (len(p.range) != 2 or p.range[0] > p.range[1]):
            raise attr_error(p, "range", "must be (min, max) with min <= max", op=self)

    def input_names(self, p):
        return ["data"] if p.bin_cnt is not None else ["data", "bins"]

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        outs = list(out_shapes)
        if p.bin_cnt is not None:
            edges = (p.bin_cnt + 1,)
        else:
            bins = in_shapes[1]
            if bins is not None and len(bins) != 1:
                raise shape_error(p, f"bins must be 1-D, got {fmt_shape(bins)}")
            edges = bins
        if edges is not None and edges[0] is not None:
            merge_into(p, outs, 0, (edges[0] - 1,), "counts")
            merge_into(p, outs, 1, edges, "bin edges")
        return list(in_shapes), outs

    def infer_type(self, p, in_types, out_types):
        edge_type = in_types[1] if p.bin_cnt is None and in_types[1] else in_types[0]
        return list(in_types), ["int64", edge_type]

    def forward(self, p, inputs, ctx):
        data = inputs[0].reshape(-1).astype(np.float64)
        if p.bin_cnt is not None:
            lo, hi = p.range if p.range is not None else (
                (data.min(), data.max()) if data.size else (0.0, 1.0))
            edges = np.linspace(lo, hi, p.bin_cnt + 1)
            out_edges = edges.astype(inputs[0].dtype)
        else:
            out_edges = inputs[1].copy()
            edges = inputs[1].astype(np.float64)
        counts, _ = np.histogram(data, bins=edges)
        return [counts.astype(np.int64), out_edges]
