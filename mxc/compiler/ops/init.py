"""Tensor creation: ``_zeros``, ``_ones``, ``_full``, ``_arange``, ``_eye``,
``_contrib_arange_like``, ``_linspace`` and ``_zeros_without_dtype``.

The first five take no inputs.  A ``shape`` attribute uses MXNet's legacy
syntax where 0 means "unknown" (``_zeros(shape=(0, 32))`` is a batch of
zero states whose batch size comes from the consumers), so the output
starts as ``(None, 32)`` and the inference driver completes it from what the
consumers say; the forward then reads the inferred ``ctx.out_shapes``.
``_arange(infer_range=True)`` without ``stop`` likewise takes its length from
its consumers.
"""

from __future__ import annotations

import math

import numpy as np

from .common import attr_error, check_axis, from_mxnet_shape, is_known, merged_shape
from .registry import (DTYPE_FROM_FLAG, Attr, OpDef, optional, register_op, shape_error, to_bool,
                       to_dtype, to_float, to_int, to_shape, to_str)


def _out_shape(p, ctx) -> tuple:
    shape = ctx.out_shapes[0] if ctx.out_shapes else None
    if not is_known(shape):
        raise shape_error(p, f"output shape {shape} is not fully known; the legacy shape "
                             f"{tuple(p.shape)} leaves extents to be inferred from consumers")
    return tuple(shape)


def _fill_value(value, dtype) -> np.ndarray:
    """``static_cast<DType>(value)``: floats truncate toward zero for integer dtypes."""
    dt = np.dtype(dtype)
    v = np.array(value, dtype=np.float64)
    if dt.kind in "iu":
        v = np.trunc(v)
    return v.astype(dt)


