"""Small elementwise ops: identities, constant-likes, ``clip``, ``hard_sigmoid``, ``smooth_l1``.

* ``_copy`` (``identity``), ``BlockGrad`` (``stop_gradient``) and
  ``make_loss`` return their input unchanged in inference; they differ only
  in gradients (and ``make_loss`` names its output ``loss``).
* ``zeros_like``/``ones_like`` read only the input's shape and dtype.
* ``clip`` converts its bounds to the tensor's dtype first, then clamps
  (upper bound tested first; NaN passes through).
* ``hard_sigmoid`` is ``clamp(alpha * x + beta, 0, 1)``.
* ``smooth_l1`` is the Huber-like loss with ``sigma = scalar``::

      0.5 * (sigma * x)^2     if |x| < 1 / sigma^2
      |x| - 0.5 / sigma^2     otherwise
"""

from __future__ import annotations

import numpy as np

from .common import UnaryOp, cast_to
from .elemwise_binary import math_dtype, scalar_as, to_dtype_trunc
from .elemwise_scalar import SCALAR_ATTRS, ScalarOp
from .registry import REQUIRED, Attr, OpDef, register_op, to_float


# ---------------------------------------------------------------------------
# identities
# ---------------------------------------------------------------------------
class IdentityOp(UnaryOp):
    """Forward is the identity (a copy of the input)."""

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        return [cast_to(x.copy(), ctx.out_dtypes[0] or x.dtype)]


@register_op("_copy", aliases=("identity",))
class Copy(IdentityOp):
    pass


@register_op("BlockGrad", aliases=("stop_gradient",))
class BlockGrad(IdentityOp):
    """Identity that blocks gradients."""


@register_op("make_loss")
class MakeLossFn(IdentityOp):
    """Identity marking a loss head; its output is called ``loss``.

    MXNet registers ``make_loss`` without a parameter struct: whatever users
    pass (the ``MakeLoss`` layer's ``grad_scale``, a ``dtype``) stays on the
    node unread, and so it does here (no declared attributes).
    """

    def output_names(self, p):
        return ["loss"]


class FillLikeOp(UnaryOp):
    """A constant tensor with the input's shape and dtype; the values are ignored."""

    fill_value = 0

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        dt = ctx.out_dtypes[0] or x.dtype
        return [np.full(x.shape, self.fill_value, dtype=dt)]


@register_op("zeros_like")
class ZerosLike(FillLikeOp):
    fill_value = 0


@register_op("ones_like")
class OnesLike(FillLikeOp):
    fill_value = 1


# ---------------------------------------------------------------------------
# clamps
# ---------------------------------------------------------------------------
@register_op("clip")
class Clip(UnaryOp):
    """``a_max`` where ``x > a_max``, else ``a_min`` where ``x < a_min``, else ``x``."""

    attrs = {
        "a_min": Attr(to_float, REQUIRED, "lower bound"),
        "a_max": Attr(to_float, REQUIRED, "upper bound"),
    }

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        # MXNet stores the bounds as float32 and converts them to DType
        lo = to_dtype_trunc(np.float32(p.a_min), x.dtype)
        hi = to_dtype_trunc(np.float32(p.a_max), x.dtype)
        y = np.where(x > hi, hi, np.where(x < lo, lo, x))
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


@register_op("hard_sigmoid")
class HardSigmoid(UnaryOp):
    """``max(0, min(1, alpha * x + beta))``; float16 rounds after each arithmetic step."""

    attrs = {
        "alpha": Attr(to_float, 0.2, "slope"),
        "beta": Attr(to_float, 0.5, "intercept"),
    }

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        work = math_dtype(x.dtype)
        alpha, beta = np.float32(p.alpha), np.float32(p.beta)   # real_t parameters
        with np.errstate(all="ignore"):
            y = work.type(alpha) * x.astype(work)
            if x.dtype == np.float16:   # half arithmetic rounds after the multiply too
                y = y.astype(np.float16).astype(work)
            y = to_dtype_trunc(y + work.type(beta), x.dtype)
        one, zero = x.dtype.type(1), x.dtype.type(0)
        y = np.where(one < y, one, y)
        y = np.where(zero > y, zero, y)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


# ---------------------------------------------------------------------------
# smooth_l1
# ---------------------------------------------------------------------------
def _smooth_l1(x: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    dt = x.dtype
    work = math_dtype(dt)
    s = sigma.astype(work)
    with np.errstate(all="ignore"):
        s2 = s * s
        inv = work.type(1) / s2
        xf = x.astype(work)
        half = work.type(0.5)
        y = np.where(xf > inv, xf - half * inv,
                     np.where(xf < -inv, -xf - half * inv, half * xf * xf * s2))
    return to_dtype_trunc(y, dt)


@register_op("smooth_l1")
class SmoothL1(ScalarOp):
    """Smooth L1 loss of ``data`` with ``sigma = scalar``; same dtype as the input."""

    attrs = SCALAR_ATTRS

    def infer_type(self, p, in_types, out_types):
        return OpDef.infer_type(self, p, in_types, out_types)

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0])
        out = _smooth_l1(x, scalar_as(p.scalar, x.dtype))
        return [cast_to(out, ctx.out_dtypes[0] or x.dtype)]
