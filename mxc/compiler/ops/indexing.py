"""Gathering and scattering by index arrays.

``take``, ``pick``, ``batch_take``, ``one_hot``, ``gather_nd``,
``scatter_nd``, ``where``, ``_ravel_multi_index``, ``_unravel_index`` and
``Embedding``.

Index arrays may have any dtype (MXNet feeds float32 token ids); an index is
converted with a C cast (truncation toward zero) before the op's
out-of-range rule (clip, wrap, raise) is applied.
"""

from __future__ import annotations

import numpy as np

from .common import (attr_error, check_axis, contiguous, fmt_shape, merge_all, merged_shape,
                     normalize_axis, numel, same_dtype)
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool,
                       to_dtype, to_float, to_int, to_shape)


def as_index(idx: np.ndarray) -> np.ndarray:
    """C-cast an index array to int64 (floats truncate toward zero)."""
    if idx.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(idx).astype(np.int64)
    return idx.astype(np.int64)


def clip_or_wrap(j: np.ndarray, size: int, mode: str) -> np.ndarray:
    if mode == "wrap":
        return np.mod(j, size)
    return np.clip(j, 0, size - 1)


class _IndexDtypeMixin:
    """Inputs ``data_inputs`` and every output share a dtype; index inputs are free."""

    data_inputs: tuple[int, ...] = (0,)

    def infer_type(self, p, in_types, out_types):
        return same_dtype(in_types, out_types, ins=self.data_inputs)


@register_op("take")
class Take(_IndexDtypeMixin, OpDef):
    """``take``: ``a`` indexed along ``axis`` by ``indices`` (clip, wrap or raise)."""

    arguments = ("a", "indices")
    attrs = {"axis": Attr(to_int, 0), "mode": Attr(enum("raise", "wrap", "clip"), "clip")}

    def infer_shape(self, p, in_shapes, out_shapes):
        ashape, ishape = in_shapes
        oshape = out_shapes[0]
        if ashape is not None and ishape is not None:
            if len(ashape) == 0:
                raise shape_error(p, "take needs an input array of at least 1 dimension")
            axis = normalize_axis(p, p.axis, len(ashape))
            new = ashape[:axis] + tuple(ishape) + ashape[axis + 1:]
            oshape = merged_shape(p, oshape, new, "output shape")
        return [ashape, ishape], [oshape]

    def forward(self, p, inputs, ctx):
        a, idx = inputs
        axis = normalize_axis(p, p.axis, a.ndim)
        size = a.shape[axis]
        j = as_index(idx)
        if p.mode == "raise":
            if j.size and (j.min() < 0 or j.max() > size - 1):
                raise ValueError(f"take indices contain out-of-bound values for axis {axis} of "
                                 f"extent {size} (mode='raise')")
        else:
            j = clip_or_wrap(j, size, p.mode)
        return [np.take(a, j, axis=axis)]


@register_op("pick", aliases=("choose_element_0index", "_npx_pick"))
class Pick(_IndexDtypeMixin, OpDef):
    """``pick``: one element per position along ``axis``, chosen by ``index``."""

    arguments = ("data", "index")
    attrs = {
        "axis": Attr(optional(to_int), -1),
        "keepdims": Attr(to_bool, False),
        "mode": Attr(enum("wrap", "clip"), "clip"),
    }

    def validate(self, p):
        if p.axis is None:
            raise attr_error(p, "axis", "axis=None is not supported by pick; give an axis", op=self)

    def _shapes(self, p, dshape):
        """(output shape, index shape) for a data shape."""
        if len(dshape) == 1:
            return ((1,), (1,))
        axis = check_axis(p, p.axis, len(dshape))
        drop = dshape[:axis] + dshape[axis + 1:]
        keep = dshape[:axis] + (1,) + dshape[axis + 1:]
        return (keep if p.keepdims else drop), drop

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, ishape = in_shapes
        oshape = out_shapes[0]
        if dshape is not None:
            out, idx = self._shapes(p, dshape)
            oshape = merged_shape(p, oshape, out, "output shape")
            ishape = merged_shape(p, ishape, idx, "index shape")
        return [dshape, ishape], [oshape]

    def forward(self, p, inputs, ctx):
        x, idx = inputs
        axis = check_axis(p, p.axis, x.ndim)
        j = clip_or_wrap(as_index(idx), x.shape[axis], p.mode)
        j = np.expand_dims(j.reshape(x.shape[:axis] + x.shape[axis + 1:]), axis)
        out = np.take_along_axis(x, j, axis=axis)
        shape, _ = self._shapes(p, x.shape)
        return [out.reshape(shape)]


