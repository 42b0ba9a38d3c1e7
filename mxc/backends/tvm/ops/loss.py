"""Losses and gradient-only ops (``mxc/compiler/ops/loss.py``).

Identity forwards lower to a copy, the straight-through estimators to
elementwise round/sign, ``softmax_cross_entropy`` to log-softmax, a one-hot
pick and a sum.  ``CTCLoss`` stays on the host: its alignment recursion runs
over time with label-dependent state.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, compute_dtype, const

register_host_only("CTCLoss", reason="the CTC forward recursion over time and label-dependent "
                                     "paths runs on the host")


@register_converter("SVMOutput", "MakeLoss", "IdentityAttachKLSparseReg",
                    "_contrib_gradientmultiplier")
def identity(ctx: Lowering):
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)


@register_converter("_contrib_round_ste")
def round_ste(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    y = R.multiply(R.sign(x), R.floor(R.add(R.abs(x), const(0.5, dt))))
    return ctx.astype(ctx.emit(y), ctx.out_dtype)


@register_converter("_contrib_sign_ste")
def sign_ste(ctx: Lowering):
    return ctx.emit(R.sign(ctx.inputs[0]))


@register_converter("softmax_cross_entropy")
def softmax_cross_entropy(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    classes = ctx.in_shapes[0][1]
    logp = ctx.emit(R.nn.log_softmax(ctx.astype(ctx.inputs[0], dt), axis=1))
    label = ctx.reshape(ctx.astype(ctx.inputs[1], "int64"), (ctx.in_shapes[1][0], 1))
    hot = ctx.astype(ctx.emit(R.equal(label, ctx.const(np.arange(classes, dtype=np.int64)))), dt)
    picked = ctx.emit(R.multiply(logp, hot))
    total = ctx.emit(R.negative(R.sum(picked, axis=None, keepdims=False)))
    return ctx.astype(ctx.reshape(total, (1,)), ctx.out_dtype)
