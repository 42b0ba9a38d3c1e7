"""Normalisation layers (``mxc/compiler/ops/nn_norm.py``).

BatchNorm in inference is the per-channel affine map ``x * scale + shift``
with ``scale = gamma / sqrt(moving_var + eps)`` (gamma taken as 1 under
``fix_gamma``) and ``shift = beta - moving_mean * scale``: with bound
parameters TVM folds scale/shift to constants and fuses the multiply-add
into the producing convolution.  Hidden statistic outputs are produced only
where MXNet shows them (``output_mean_var``).
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, pos_axis


def _chan_shape(ndim: int, axis: int, size: int) -> list[int]:
    shape = [1] * ndim
    shape[axis] = size
    return shape


@register_converter("BatchNorm", "BatchNorm_v1", "_contrib_SyncBatchNorm")
def batch_norm(ctx: Lowering):
    p = ctx.p
    shape = ctx.in_shapes[0]
    axis = pos_axis(p.axis, len(shape))
    dt = compute_dtype(ctx.in_dtypes[0])
    x, gamma, beta, mean, var = (ctx.astype(v, dt) for v in ctx.inputs)
    inv_std = ctx.emit(R.divide(const(1, dt), R.sqrt(R.add(var, const(p.eps, dt)))))
    scale = inv_std if p.fix_gamma else ctx.emit(R.multiply(gamma, inv_std))
    shift = ctx.emit(R.subtract(beta, R.multiply(mean, scale)))
    bshape = _chan_shape(len(shape), axis, shape[axis])
    y = ctx.emit(R.add(R.multiply(x, ctx.reshape(scale, bshape)), ctx.reshape(shift, bshape)))
    out = ctx.astype(y, ctx.out_dtypes[0])
    if ctx.node.num_visible_outputs() == 1:
        return [out]
    return [out, ctx.astype(mean, ctx.out_dtypes[1]), ctx.astype(inv_std, ctx.out_dtypes[2])]


def _moments(ctx: Lowering, x, axes: list[int]):
    mean = ctx.emit(R.mean(x, axis=axes, keepdims=True))
    centered = ctx.emit(R.subtract(x, mean))
    var = ctx.emit(R.mean(R.multiply(centered, centered), axis=axes, keepdims=True))
    return mean, centered, var


@register_converter("InstanceNorm")
def instance_norm(ctx: Lowering):
    shape = ctx.in_shapes[0]
    dt = compute_dtype(ctx.in_dtypes[0])
    """Statistics in the definition's accumulation dtype, two passes (mean, then the
    mean of the centred squares) as MXNet; the normalisation itself in *dt*.

    (TVM's ``instance_norm`` sums ``x`` and ``x*x`` in one float32 pass: 4x MXNet's
    error on 5,000-element instances.)
    """
    acc = str(ctx.node.opdef.statistics_dtype(ctx.in_dtypes[0]))
    x, gamma, beta = (ctx.astype(v, dt) for v in ctx.inputs)
    axes = list(range(2, len(shape)))
    mean, _, var = _moments(ctx, ctx.astype(x, acc), axes)
    inv_std = ctx.emit(R.divide(const(1, acc), R.sqrt(R.add(var, const(ctx.p.eps, acc)))))
    mean, inv_std = ctx.astype(mean, dt), ctx.astype(inv_std, dt)
    bshape = _chan_shape(len(shape), 1, shape[1])
    y = ctx.emit(R.multiply(R.subtract(x, mean), inv_std))
    y = ctx.emit(R.add(R.multiply(y, ctx.reshape(gamma, bshape)), ctx.reshape(beta, bshape)))
    return [ctx.astype(y, ctx.out_dtypes[0])]


@register_converter("LayerNorm")
def layer_norm(ctx: Lowering):
    p = ctx.p
    shape = ctx.in_shapes[0]
    axis = pos_axis(p.axis, len(shape))
    dt = compute_dtype(ctx.in_dtypes[0])
    x, gamma, beta = (ctx.astype(v, dt) for v in ctx.inputs)
    if ctx.node.num_visible_outputs() == 1:
        y = ctx.emit(R.nn.layer_norm(x, gamma, beta, axes=[axis], epsilon=p.eps))
        return [ctx.astype(y, ctx.out_dtypes[0])]
    mean, centered, var = _moments(ctx, x, [axis])
    std = ctx.emit(R.sqrt(R.add(var, const(p.eps, dt))))
    bshape = _chan_shape(len(shape), axis, shape[axis])
    y = ctx.emit(R.add(R.multiply(R.divide(centered, std), ctx.reshape(gamma, bshape)),
                       ctx.reshape(beta, bshape)))
    return [ctx.astype(y, ctx.out_dtypes[0]),
            ctx.astype(ctx.reshape(mean, ctx.out_shapes[1]), ctx.out_dtypes[1]),
            ctx.astype(ctx.reshape(std, ctx.out_shapes[2]), ctx.out_dtypes[2])]


@register_converter("GroupNorm")
def group_norm(ctx: Lowering):
    """Per-group statistics; MXNet 1.9.1's gamma/beta are per GROUP, not per channel."""
    p = ctx.p
    shape = ctx.in_shapes[0]
    n, g = shape[0], p.num_groups
    dt = compute_dtype(ctx.in_dtypes[0])
    x, gamma, beta = (ctx.astype(v, dt) for v in ctx.inputs)
    xr = ctx.reshape(x, (n, g, int(np.prod(shape)) // (n * g)))
    mean, centered, var = _moments(ctx, xr, [2])
    std = ctx.emit(R.sqrt(R.add(var, const(p.eps, dt))))
    y = ctx.emit(R.add(R.multiply(R.divide(centered, std), ctx.reshape(gamma, (1, g, 1))),
                       ctx.reshape(beta, (1, g, 1))))
    out = ctx.astype(ctx.reshape(y, shape), ctx.out_dtypes[0])
    if ctx.node.num_visible_outputs() == 1:
        return [out]
    return [out, ctx.astype(ctx.reshape(mean, ctx.out_shapes[1]), ctx.out_dtypes[1]),
            ctx.astype(ctx.reshape(std, ctx.out_shapes[2]), ctx.out_dtypes[2])]


@register_converter("L2Normalization")
def l2_normalization(ctx: Lowering):
    p = ctx.p
    ndim = len(ctx.in_shapes[0])
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    if p.mode == "instance":
        axes = list(range(1, ndim))
    elif p.mode == "channel":
        axes = [1]
    else:
        axes = list(range(2, ndim))
    ss = ctx.emit(R.sum(R.multiply(x, x), axis=axes, keepdims=True))
    norm = ctx.emit(R.sqrt(R.add(ss, const(p.eps, dt))))
    y = ctx.emit(R.divide(x, norm))
    return [ctx.astype(y, ctx.out_dtypes[0])]


@register_converter("LRN")
def lrn(ctx: Lowering):
    """x * (knorm + alpha/nsize * window_sum(x^2))^-beta, window [c-(n-1)/2, c+n/2]."""
    p = ctx.p
    shape = ctx.in_shapes[0]
    c = shape[1]
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    sq = ctx.emit(R.multiply(x, x))
    lo = (p.nsize - 1) // 2
    hi = p.nsize - 1 - lo
    widths = [0, 0, lo, hi] + [0, 0] * (len(shape) - 2)
    sqp = ctx.emit(R.nn.pad(sq, widths, pad_mode="constant", pad_value=0.0))
    win = None
    for k in range(p.nsize):
        part = ctx.emit(R.strided_slice(sqp, axes=[1], begin=[k], end=[k + c]))
        win = part if win is None else ctx.emit(R.add(win, part))
    norm = ctx.emit(R.add(const(p.knorm, dt), R.multiply(const(p.alpha / p.nsize, dt), win)))
    y = ctx.emit(R.multiply(x, R.power(norm, const(-p.beta, dt))))
    return [ctx.astype(y, ctx.out_dtypes[0])]


@register_converter("_contrib_BatchNormWithReLU")
def batch_norm_relu(ctx: Lowering):
    """BatchNorm's affine map, then relu on the data output (statistics unchanged)."""
    outs = batch_norm(ctx)
    return [ctx.emit(R.nn.relu(outs[0])), *outs[1:]]
