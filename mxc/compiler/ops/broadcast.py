"""Broadcasting: ``broadcast_add`` ..., ``broadcast_to``, ``broadcast_axis``, ``broadcast_like``.

Binary ``broadcast_*`` ops align shapes on the right; each dimension pair
must be equal or contain a 1 (MXNet's rule, as numpy's).  Shape inference
runs forward only (inputs -> output), as in MXNet; the element semantics are
the shared kernels of :mod:`.elemwise_binary` (integer division truncates,
``broadcast_mod`` takes the divisor's sign, comparisons return 0/1 in the
input dtype).

``broadcast_to(shape=...)`` keeps an input dimension where the target says 0;
``broadcast_axis(axis=..., size=...)`` expands size-1 axes (MXNet 1.9.1
rejects negative axes); ``broadcast_like`` takes the target shape from its
second input, optionally only on ``lhs_axes``/``rhs_axes``.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeInvalidError
from .common import BroadcastOp, UnaryOp, cast_to, fmt_shape, merge_all
from .elemwise_binary import GRADIENTS, KERNELS, binary_backward
from .registry import Attr, OpDef, optional, register_op, shape_error, to_shape


class BroadcastBinaryOp(BroadcastOp):
    """``out = kernel(lhs, rhs)`` with broadcasting; ``kernel`` names a :data:`KERNELS` entry."""

    kernel: str = ""

    def has_backward(self) -> bool:
        return self.kernel in GRADIENTS

    def backward(self, p, out_grads, inputs, outputs):
        return binary_backward(self, p, out_grads, inputs, outputs)

    def forward(self, p, inputs, ctx):
        a, b = (np.asarray(x) for x in inputs)
        dt = np.result_type(a, b)
        out = KERNELS[self.kernel](a.astype(dt, copy=False), b.astype(dt, copy=False))
        return [cast_to(out, ctx.out_dtypes[0] or dt)]


@register_op("broadcast_add", aliases=("broadcast_plus",))
class BroadcastAdd(BroadcastBinaryOp):
    kernel = "plus"


@register_op("broadcast_sub", aliases=("broadcast_minus",))
class BroadcastSub(BroadcastBinaryOp):
    kernel = "minus"


@register_op("broadcast_mul")
class BroadcastMul(BroadcastBinaryOp):
    kernel = "mul"


@register_op("broadcast_div")
class BroadcastDiv(BroadcastBinaryOp):
    """Integer inputs divide with truncation toward zero."""
    kernel = "div"


@register_op("broadcast_mod")
class BroadcastMod(BroadcastBinaryOp):
    """Remainder with the sign of the divisor; ``x % 0 == 0``."""
    kernel = "mod"


@register_op("broadcast_power")
class BroadcastPower(BroadcastBinaryOp):
    kernel = "power"


@register_op("broadcast_maximum")
class BroadcastMaximum(BroadcastBinaryOp):
    kernel = "maximum"


@register_op("broadcast_minimum")
class BroadcastMinimum(BroadcastBinaryOp):
    kernel = "minimum"


@register_op("broadcast_hypot")
class BroadcastHypot(BroadcastBinaryOp):
    kernel = "hypot"


@register_op("broadcast_equal")
class BroadcastEqual(BroadcastBinaryOp):
    kernel = "equal"


@register_op("broadcast_not_equal")
class BroadcastNotEqual(BroadcastBinaryOp):
    kernel = "not_equal"


@register_op("broadcast_greater")
class BroadcastGreater(BroadcastBinaryOp):
    kernel = "greater"


@register_op("broadcast_greater_equal")
class BroadcastGreaterEqual(BroadcastBinaryOp):
    kernel = "greater_equal"


@register_op("broadcast_lesser")
class BroadcastLesser(BroadcastBinaryOp):
    kernel = "lesser"


@register_op("broadcast_lesser_equal")
class BroadcastLesserEqual(BroadcastBinaryOp):
    kernel = "lesser_equal"


@register_op("broadcast_logical_and")
class BroadcastLogicalAnd(BroadcastBinaryOp):
    kernel = "logical_and"


@register_op("broadcast_logical_or")
class BroadcastLogicalOr(BroadcastBinaryOp):
    kernel = "logical_or"


@register_op("broadcast_logical_xor")
class BroadcastLogicalXor(BroadcastBinaryOp):
    kernel = "logical_xor"


# ---------------------------------------------------------------------------
# explicit broadcasts
# ---------------------------------------------------------------------------
def _expand(p, ishape, i, target):
    """One output dimension from input dim ``ishape[i]`` broadcast to ``target``."""
    d = ishape[i]
    if d is not None and d != target and d != 1:
        raise shape_error(p, f"cannot broadcast {fmt_shape(ishape)}: dimension {i} has size {d}, "
                             f"target {target} (only size-1 dimensions broadcast)")
    return target


class ExplicitBroadcastOp(UnaryOp):
    """Input ``data`` broadcast to a shape given by :meth:`out_shape` (forward inference only)."""

    def out_shape(self, p, ishape):
        raise NotImplementedError

    def infer_shape(self, p, in_shapes, out_shapes):
        ishape = in_shapes[0]
        if ishape is None:
            return in_shapes, out_shapes
        out = self.out_shape(p, tuple(ishape))
        if out_shapes[0] is not None:
            out = merge_all(p, [out, out_shapes[0]], "output")
        return in_shapes, [out]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        y = np.broadcast_to(x, self.out_shape(p, x.shape)).copy()
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


@register_op("broadcast_to")
class BroadcastTo(ExplicitBroadcastOp):
    """Broadcast to ``shape``; a 0 in ``shape`` keeps that input dimension."""

    attrs = {"shape": Attr(to_shape, (), "target shape; 0 keeps the input's dimension")}

    def out_shape(self, p, ishape):
        if len(ishape) != len(p.shape):
            raise shape_error(p, f"cannot broadcast {fmt_shape(ishape)} to shape {p.shape}: "
                                 f"ranks differ")
        return tuple(ishape[i] if t == 0 else _expand(p, ishape, i, t)
                     for i, t in enumerate(p.shape))


@register_op("broadcast_axis", aliases=("broadcast_axes",))
class BroadcastAxis(ExplicitBroadcastOp):
    """Expand the size-1 axes ``axis[k]`` to ``size[k]``."""

    attrs = {
        "axis": Attr(to_shape, (), "axes to broadcast (non-negative)"),
        "size": Attr(to_shape, (), "target size of each axis"),
    }

    def validate(self, p):
        where = f"operator {self.name} (node {p.node_ref})"
        if len(p.axis) != len(p.size):
            raise AttributeInvalidError(
                f"{where}: attributes axis={p.axis} and size={p.size} must have the same length")
        for a in p.axis:
            if a < 0:
                raise AttributeInvalidError(
                    f"{where}: attribute axis={p.axis} is invalid: negative axes are not "
                    f"supported by MXNet's broadcast_axis")

    def out_shape(self, p, ishape):
        out = list(ishape)
        for a, s in zip(p.axis, p.size):
            if a >= len(ishape):
                raise shape_error(p, f"axis {a} is out of range for a {len(ishape)}-D input")
            out[a] = _expand(p, ishape, a, s)
        return tuple(out)


@register_op("broadcast_like")
class BroadcastLike(OpDef):
    """Broadcast ``lhs`` to the shape of ``rhs`` (or only along ``lhs_axes`` <- ``rhs_axes``)."""

    arguments = ("lhs", "rhs")
    attrs = {
        "lhs_axes": Attr(optional(to_shape), None, "axes of lhs to broadcast"),
        "rhs_axes": Attr(optional(to_shape), None, "axes of rhs giving the target sizes"),
    }

    def validate(self, p):
        if p.lhs_axes is not None and p.rhs_axes is not None:
            where = f"operator {self.name} (node {p.node_ref})"
            if len(p.lhs_axes) != len(p.rhs_axes):
                raise AttributeInvalidError(
                    f"{where}: attributes lhs_axes={p.lhs_axes} and rhs_axes={p.rhs_axes} "
                    f"must have the same length")
            if not p.lhs_axes:
                raise AttributeInvalidError(f"{where}: attributes lhs_axes/rhs_axes must not "
                                            f"be empty")

    def out_shape(self, p, lhs, rhs):
        if p.lhs_axes is None or p.rhs_axes is None:
            if len(lhs) != len(rhs):
                raise shape_error(p, f"cannot broadcast {fmt_shape(lhs)} like {fmt_shape(rhs)}: "
                                     f"ranks differ")
            out = []
            for i, t in enumerate(rhs):
                if t is None:   # unknown target: only a non-1 lhs dimension is certain
                    out.append(lhs[i] if lhs[i] != 1 else None)
                else:
                    out.append(_expand(p, lhs, i, t))
            return tuple(out)
        out = list(lhs)
        for la, ra in zip(p.lhs_axes, p.rhs_axes):
            src = la + len(lhs) if la < 0 else la
            dst = ra + len(rhs) if ra < 0 else ra
            if not 0 <= src < len(lhs):
                raise shape_error(p, f"lhs_axes entry {la} is out of range for {fmt_shape(lhs)}")
            if not 0 <= dst < len(rhs):
                raise shape_error(p, f"rhs_axes entry {ra} is out of range for {fmt_shape(rhs)}")
            if lhs[src] is not None and lhs[src] != 1:
                raise shape_error(p, f"lhs axis {la} has size {lhs[src]}; only size-1 axes "
                                     f"can be broadcast")
            out[src] = rhs[dst]
        return tuple(out)

    def infer_shape(self, p, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return in_shapes, out_shapes
        out = self.out_shape(p, tuple(lhs), tuple(rhs))
        if out_shapes[0] is not None:
            out = merge_all(p, [out, out_shapes[0]], "output")
        return in_shapes, [out]

    def forward(self, p, inputs, ctx):
        lhs, rhs = (np.asarray(x) for x in inputs)
        y = np.broadcast_to(lhs, self.out_shape(p, lhs.shape, rhs.shape)).copy()
        return [cast_to(y, ctx.out_dtypes[0] or lhs.dtype)]