class _InitOp(OpDef):
    """No inputs; output shape from ``shape`` (0 = unknown), dtype from ``dtype``."""

    arguments = ()
    attrs = {
        "shape": Attr(to_shape, ()),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(to_dtype, "float32"),
    }
    value: float = 0.0

    def infer_shape(self, p, in_shapes, out_shapes):
        oshape = out_shapes[0]
        if p.np_shape:  # NumPy shape semantics: () is 0-d, 0 an empty extent
            oshape = merged_shape(p, oshape, tuple(p.shape), "output shape")
        elif p.shape:  # () is an unknown shape in MXNet's legacy mode
            oshape = merged_shape(p, oshape, from_mxnet_shape(p.shape), "output shape")
        return list(in_shapes), [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def _value(self, p):
        return self.value

    def forward(self, p, inputs, ctx):
        dt = ctx.out_dtypes[0] or p.dtype
        return [np.full(_out_shape(p, ctx), _fill_value(self._value(p), dt), dtype=dt)]


@register_op("_zeros")
class Zeros(_InitOp):
    value = 0.0


@register_op("_ones")
class Ones(_InitOp):
    value = 1.0


@register_op("_full")
class Full(_InitOp):
    attrs = dict(_InitOp.attrs, value=Attr(to_float))

    def _value(self, p):
        return p.value


@register_op("_eye")
class Eye(OpDef):
    """``_eye``: ``N x M`` (M=0 means N) with ones on diagonal ``k``."""

    arguments = ()
    attrs = {
        "N": Attr(to_int),
        "M": Attr(to_int, 0),
        "k": Attr(to_int, 0),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(to_dtype, "float32"),
    }

    def validate(self, p):
        if p.N < 0:
            raise attr_error(p, "N", "must be non-negative", op=self)
        if p.M < 0:
            raise attr_error(p, "M", "must be non-negative", op=self)

    def _shape(self, p):
        return (p.N, p.M if p.M > 0 else p.N)

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [merged_shape(p, out_shapes[0], self._shape(p), "output shape")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        n, m = self._shape(p)
        return [np.eye(n, m, p.k, dtype=ctx.out_dtypes[0] or p.dtype)]


def _range_values(start: float, step: float, repeat: int, size: int, dtype) -> np.ndarray:
    """``start + (i // repeat) * step`` computed in the output dtype, as MXNet's kernel."""
    dt = np.dtype(dtype)
    k = np.arange(size, dtype=np.int64) // repeat
    if dt.kind in "iub":
        s, st = int(math.trunc(start)), int(math.trunc(step))
        return (s + k * st).astype(dt)
    cdt = np.float32 if dt == np.float16 else dt
    s = np.asarray(np.asarray(start, dtype=dt), dtype=cdt)
    st = np.asarray(np.asarray(step, dtype=dt), dtype=cdt)
    return (s + k.astype(cdt) * st).astype(dt)


@register_op("_arange")
class Arange(OpDef):
    """``_arange``: ``start, start+step, ...`` below ``stop``, each value ``repeat`` times."""

    arguments = ()
    attrs = {
        "start": Attr(to_float),
        "stop": Attr(optional(to_float), None),
        "step": Attr(to_float, 1.0),
        "repeat": Attr(to_int, 1),
        "infer_range": Attr(to_bool, False),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(to_dtype, "float32"),
    }

    def validate(self, p):
        if p.step == 0:
            raise attr_error(p, "step", "cannot be 0", op=self)
        if p.repeat <= 0:
            raise attr_error(p, "repeat", "must be positive", op=self)

    def _range(self, p):
        """(start, stop) after MXNet's rule: a lone value is the stop."""
        if p.stop is None and not p.infer_range:
            return 0.0, p.start
        return p.start, p.stop

    def _size(self, p):
        start, stop = self._range(p)
        if stop is None:
            return None
        if (p.step > 0 and not start < stop) or (p.step < 0 and not start > stop):
            raise shape_error(p, f"invalid range (start, stop, step) = ({start}, {stop}, "
                                 f"{p.step})")
        return int(math.ceil((stop - start) / p.step) * p.repeat)

    def infer_shape(self, p, in_shapes, out_shapes):
        size = self._size(p)
        return list(in_shapes), [merged_shape(p, out_shapes[0], (size,), "output shape")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        size = self._size(p)
        if size is None:
            shape = ctx.out_shapes[0] if ctx.out_shapes else None
            if not is_known(shape):
                raise shape_error(p, "infer_range=True without stop needs the output length "
                                     "from the consumers, which is unknown")
            size = shape[0]
        start, _ = self._range(p)
        dt = ctx.out_dtypes[0] or p.dtype
        return [_range_values(start, p.step, p.repeat, size, dt)]


@register_op("_contrib_arange_like")
class ArangeLike(OpDef):
    """``_contrib_arange_like``: an arange shaped like ``data`` (or its ``axis`` extent)."""

    arguments = ("data",)
    attrs = {
        "start": Attr(to_float, 0.0),
        "step": Attr(to_float, 1.0),
        "repeat": Attr(to_int, 1),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(to_dtype, "float32"),
        "axis": Attr(optional(to_int), None),
    }

    def validate(self, p):
        if p.repeat <= 0:
            raise attr_error(p, "repeat", "must be positive", op=self)

    def _shape(self, p, dshape):
        if p.axis is None:
            return tuple(dshape)
        return (dshape[check_axis(p, p.axis, len(dshape))],)

    def infer_shape(self, p, in_shapes, out_shapes):
        dshape, oshape = in_shapes[0], out_shapes[0]
        if dshape is not None:
            oshape = merged_shape(p, oshape, self._shape(p, dshape), "output shape")
        elif oshape is not None and p.axis is None:
            dshape = oshape
        return [dshape], [oshape]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        shape = self._shape(p, inputs[0].shape)
        size = int(np.prod(shape))
        dt = ctx.out_dtypes[0] or p.dtype
        return [_range_values(p.start, p.step, p.repeat, size, dt).reshape(shape)]


@register_op("_zeros_without_dtype")
class ZerosWithoutDtype(_InitOp):
    """``_zeros`` whose ``dtype`` is MXNet's integer type code (0 float32, 1 float64, ...).

    MXNet cannot run it without a dtype (the default -1), and neither can mxc.
    """

    attrs = dict(_InitOp.attrs, dtype=Attr(to_int, -1))

    def validate(self, p):
        if p.dtype not in DTYPE_FROM_FLAG:
            codes = ", ".join(f"{k}={v}" for k, v in DTYPE_FROM_FLAG.items())
            raise attr_error(p, "dtype", f"must be an integer type code ({codes})", op=self)

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [DTYPE_FROM_FLAG[p.dtype]]

    def forward(self, p, inputs, ctx):
        return [np.zeros(_out_shape(p, ctx), dtype=DTYPE_FROM_FLAG[p.dtype])]


@register_op("_linspace")
class Linspace(OpDef):
    """``num`` evenly spaced values from ``start`` to ``stop`` (inclusive with ``endpoint``)."""

    arguments = ()
    attrs = {
        "start": Attr(to_float),
        "stop": Attr(to_float),
        "num": Attr(to_int),
        "endpoint": Attr(to_bool, True),
        "ctx": Attr(to_str, ""),
        "dtype": Attr(to_dtype, "float32"),
    }

    def validate(self, p):
        if p.num < 0:
            raise attr_error(p, "num", "must be non-negative", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [merged_shape(p, out_shapes[0], (p.num,), "output shape")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        div = p.num - 1 if p.endpoint else p.num
        step = (p.stop - p.start) / div if div > 0 else 0.0
        values = p.start + np.arange(p.num, dtype=np.float64) * step
        if p.endpoint and p.num > 1:
            values[-1] = p.stop
        return [values.astype(ctx.out_dtypes[0] or p.dtype)]
