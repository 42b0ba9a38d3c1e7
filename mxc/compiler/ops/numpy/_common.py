"""What the DeepNumpy families share: NumPy-mode dtype promotion and attribute converters.

MXNet 1.9.1's promotion for mixed binary operands (``NumpyBinaryMixedPrecisionType``)
is not NumPy's: an integer (or bool) tensor meeting a float tensor takes the
*float's* type (``int32 + float32 -> float32``, never float64), two floats of
different width take the wider, and two integers the wider (``uint8`` with
``int8`` gives int32).  True division of
two integer tensors gives float32 (MXNet's default float), and comparisons
give ``bool``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common import contiguous
from ..registry import OpDef, Params, shape_error
from ..registry import attr_value as parse_value

#: MXNet's default float type for integer true division and float-only results
DEFAULT_FLOAT = "float32"


def promote(a: str | None, b: str | None) -> str | None:
    """The common dtype of two binary operands as MXNet's numpy ops pick it."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    da, db = np.dtype(a), np.dtype(b)
    fa, fb = da.kind == "f", db.kind == "f"
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if {a, b} == {"uint8", "int8"}:
        return "int32"
    if da.kind == "b":
        return b
    if db.kind == "b":
        return a
    for wide in ("int64", "int32"):   # MXNet's get_more_precise_type order
        if wide in (a, b):
            return wide
    return np.promote_types(da, db).name


def float_result(dtype: str | None) -> str | None:
    """The dtype of a float-valued result: floats keep theirs, the rest give float32."""
    if dtype is None:
        return None
    return dtype if np.dtype(dtype).kind == "f" else DEFAULT_FLOAT


# ---------------------------------------------------------------------------
# attribute converters used by numpy ops only
# ---------------------------------------------------------------------------
def to_opt_axes(text: str) -> tuple[int, ...] | None:
    """``None``, one int or a tuple of ints (NumPy's ``axis`` argument)."""
    v = parse_value(text)
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in v):
        return tuple(v)
    raise ValueError("expected None, an integer or a tuple of integers")


def to_nested_ints(text: str) -> tuple:
    """A tuple of int tuples such as ``((1, 1), (2, 0))`` (``pad_width``)."""
    v = parse_value(text)

    def conv(x: Any):
        if isinstance(x, (tuple, list)):
            return tuple(conv(y) for y in x)
        if isinstance(x, int) and not isinstance(x, bool):
            return x
        raise ValueError("expected integers")
    if isinstance(v, int) and not isinstance(v, bool):
        return ((v, v),)
    if not isinstance(v, (tuple, list)):
        raise ValueError("expected a tuple of (before, after) pairs")
    return conv(v)


def axes_of(p: Params, axis, ndim: int) -> tuple[int, ...]:
    """Normalised, sorted, duplicate-free axes; every axis when *axis* is None."""
    if axis is None:
        return tuple(range(ndim))
    out = []
    for a in axis:
        b = a + ndim if a < 0 else a
        if not 0 <= b < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise shape_error(p, f"axis {a} is out of range for a {ndim}-D input")
        out.append(b)
    if len(set(out)) != len(out):
        raise shape_error(p, f"axes {tuple(axis)} have duplicates")
    return tuple(sorted(out))


class NumpyOpMixin:
    """Marks an op as a DeepNumpy op; :attr:`twin` names the legacy op sharing its kernel.

    ``twin`` is a fact about the op's semantics (the legacy op computes the
    same values for the operand dtypes :meth:`twin_dtype` gives), so the TVM
    backend may lower the numpy op with the twin's converter.
    """

    twin: str | None = None

    def twin_dtype(self, p, in_dtypes: list, out_dtypes: list) -> str | None:
        """The dtype the twin must run in (inputs are cast to it); None: as given."""
        return None


def is_numpy_op(op: OpDef) -> bool:
    return isinstance(op, NumpyOpMixin)


def stand_in(shape: tuple, dtype="float32") -> np.ndarray:
    """A read-only array of *shape* that occupies one element (zero strides)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=dtype), shape=tuple(shape),
                                           strides=(0,) * len(shape), writeable=False)


class NumpyFunctionOp(NumpyOpMixin, OpDef):
    """An op whose semantics is one NumPy expression, :meth:`compute`.

    Output shapes are found by running :meth:`compute` on zero-stride stand-in
    arrays of the input shapes (so shape inference and the kernel cannot
    disagree); that needs every input shape known and runs forward only, which
    is what MXNet's own FInferShape of these ops does.  Output dtypes default to
    the inputs' common dtype (MXNet's ElemwiseType); override :meth:`infer_type`
    where the op says otherwise.
    """

    arguments = ("data",)
    attrs: dict = {}

    def compute(self, p: Params, arrays: list) -> list:
        """The op on numpy arrays; returns the list of outputs."""
        raise NotImplementedError

    def stand_in(self, shape: tuple) -> np.ndarray:
        """The array shape inference feeds :meth:`compute` for an input of *shape*."""
        return stand_in(shape)

    def infer_shape(self, p, in_shapes, out_shapes):
        if any(s is None or any(d is None for d in s) for s in in_shapes):
            return list(in_shapes), list(out_shapes)
        try:
            outs = self.compute(p, [self.stand_in(s) for s in in_shapes])
        except (ValueError, IndexError, TypeError, np.linalg.LinAlgError) as exc:
            raise shape_error(p, f"inputs {[tuple(s) for s in in_shapes]}: {exc}") from None
        return list(in_shapes), [tuple(np.shape(o)) for o in outs]

    def forward(self, p, inputs, ctx):
        outs = self.compute(p, [np.asarray(x) for x in inputs])
        res = []
        for i, o in enumerate(outs):
            dt = ctx.out_dtypes[i] if i < len(ctx.out_dtypes) and ctx.out_dtypes[i] else None
            o = np.asarray(o)
            res.append(contiguous(o.astype(dt) if dt else o))
        return res
