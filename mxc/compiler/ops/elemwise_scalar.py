"""Tensor-scalar ops: ``_plus_scalar``, ``_rdiv_scalar``, ``_greater_scalar`` ...

Every op takes one input ``data`` and MXNet 1.9.1's parameters ``scalar``
(a double, default 1) and ``is_int`` (default True: the scalar is treated as
an integer-compatible value).

Semantics (MXNet's ``BinaryScalarOp``):

* The scalar is converted to the tensor's dtype first, like a C cast: on an
  int tensor it is truncated (``int32 x + 2.5 == x + 2``); on float16 it is
  rounded to half.
* With ``is_int=False`` an integer tensor is promoted: the output is float64
  and the op runs in double.  A bool tensor gives int64 (``is_int``) or
  float64.
* The op itself is the shared elementwise kernel of :mod:`.elemwise_binary`
  (``_rdiv_scalar`` computes ``scalar / x`` through float32 for non-double
  types, as MXNet's ``rdiv`` does).
"""

from __future__ import annotations

import numpy as np

from .common import cast_to, ElemwiseShapeMixin, is_integer_dtype
from .elemwise_binary import KERNELS, Kernel, scalar_as, swapped, via_float
from .registry import Attr, OpDef, register_op, to_bool, to_float

SCALAR_ATTRS = {
    "scalar": Attr(to_float, 1.0, "the scalar operand (a double)"),
    "is_int": Attr(to_bool, True, "whether the scalar is an integer value; False promotes "
                                  "integer tensors to float64"),
}


def scalar_op_dtype(in_dtype, is_int: bool):
    """The output dtype MXNet infers for a tensor-scalar op (None if unknown)."""
    if in_dtype is None:
        return None
    if np.dtype(in_dtype) == np.bool_:
        return "int64" if is_int else "float64"
    if is_integer_dtype(in_dtype) and not is_int:
        return "float64"
    return np.dtype(in_dtype).name


class ScalarOp(ElemwiseShapeMixin, OpDef):
    """``out = kernel(data, scalar)`` with the scalar cast to the op's dtype.

    Subclasses set ``kernel`` (a callable ``(tensor, scalar) -> result`` on
    arrays of one dtype).
    """

    attrs = SCALAR_ATTRS
    arguments = ("data",)
    kernel: Kernel = staticmethod(lambda a, b: a)

    def infer_type(self, p, in_types, out_types):
        t_in, t_out = in_types[0], out_types[0]
        if t_in is not None:
            return [t_in], [scalar_op_dtype(t_in, p.is_int)]
        if t_out is not None:   # only the plain case can run backward, as in MXNet
            return [t_out], [t_out]
        return in_types, out_types

    #: ``(x, scalar, y, dy) -> dx`` for the differentiable ones (None: no rule)
    grad = None

    def has_backward(self) -> bool:
        return type(self).grad is not None

    def backward(self, p, out_grads, inputs, outputs):
        if type(self).grad is None:
            return super().backward(p, out_grads, inputs, outputs)
        x = inputs[0]
        with np.errstate(all="ignore"):
            dx = type(self).grad(x, x.dtype.type(p.scalar), outputs[0], out_grads[0])
        return [np.asarray(dx).astype(x.dtype, copy=False)]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        dt = np.dtype(scalar_op_dtype(x.dtype.name, p.is_int))
        s = scalar_as(p.scalar, dt)
        out = type(self).kernel(x.astype(dt, copy=False), s)
        return [cast_to(out, ctx.out_dtypes[0] or dt)]


def _scalar(name: str, kernel: Kernel, aliases=(), doc: str = "", grad=None):
    """Register one tensor-scalar op using *kernel* (and derivative rule *grad*)."""
    cls = type("".join(w.capitalize() for w in name.strip("_").split("_")), (ScalarOp,),
               {"kernel": staticmethod(kernel), "__doc__": doc or f"MXNet ``{name}``.",
                "__module__": __name__, "grad": staticmethod(grad) if grad else None})
    return register_op(name, aliases=aliases)(cls)


K = KERNELS

# arithmetic -------------------------------------------------------------------------
_scalar("_plus_scalar", K["plus"], ("_PlusScalar",), "``data + scalar``",
        grad=lambda x, s, y, dy: dy)
_scalar("_minus_scalar", K["minus"], ("_MinusScalar",), "``data - scalar``",
        grad=lambda x, s, y, dy: dy)
_scalar("_rminus_scalar", swapped(K["minus"]), ("_RMinusScalar",), "``scalar - data``",
        grad=lambda x, s, y, dy: -dy)
_scalar("_mul_scalar", K["mul"], ("_MulScalar",), "``data * scalar``",
        grad=lambda x, s, y, dy: dy * s)
_scalar("_div_scalar", K["div"], ("_DivScalar",),
        "``data / scalar``; integer tensors divide with truncation toward zero",
        grad=lambda x, s, y, dy: dy / s)
_scalar("_rdiv_scalar", via_float(lambda a, b: b / a), ("_RDivScalar",),
        "``scalar / data``, computed through float32 for every non-double dtype",
        grad=lambda x, s, y, dy: -dy * s / (x * x))
_scalar("_mod_scalar", K["mod"], ("_ModScalar",),
        "``data % scalar`` with the sign of the divisor")
_scalar("_rmod_scalar", swapped(K["mod"]), ("_RModScalar",),
        "``scalar % data`` with the sign of the divisor")
_scalar("_power_scalar", K["power"], ("_PowerScalar",), "``data ** scalar``",
        grad=lambda x, s, y, dy: dy * s * x ** (s - 1))
_scalar("_rpower_scalar", swapped(K["power"]), ("_RPowerScalar",), "``scalar ** data``")
_scalar("_maximum_scalar", K["maximum"], ("_MaximumScalar",), "``max(data, scalar)``")
_scalar("_minimum_scalar", K["minimum"], ("_MinimumScalar",), "``min(data, scalar)``")
_scalar("_hypot_scalar", K["hypot"], ("_HypotScalar",), "``sqrt(data^2 + scalar^2)``")

# comparisons and logic: 0/1 in the op's dtype ----------------------------------------
_scalar("_equal_scalar", K["equal"], ("_EqualScalar",))
_scalar("_not_equal_scalar", K["not_equal"], ("_NotEqualScalar",))
_scalar("_greater_scalar", K["greater"], ("_GreaterScalar",))
_scalar("_greater_equal_scalar", K["greater_equal"], ("_GreaterEqualScalar",))
_scalar("_lesser_scalar", K["lesser"], ("_LesserScalar",))
_scalar("_lesser_equal_scalar", K["lesser_equal"], ("_LesserEqualScalar",))
_scalar("_logical_and_scalar", K["logical_and"], ("_LogicalAndScalar",))
_scalar("_logical_or_scalar", K["logical_or"], ("_LogicalOrScalar",))
_scalar("_logical_xor_scalar", K["logical_xor"], ("_LogicalXorScalar",))