@register_op("batch_take")
class BatchTake(OpDef):
    """``batch_take`` (deprecated): ``out[i] = a[i, indices[i]]``; int32 indices, clipped."""

    arguments = ("a", "indices")
    attrs = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        ashape, ishape = in_shapes
        oshape = out_shapes[0]
        if ishape is not None:
            oshape = merged_shape(p, oshape, ishape, "output shape")
        elif oshape is not None:
            ishape = oshape
        if ashape is not None:
            if len(ashape) < 2:
                raise shape_error(p, "batch_take needs a data array of at least 2 dimensions")
            rows, n = numel(ashape[:-1]), numel(oshape) if oshape is not None else None
            if rows is not None and n is not None and rows != n:
                raise shape_error(p, f"indices of {n} elements do not match the {rows} rows of "
                                     f"{fmt_shape(ashape)}")
        return [ashape, ishape], [oshape]

    def infer_type(self, p, in_types, out_types):
        in_types, out_types = same_dtype(in_types, out_types, ins=(0,))
        in_types[1] = "int32"
        return in_types, out_types

    def forward(self, p, inputs, ctx):
        a, idx = inputs
        rows = a.reshape(a.shape[0], -1)
        j = np.clip(idx.reshape(-1).astype(np.int64), 0, rows.shape[1] - 1)
        out = rows[np.arange(j.size), j]
        return [out.reshape(idx.shape)]


