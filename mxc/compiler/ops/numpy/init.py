"""DeepNumpy tensor creation: ``zeros``, ``ones``, ``full``, ``full_like``, ``arange``,
``eye``, ``identity``, ``linspace``/``logspace``, ``indices`` and the windows
(``hanning``, ``hamming``, ``blackman``).

Unlike the legacy ``_zeros``, a ``shape`` here is a NumPy shape: ``()`` is a
0-d array and an extent of 0 is an empty axis, never "unknown".  Values are
computed in double and cast once to ``dtype`` (default float32).
"""

from __future__ import annotations

import numpy as np

from ..registry import (Attr, OpDef, optional, register_op, shape_error, to_bool, to_dtype,
                        to_float, to_int, to_shape, to_str)
from ..common import merged_shape
from ._common import NumpyOpMixin

FAMILY = "numpy.init"

_CTX = {"ctx": Attr(to_str, "")}


class _Creation(NumpyOpMixin, OpDef):
    """No inputs; :meth:`make` builds the value in double, cast to ``dtype``."""

    arguments = ()
    attrs = {**_CTX, "dtype": Attr(to_dtype, "float32")}

    def make(self, p) -> np.ndarray:
        raise NotImplementedError

    def out_shape(self, p) -> tuple:
        """The output shape, known from the attributes alone."""
        return tuple(np.shape(self.make(p)))

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [merged_shape(p, out_shapes[0], self.out_shape(p), "output shape")]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype]

    def forward(self, p, inputs, ctx):
        return [np.asarray(self.make(p)).astype(ctx.out_dtypes[0] or p.dtype)]


class _Filled(_Creation):
    attrs = {"shape": Attr(to_shape, ()), **_CTX, "dtype": Attr(to_dtype, "float32")}
    value = 0.0

    def out_shape(self, p):
        return tuple(p.shape)

    def make(self, p):
        return np.full(p.shape, self.value, dtype=np.float64)


@register_op("_npi_zeros", family=FAMILY)
class NpZeros(_Filled):
    twin = "_zeros"
    value = 0.0


@register_op("_npi_ones", family=FAMILY)
class NpOnes(_Filled):
    twin = "_ones"
    value = 1.0


@register_op("_npi_full", family=FAMILY)
class NpFull(_Filled):
    attrs = {**_Filled.attrs, "value": Attr(to_float, 0.0)}

    def make(self, p):
        return np.full(p.shape, p.value, dtype=np.float64)


@register_op("_npi_identity", family=FAMILY)
class NpIdentity(_Filled):
    def make(self, p):
        n = p.shape[0] if p.shape else 0
        return np.eye(n, dtype=np.float64).reshape(p.shape)


@register_op("_npi_full_like", family=FAMILY)
class NpFullLike(NumpyOpMixin, OpDef):
    """``full_like(a, fill_value)``: a's shape, ``dtype`` or a's dtype."""

    arguments = ("a",)
    attrs = {"fill_value": Attr(to_float), **_CTX, "dtype": Attr(optional(to_dtype), None)}

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merged_shape(p, in_shapes[0], out_shapes[0], "output shape")
        return [s], [s]

    def infer_type(self, p, in_types, out_types):
        return list(in_types), [p.dtype or in_types[0]]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        dt = ctx.out_dtypes[0] or p.dtype or x.dtype
        return [np.full(x.shape, p.fill_value, dtype=np.float64).astype(dt)]


@register_op("_npi_arange", family=FAMILY)
class NpArange(_Creation):
    """``arange(start, stop, step)``; ``stop=None`` counts from 0 to ``start``."""

    attrs = {"start": Attr(to_float), "stop": Attr(optional(to_float), None),
             "step": Attr(to_float, 1.0), "repeat": Attr(to_int, 1),
             "infer_range": Attr(to_bool, False), **_CTX, "dtype": Attr(to_dtype, "float32")}

    def make(self, p):
        start, stop = (0.0, p.start) if p.stop is None else (p.start, p.stop)
        n = max(int(np.ceil((stop - start) / p.step)), 0)
        return np.repeat(start + p.step * np.arange(n, dtype=np.float64), p.repeat)


@register_op("_npi_eye", family=FAMILY)
class NpEye(_Creation):
    attrs = {"N": Attr(to_int), "M": Attr(optional(to_int), None), "k": Attr(to_int, 0),
             **_CTX, "dtype": Attr(to_dtype, "float32")}

    def make(self, p):
        return np.eye(p.N, p.M, p.k, dtype=np.float64)


class _Spaced(_Creation):
    attrs = {"start": Attr(to_float), "stop": Attr(to_float), "num": Attr(to_int),
             "endpoint": Attr(to_bool, True), **_CTX, "dtype": Attr(to_dtype, "float32")}


@register_op("_npi_linspace", family=FAMILY)
class NpLinspace(_Spaced):
    def make(self, p):
        return np.linspace(p.start, p.stop, p.num, endpoint=p.endpoint, dtype=np.float64)


@register_op("_npi_logspace", family=FAMILY)
class NpLogspace(_Spaced):
    attrs = {**_Spaced.attrs, "base": Attr(to_float, 10.0)}

    def make(self, p):
        return np.logspace(p.start, p.stop, p.num, endpoint=p.endpoint, base=p.base,
                           dtype=np.float64)


@register_op("_npi_indices", family=FAMILY)
class NpIndices(_Creation):
    attrs = {"dimensions": Attr(to_shape), **_CTX, "dtype": Attr(to_dtype, "int32")}

    def make(self, p):
        return np.indices(p.dimensions)


class _Window(_Creation):
    # M is a dmlc::optional<int> in MXNet: "None" parses, and inference then says it is missing
    attrs = {"M": Attr(optional(to_int)), **_CTX, "dtype": Attr(to_dtype, "float32")}
    fn = staticmethod(np.hanning)

    def make(self, p):
        if p.M is None:
            raise shape_error(p, "missing 1 required positional argument: 'M' (it is None)")
        return type(self).fn(p.M)


@register_op("_npi_hanning", family=FAMILY)
class NpHanning(_Window):
    fn = staticmethod(np.hanning)


@register_op("_npi_hamming", family=FAMILY)
class NpHamming(_Window):
    fn = staticmethod(np.hamming)


@register_op("_npi_blackman", family=FAMILY)
class NpBlackman(_Window):
    fn = staticmethod(np.blackman)
