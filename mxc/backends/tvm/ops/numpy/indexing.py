"""DeepNumpy selection ops (``mxc/compiler/ops/numpy/indexing.py``).

``where`` and its scalar forms lower to Relax ``where``; the ops with
data-dependent output shapes stay on the host.
"""

from __future__ import annotations

import numpy as np

from ...converter import Lowering, register_converter, register_host_only
from .._common import R, const
from ._twins import register_twins


def truth(ctx: Lowering, x, dtype: str):
    """``x != 0`` as bool (a bool tensor is its own truth value)."""
    return x if dtype == "bool" else ctx.emit(R.not_equal(x, const(0, dtype)))


@register_converter("_npi_where", "_npi_where_lscalar", "_npi_where_rscalar",
                    "_npi_where_scalar2")
def where(ctx: Lowering):
    dt = ctx.out_dtype
    cond = truth(ctx, ctx.inputs[0], ctx.in_dtypes[0])
    tensors = dict(zip(ctx.node.opdef.tensors, ctx.inputs[1:]))
    values = []
    for name in ("x", "y"):
        if name in tensors:
            values.append(ctx.astype(tensors[name], dt))
        else:
            v = ctx.p.scalar if "scalar" in ctx.p else ctx.p[name]
            values.append(const(np.asarray(v).astype(dt), dt))
    y = ctx.emit(R.where(cond, values[0], values[1]))
    if ctx.shape_of(y) != ctx.out_shape:
        y = ctx.emit(R.broadcast_to(y, ctx.out_shape))
    return y


register_host_only(
    "_npi_delete", "_npx_nonzero", "_npi_unique", "_npi_bincount",
    reason="data-dependent output shape: runs on the host between compiled regions")
register_host_only(
    "_npi_insert_scalar", "_npi_insert_slice", "_npi_insert_tensor", "_npi_diff",
    "_npi_ediff1d", "_npi_diag_indices_from",
    reason="index bookkeeping NumPy functions outside model bodies; NumPy's own kernel on "
           "the host")
register_host_only("_npx_constraint_check",
                   reason="a run-time assertion that must raise on the host")


register_twins(__name__)
