"""Reductions: ``sum``, ``mean``, ``max``, ``min``, ``prod``, ``nansum``, ``nanprod``,
``norm`` and the index reductions ``argmax``, ``argmin``, ``argmax_channel``.

MXNet's rules: no ``axis`` (or ``axis=()``) reduces everything to shape
``(1,)``; ``exclude=True`` reduces the axes *not* listed; ``keepdims`` keeps
reduced axes as extent 1.  ``argmax``/``argmin`` return indices in the
input's dtype (float32 for float32 input); without an axis (or on 1-D input)
they index the flattened array and return shape ``(1,)``.  Integer ``mean``
divides with C integer division.
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, check_axis, compute_dtype, merged_shape, same_dtype
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool,
                       to_int, to_shape)


def reduce_axes(p, ndim: int, axis, exclude: bool) -> tuple[int, ...]:
    """The axes reduced, sorted; every axis when ``axis`` is None or ``()``."""
    if axis is None or len(axis) == 0:
        return tuple(range(ndim))
    axes = sorted(a + ndim if a < 0 else a for a in axis)
    for a, b in zip(axes, axes[1:]):
        if a == b:
            raise shape_error(p, f"reduction axes {tuple(axis)} have duplicates")
    if axes[0] < 0 or axes[-1] >= ndim:
        raise shape_error(p, f"reduction axis {tuple(axis)} is out of range for a {ndim}-D input")
    if exclude:
        return tuple(i for i in range(ndim) if i not in axes)
    return tuple(axes)


def reduce_shape(p, dshape: tuple, axis, keepdims: bool, exclude: bool) -> tuple:
    """MXNet's ReduceAxesShapeImpl."""
    nd = len(dshape)
    if axis is None or len(axis) == 0:
        return (1,) * nd if keepdims else (1,)
    reduced = set(reduce_axes(p, nd, axis, exclude))
    if keepdims:
        return tuple(1 if i in reduced else d for i, d in enumerate(dshape))
    out = tuple(d for i, d in enumerate(dshape) if i not in reduced)
    return out if out else (1,)


class _ReduceAxesOp(OpDef):
    """``ReduceAxesParam`` ops: reduce ``axis`` (or the complement with ``exclude``)."""

    attrs = {
        "axis": Attr(optional(to_shape), None),
        "keepdims": Attr(to_bool, False),
        "exclude": Attr(to_bool, False),
    }

    def _exclude(self, p):
        return p.exclude

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            new = reduce_shape(p, dshape, p.axis, p.keepdims, self._exclude(p))
            oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape], [oshape]

    def _reduce(self, x: np.ndarray, axes: tuple) -> np.ndarray:
        raise NotImplementedError

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axes = reduce_axes(p, x.ndim, p.axis, self._exclude(p))
        y = self._reduce(x, axes)
        shape = reduce_shape(p, x.shape, p.axis, p.keepdims, self._exclude(p))
        return [np.asarray(y).astype(ctx.out_dtypes[0] or x.dtype).reshape(shape)]


def _acc_dtype(x: np.ndarray):
    """Accumulate floats in float64 (the oracle's reference), integers in int64."""
    return np.float64 if x.dtype.kind == "f" else np.int64


@register_op("sum", aliases=("sum_axis", "_sparse_sum"))
class Sum(_ReduceAxesOp):
    def _reduce(self, x, axes):
        return np.sum(x, axis=axes, dtype=_acc_dtype(x))


