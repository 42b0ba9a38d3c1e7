"""Statistics (``mxc/compiler/ops/statistics.py``): ``moments`` lowers to a mean
and a mean of squared deviations; ``_histogram`` stays on the host (data-dependent
binning with a scatter of counts)."""

from __future__ import annotations

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, compute_dtype

register_host_only("_histogram", reason="counting samples into bins is a data-dependent "
                                        "scatter; host")


@register_converter("moments")
def moments(ctx: Lowering):
    shape = ctx.in_shapes[0]
    axes = [a % len(shape) for a in ctx.p.axes]
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    mean = ctx.emit(R.mean(x, axis=axes, keepdims=True))
    dev = ctx.emit(R.subtract(x, mean))
    var = ctx.emit(R.mean(R.multiply(dev, dev), axis=axes, keepdims=True))
    return [ctx.astype(ctx.reshape(mean, ctx.out_shapes[0]), ctx.out_dtypes[0]),
            ctx.astype(ctx.reshape(var, ctx.out_shapes[1]), ctx.out_dtypes[1])]