@register_op("one_hot")
class OneHot(OpDef):
    """``one_hot``: ``on_value`` where the last axis equals the index, else ``off_value``."""

    arguments = ("indices",)
    attrs = {
        "depth": Attr(to_int),
        "on_value": Attr(to_float, 1.0),
        "off_value": Attr(to_float, 0.0),
        "dtype": Attr(to_dtype, "float32"),
    }

    def validate(self, p):
        if p.depth < 0:
            raise attr_error(p, "depth", "must be non-negative", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        ishape, oshape = in_shapes[0], out_shapes[0]
        if ishape is not None:
            oshape = merged_shape(p, oshape, tuple(ishape) + (p.depth,), "output shape")
        elif oshape is not None:
            ishape = oshape[:-1]
        return [ishape], [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        idx = as_index(inputs[0])
        dt = np.dtype(ctx.out_dtypes[0] or p.dtype)
        out = np.full(idx.shape + (p.depth,), np.array(p.off_value).astype(dt), dtype=dt)
        flat = out.reshape(-1, p.depth)
        j = idx.reshape(-1)
        ok = (j >= 0) & (j < p.depth)
        flat[np.nonzero(ok)[0], j[ok]] = np.array(p.on_value).astype(dt)
        return [out]


def _nd_index(p, ishape, dshape_len):
    if len(ishape) < 2:
        raise shape_error(p, f"indices must have at least 2 dimensions, got {fmt_shape(ishape)}")
    m = ishape[0]
    if m is not None and m > dshape_len:
        raise shape_error(p, f"indices address {m} dimensions but the array has {dshape_len}")
    if m is not None and m > 10:
        raise shape_error(p, "at most 10 dimensions can be indexed")
    return m


@register_op("gather_nd")
class GatherND(_IndexDtypeMixin, OpDef):
    """``gather_nd``: ``out[i..] = data[indices[0, i..], ..., indices[M-1, i..], ...]``."""

    arguments = ("data", "indices")
    attrs = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, ishape = in_shapes
        oshape = out_shapes[0]
        if dshape is not None and ishape is not None:
            m = _nd_index(p, ishape, len(dshape))
            if m is not None:
                new = tuple(ishape[1:]) + tuple(dshape[m:])
                oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape, ishape], [oshape]

    def forward(self, p, inputs, ctx):
        data, idx = inputs
        m = idx.shape[0]
        ix = []
        for j in range(m):
            size = data.shape[j]
            if idx.dtype.kind == "f":
                shifted = as_index(idx[j].astype(np.float64) + size)
            else:
                shifted = idx[j].astype(np.int64) + size
            if shifted.size and (shifted.min() < 0 or shifted.max() > 2 * size - 1):
                raise ValueError(f"gather_nd index out of bounds for dimension {j} of extent "
                                 f"{size}")
            ix.append(np.fmod(shifted, size))
        return [contiguous(data[tuple(ix)])]


@register_op("scatter_nd")
class ScatterND(_IndexDtypeMixin, OpDef):
    """``scatter_nd``: zeros of ``shape`` with ``data`` written at ``indices``."""

    arguments = ("data", "indices")
    attrs = {"shape": Attr(to_shape)}

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, ishape = in_shapes
        oshape = merged_shape(p, out_shapes[0], tuple(p.shape), "output shape")
        if ishape is not None:
            m = _nd_index(p, ishape, len(oshape))
            if m is not None:
                dshape = merged_shape(p, dshape, tuple(ishape[1:]) + tuple(oshape[m:]),
                                    "data shape")
        return [dshape, ishape], [oshape]

    def forward(self, p, inputs, ctx):
        data, idx = inputs
        out = np.zeros(tuple(p.shape), dtype=data.dtype)
        m = idx.shape[0]
        ix = tuple(as_index(idx[j]) for j in range(m))
        out[ix] = data
        return [out]


@register_op("where")
class Where(OpDef):
    """``where``: ``x`` where ``condition`` is nonzero, else ``y``.

    ``condition`` has the shape of ``x`` or is 1-D selecting whole rows.
    """

    arguments = ("condition", "x", "y")
    attrs = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        cshape, xshape, yshape = in_shapes
        t = merge_all(p, [xshape, yshape, out_shapes[0]], "x, y and the output")
        if t is not None and cshape is not None:
            if len(cshape) == len(t):
                c = merge_all(p, [cshape, t], "condition and x")
                cshape, t = c, c
            elif len(cshape) == 1:
                if cshape[0] is not None and t[0] is not None and cshape[0] != t[0]:
                    raise shape_error(p, f"a 1-D condition {fmt_shape(cshape)} must have the "
                                         f"length of x's first axis ({t[0]})")
                cshape = (t[0] if cshape[0] is None else cshape[0],)
                t = (cshape[0],) + t[1:]
            else:
                raise shape_error(p, f"condition {fmt_shape(cshape)} must have the shape of x "
                                     f"{fmt_shape(t)} or be 1-D")
        return [cshape, t, t], [t]

    def infer_type(self, p, in_types, out_types):
        return same_dtype(in_types, out_types, ins=(1, 2))

    def forward(self, p, inputs, ctx):
        cond, x, y = inputs
        c = cond != 0
        if c.ndim == 1 and x.ndim > 1:
            c = c.reshape((-1,) + (1,) * (x.ndim - 1))
        return [np.where(c, x, y)]


@register_op("_ravel_multi_index", aliases=("ravel_multi_index",))
class RavelMultiIndex(_IndexDtypeMixin, OpDef):
    """``_ravel_multi_index``: columns of ``(ndim, N)`` multi-indices -> ``(N,)`` flat."""

    attrs = {"shape": Attr(to_shape, ())}

    def validate(self, p):
        if not p.shape:
            raise attr_error(p, "shape", "must not be empty", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        nd = len(p.shape)
        if dshape is not None:
            if len(dshape) != 2 or (dshape[0] is not None and dshape[0] != nd):
                raise shape_error(p, f"input must be 2-D with {nd} rows, got {fmt_shape(dshape)}")
            oshape = merged_shape(p, oshape, (dshape[1],), "output shape")
        if oshape is not None:
            dshape = merged_shape(p, dshape, (nd, oshape[0]), "input shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        acc = np.zeros(x.shape[1:], dtype=np.float64 if x.dtype.kind == "f" else np.int64)
        for j, extent in enumerate(p.shape):
            acc = acc * extent + x[j]
            if acc.dtype.kind == "f":
                acc = np.trunc(acc)
        return [acc.astype(x.dtype)]


@register_op("_unravel_index", aliases=("unravel_index", "_npi_unravel_index"))
class UnravelIndex(_IndexDtypeMixin, OpDef):
    """``_unravel_index``: flat indices -> ``(ndim,) + data.shape`` multi-indices."""

    attrs = {"shape": Attr(to_shape, ())}

    def validate(self, p):
        if not p.shape:
            raise attr_error(p, "shape", "must not be empty", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        nd = len(p.shape)
        if dshape is not None:
            oshape = merged_shape(p, oshape, (nd,) + tuple(dshape), "output shape")
        elif oshape is not None:
            if oshape[0] is not None and oshape[0] != nd:
                raise shape_error(p, f"output must have {nd} rows, got {fmt_shape(oshape)}")
            dshape = tuple(oshape[1:])
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        idx = as_index(x)
        rows = [None] * len(p.shape)
        for j in range(len(p.shape) - 1, 0, -1):
            q = np.trunc(idx / p.shape[j]).astype(np.int64)  # C division
            rows[j] = idx - q * p.shape[j]
            idx = q
        rows[0] = idx
        return [np.stack(rows).astype(x.dtype)]


@register_op("Embedding")
class Embedding(OpDef):
    """``Embedding``: rows of ``weight`` (``(input_dim, output_dim)``) by clipped index."""

    arguments = ("data", "weight")
    attrs = {
        "input_dim": Attr(to_int),
        "output_dim": Attr(to_int),
        "dtype": Attr(to_dtype, "float32"),
        "sparse_grad": Attr(to_bool, False),
    }

    def validate(self, p):
        for name in ("input_dim", "output_dim"):
            if p[name] < 1:
                raise attr_error(p, name, "must be at least 1", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, wshape = in_shapes
        oshape = out_shapes[0]
        wshape = merged_shape(p, wshape, (p.input_dim, p.output_dim), "weight shape")
        if dshape is not None:
            oshape = merged_shape(p, oshape, tuple(dshape) + (p.output_dim,), "output shape")
        if oshape is not None:
            if oshape[-1] is not None and oshape[-1] != p.output_dim:
                raise shape_error(p, f"output {fmt_shape(oshape)} must end in output_dim="
                                     f"{p.output_dim}")
            dshape = merged_shape(p, dshape, tuple(oshape[:-1]), "data shape")
        return [dshape, wshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        w = in_types[1] or out_types[0] or p.dtype
        return [in_types[0], w], [w]

    def forward(self, p, inputs, ctx):
        data, weight = inputs
        j = np.clip(as_index(data), 0, weight.shape[0] - 1)
        return [weight[j]]
