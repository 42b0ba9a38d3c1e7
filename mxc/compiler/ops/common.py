"""Building blocks shared by the op families: shape algebra, errors and base classes.

This is the one home of the helpers every family needs (attribute errors,
shape merging, element counts, axis checks, dtype unification); a family module
imports them from here, never from another family, so each has one definition.
Families subclass :class:`UnaryOp`, :class:`BinaryOp`, :class:`BroadcastOp`
... so each op definition is a few lines saying only what is particular to it.
Shape conventions are those of :mod:`registry`: ``None`` is an unknown shape,
a ``None`` dimension an unknown extent.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...errors import AttributeInvalidError
from .registry import OpDef, Params, shape_error

# ---------------------------------------------------------------------------
# shape algebra
# ---------------------------------------------------------------------------


def is_known(shape) -> bool:
    """True when *shape* and all its dimensions are known."""
    return shape is not None and all(d is not None for d in shape)


def from_mxnet_shape(shape: Sequence[int] | None):
    """MXNet legacy shapes use 0 for an unknown dimension; map it to None."""
    if shape is None:
        return None
    return tuple(None if d == 0 else int(d) for d in shape)


def merge_shape(a, b):
    """Combine two partial shapes of one value; raises ValueError on conflict."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise ValueError(f"rank mismatch: {fmt_shape(a)} vs {fmt_shape(b)}")
    out = []
    for x, y in zip(a, b):
        if x is None:
            out.append(y)
        elif y is None or x == y:
            out.append(x)
        else:
            raise ValueError(f"{fmt_shape(a)} vs {fmt_shape(b)}")
    return tuple(out)


def fmt_shape(shape) -> str:
    if shape is None:
        return "?"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def numel(shape) -> int | None:
    """Number of elements of a (partial) shape; None when the shape or an extent is unknown."""
    if shape is None:
        return None
    n = 1
    for d in shape:
        if d is None:
            return None
        n *= d
    return n


def normalize_axis(p: Params, axis: int, ndim: int, what: str = "axis") -> int:
    """Map a possibly negative axis into ``[0, ndim)`` or raise a ShapeError."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise shape_error(p, f"{what}={axis} is out of range for a {ndim}-D input")
    return a


def check_axis(p: Params, axis: int, ndim: int, what: str = "axis") -> int:
    """MXNet's CheckAxis: ``axis`` in ``[-ndim, ndim)``; 0-D arrays count as 1-D."""
    if ndim == 0:
        if axis not in (0, -1):
            raise shape_error(p, f"{what}={axis} is out of range for a 0-D input")
        return 0
    return normalize_axis(p, axis, ndim, what)


def merged_shape(p: Params, old, new, what: str):
    """*old* and *new* (partial shapes) merged into one; a ShapeError naming *what* on conflict."""
    try:
        return merge_shape(old, new)
    except ValueError:
        raise shape_error(p, f"{what} has shape {fmt_shape(old)} but {fmt_shape(new)} "
                             f"is required") from None


def merge_into(p: Params, shapes: list, index: int, new, what: str) -> None:
    """Merge partial shape *new* into ``shapes[index]`` in place (None leaves it alone)."""
    if new is not None:
        shapes[index] = merged_shape(p, shapes[index], tuple(new), what)


def fill_one_unknown(shape: tuple, total: int | None) -> tuple:
    """MXNet's reverse reshape inference: fill a single unknown extent from a size."""
    if shape is None or total is None:
        return shape
    unknown = [i for i, d in enumerate(shape) if d is None]
    if len(unknown) != 1:
        return shape
    known = numel([d for d in shape if d is not None])
    if known == 0 or total % known:
        return shape
    out = list(shape)
    out[unknown[0]] = total // known
    return tuple(out)


def attr_error(p: Params, attr: str, message: str, op: OpDef | str | None = None
               ) -> AttributeInvalidError:
    """An :class:`AttributeInvalidError` naming the op, the node, the attribute and its value.

    *op* (an :class:`OpDef` or a name) defaults to the op of the node the
    params were parsed for.
    """
    if op is None:
        op = getattr(getattr(p, "node", None), "op", "?")
    name = getattr(op, "name", op)
    shown = f"{attr}={p[attr]!r}" if attr in p else attr
    return AttributeInvalidError(f"operator {name} (node {p.node_ref}): attribute {shown} is "
                                 f"invalid: {message}")


