"""Small contrib ops (``mxc/compiler/ops/contrib_misc.py``).

``_contrib_index_array`` depends on the shape only and becomes a constant
computed by its reference kernel; ``_contrib_quadratic`` is elementwise;
``_contrib_allclose`` a comparison reduced with ``min``.  ``_contrib_hawkesll``
stays on the host (a sequential recursion over each event sequence).
"""

from __future__ import annotations

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, compute_dtype, const, reference_constant

register_host_only("_contrib_hawkesll", reason="a sequential recursion over each sample's "
                                               "events; host")


@register_converter("_contrib_index_array")
def index_array(ctx: Lowering):
    return reference_constant(ctx)


@register_converter("_contrib_quadratic")
def quadratic(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    y = R.add(R.multiply(R.add(R.multiply(const(p.a, dt), x), const(p.b, dt)), x),
              const(p.c, dt))
    return ctx.astype(ctx.emit(y), ctx.out_dtype)


@register_converter("_contrib_allclose")
def allclose(ctx: Lowering):
    p = ctx.p
    a = ctx.astype(ctx.inputs[0], "float64")
    b = ctx.astype(ctx.inputs[1], "float64")
    bound = R.add(const(p.atol, "float64"), R.multiply(const(p.rtol, "float64"), R.abs(b)))
    close = R.less_equal(R.abs(R.subtract(a, b)), bound)
    both_nan = R.logical_and(R.isnan(a), R.isnan(b))
    if p.equal_nan:
        close = R.logical_or(close, both_nan)
    close = R.logical_or(close, R.equal(a, b))   # equal infinities are close
    flags = ctx.astype(ctx.emit(close), "int32")
    return ctx.astype(ctx.emit(R.min(flags, axis=None)), "uint8")