@register_op("mean", aliases=("_sparse_mean",))
class Mean(_ReduceAxesOp):
    def _reduce(self, x, axes):
        n = int(np.prod([x.shape[a] for a in axes]))
        s = np.sum(x, axis=axes, dtype=_acc_dtype(x))
        if x.dtype.kind in "iub":
            return np.sign(s) * (np.abs(s) // n) if n else s  # C integer division
        return s / n


@register_op("prod")
class Prod(_ReduceAxesOp):
    def _reduce(self, x, axes):
        return np.prod(x, axis=axes, dtype=_acc_dtype(x))


@register_op("nansum")
class NanSum(_ReduceAxesOp):
    def _reduce(self, x, axes):
        return np.nansum(x, axis=axes, dtype=_acc_dtype(x))


@register_op("nanprod")
class NanProd(_ReduceAxesOp):
    def _reduce(self, x, axes):
        return np.nanprod(x, axis=axes, dtype=_acc_dtype(x))


class _MinMax(_ReduceAxesOp):
    fn = staticmethod(np.max)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape = in_shapes[0]
        if dshape is not None and any(d == 0 for d in dshape):
            raise shape_error(p, "cannot reduce an empty input with max/min")
        return super().infer_shape(p, in_shapes, out_shapes)

    def _reduce(self, x, axes):
        return type(self).fn(x.astype(compute_dtype(x.dtype), copy=False), axis=axes)


@register_op("max", aliases=("max_axis",))
class Max(_MinMax):
    fn = staticmethod(np.max)


@register_op("min", aliases=("min_axis",))
class Min(_MinMax):
    fn = staticmethod(np.min)


@register_op("norm")
class Norm(OpDef):
    """``norm``: L1 (sum |x|) or L2 (sqrt of sum x^2, Frobenius for 2 axes) norm."""

    attrs = {
        "ord": Attr(to_int, 2),
        "axis": Attr(optional(to_shape), None),
        "out_dtype": Attr(optional(enum("float16", "float32", "float64", "int64", "int32",
                                        "int8")), None),
        "keepdims": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.ord not in (1, 2):
            raise attr_error(p, "ord", "only ord=1 and ord=2 are supported", op=self)
        if p.axis is not None and len(p.axis) > 2:
            raise attr_error(p, "axis", "at most two axes are supported", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            oshape = merged_shape(p, oshape, reduce_shape(p, dshape, p.axis, p.keepdims, False),
                                "output shape")
        return [dshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        if p.out_dtype is not None:
            return list(in_types), [p.out_dtype]
        return same_dtype(in_types, out_types)

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        axes = reduce_axes(p, x.ndim, p.axis, False)
        xf = x.astype(np.float64)
        if p.ord == 1:
            y = np.sum(np.abs(xf), axis=axes)
        else:
            y = np.sqrt(np.sum(xf * xf, axis=axes))
        shape = reduce_shape(p, x.shape, p.axis, p.keepdims, False)
        return [np.asarray(y).astype(ctx.out_dtypes[0] or x.dtype).reshape(shape)]


def _reduce_axis_shape(p, dshape: tuple, axis, keepdims: bool) -> tuple:
    """MXNet's ReduceAxisShapeImpl (single optional axis)."""
    if axis is None or len(dshape) == 1:
        return (1,) * len(dshape) if keepdims else (1,)
    a = check_axis(p, axis, len(dshape))
    if keepdims:
        return dshape[:a] + (1,) + dshape[a + 1:]
    return dshape[:a] + dshape[a + 1:]


class _ArgReduce(OpDef):
    """``argmax``/``argmin``: first index of the extreme value, in the input's dtype."""

    attrs = {"axis": Attr(optional(to_int), None), "keepdims": Attr(to_bool, False)}
    fn = staticmethod(np.argmax)

    def _axis(self, p):
        return p.axis

    def _keepdims(self, p):
        return p.keepdims

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            new = _reduce_axis_shape(p, dshape, self._axis(p), self._keepdims(p))
            oshape = merged_shape(p, oshape, new, "output shape")
        return [dshape], [oshape]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        xc = x.astype(compute_dtype(x.dtype), copy=False)
        axis = self._axis(p)
        if axis is None or x.ndim == 1:
            idx = type(self).fn(xc.reshape(-1))
        else:
            idx = type(self).fn(xc, axis=check_axis(p, axis, x.ndim))
        shape = _reduce_axis_shape(p, x.shape, axis, self._keepdims(p))
        return [np.asarray(idx).astype(ctx.out_dtypes[0] or x.dtype).reshape(shape)]


@register_op("argmax")
class ArgMax(_ArgReduce):
    fn = staticmethod(np.argmax)


@register_op("argmin")
class ArgMin(_ArgReduce):
    fn = staticmethod(np.argmin)


@register_op("argmax_channel")
class ArgMaxChannel(_ArgReduce):
    """``argmax_channel`` (legacy): ``argmax`` over axis 1."""

    attrs = {}

    def _axis(self, p):
        return 1

    def _keepdims(self, p):
        return False