def merge_all(p: Params, shapes: list, what: str = "inputs and outputs"):
    """Merge a list of partial shapes that must all be equal."""
    merged = None
    for s in shapes:
        try:
            merged = merge_shape(merged, s)
        except ValueError as exc:
            raise shape_error(p, f"{what} must have the same shape: {exc}") from None
    return merged


def broadcast_shapes(p: Params, a, b):
    """MXNet's broadcast rule: align right, each pair equal or one of them 1."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if x is None or y is None:
            out.append(y if x == 1 else x if y == 1 else None)
        elif x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise shape_error(p, f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast")
    return tuple(out)


# ---------------------------------------------------------------------------
# dtype helpers
# ---------------------------------------------------------------------------

def compute_dtype(dtype) -> np.dtype:
    """The dtype MXNet's CPU kernels compute in: float16/bfloat16 math goes through float32.

    (oneDNN's bfloat16 kernels accumulate in float32 and round once on output.)
    """
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt == np.float16 or dt.name == "bfloat16" else dt


def is_integer_dtype(dtype) -> bool:
    """Integer types in MXNet's sense (bool is not one)."""
    return np.dtype(dtype).kind in "iu"


def same_dtype(in_types: list, out_types: list, ins: Sequence[int] = (0,),
               outs: Sequence[int] | None = None) -> tuple[list, list]:
    """Unify the dtypes of the listed inputs and outputs (others are left alone)."""
    outs = range(len(out_types)) if outs is None else outs
    known = next((t for t in [in_types[i] for i in ins] + [out_types[i] for i in outs]
                  if t is not None), None)
    in_types, out_types = list(in_types), list(out_types)
    if known is not None:
        for i in ins:
            in_types[i] = known
        for i in outs:
            out_types[i] = known
    return in_types, out_types


def contiguous(x) -> np.ndarray:
    """*x* as a C-contiguous array of the same shape.

    ``np.ascontiguousarray`` returns at least 1-D arrays, which turned the 0-d
    result of ``_np_dot``/``_npi_einsum`` on vectors into ``(1,)``; DeepNumpy
    keeps ``()``.
    """
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def cast_to(x, dtype) -> np.ndarray:
    """Cast a result to *dtype* (no copy when it already has it)."""
    return np.asarray(x).astype(dtype, copy=False)


# ---------------------------------------------------------------------------
# base classes
# ---------------------------------------------------------------------------


def sum_to_shape(grad: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Reduce a broadcast result's gradient back to an operand of *shape*."""
    grad = np.asarray(grad)
    lead = grad.ndim - len(shape)
    if lead > 0:
        grad = grad.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(tuple(shape))


class ElemwiseShapeMixin:
    """All inputs and outputs share one shape, inferred in both directions."""

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, list(in_shapes) + list(out_shapes))
        return [s] * len(in_shapes), [s] * len(out_shapes)


class UnaryOp(ElemwiseShapeMixin, OpDef):
    """``y = fn(x)`` elementwise, same shape and dtype.

    Subclasses set ``fn`` (a numpy function, applied in :func:`compute_dtype`).
    """

    arguments = ("data",)
    fn: Callable[[np.ndarray], np.ndarray] = staticmethod(lambda x: x)

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        y = type(self).fn(x.astype(compute_dtype(x.dtype), copy=False))
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


class BinaryOp(ElemwiseShapeMixin, OpDef):
    """``out = fn(lhs, rhs)`` on equally shaped inputs (MXNet ``elemwise_*``)."""

    arguments = ("lhs", "rhs")
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray] = staticmethod(lambda a, b: a)

    def forward(self, p, inputs, ctx):
        a, b = inputs
        dt = compute_dtype(a.dtype)
        y = type(self).fn(a.astype(dt, copy=False), b.astype(dt, copy=False))
        return [cast_to(y, ctx.out_dtypes[0] or a.dtype)]


class BroadcastOp(BinaryOp):
    """``broadcast_*``: numpy-style broadcasting (MXNet's rule)."""

    def infer_shape(self, p, in_shapes, out_shapes):
        out = broadcast_shapes(p, in_shapes[0], in_shapes[1])
        if out is not None and out_shapes[0] is not None:
            out = merge_all(p, [out, out_shapes[0]], "output")
        return list(in_shapes), [out if out is not None else out_shapes[0]]
