"""Loss heads in inference (``mxc/compiler/ops/loss_output.py``): the label is ignored.

SoftmaxOutput normalises over axis 1 (``multi_output``), the last axis
(``preserve_shape`` and, in MXNet's oneDNN build, float32 1-/2-/4-D data) or
the flattened trailing axes; the op definition's ``axis_mode`` decides.
Regression outputs are the identity (Linear, MAE) or a sigmoid (Logistic).
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const


@register_converter("SoftmaxOutput")
def softmax_output(ctx: Lowering):
    shape = ctx.in_shapes[0]
    probe = np.empty((0,) * len(shape), dtype=ctx.in_dtypes[0])   # only ndim/dtype matter
    mode = ctx.node.opdef.axis_mode(ctx.p, probe)
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    if mode == "channel":
        y = ctx.emit(R.nn.softmax(x, axis=1))
    elif mode == "last":
        y = ctx.emit(R.nn.softmax(x, axis=len(shape) - 1))
    else:
        flat = ctx.reshape(x, (shape[0], int(np.prod(shape[1:]))))
        y = ctx.reshape(ctx.emit(R.nn.softmax(flat, axis=1)), shape)
    return ctx.astype(y, ctx.out_dtype)


@register_converter("LinearRegressionOutput", "MAERegressionOutput")
def regression_identity(ctx: Lowering):
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)


@register_converter("LogisticRegressionOutput")
def logistic_regression(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    y = ctx.emit(R.divide(const(1, dt), R.add(const(1, dt), R.exp(R.negative(x)))))
    return ctx.astype(y, ctx.out_dtype)
