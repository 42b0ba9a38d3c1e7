"""Pooling (``mxc/compiler/ops/nn_pool.py``).

MXNet's window rules are reproduced exactly rather than mapped onto TVM's
``ceil_mode``/``count_include_pad`` flags: the input is padded explicitly
(left by ``pad``, right far enough for the last, possibly overhanging,
window of the ``full`` convention), pooled without padding, and average
pooling divides by MXNet's per-position count (a constant).  Max pooling
pads with -inf; a window lying wholly in the padding yields the dtype's
lowest value, as in MXNet.  ``lp`` pooling is ``(sum x^p)^(1/p)`` without
``abs`` (p=1 a signed sum, p=3 a signed cube root).
"""

from __future__ import annotations

import numpy as np

from ....compiler.ops.nn_pool import pool_axis_counts
from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, extern_unary, te_elementwise

_MAX = {1: R.nn.max_pool1d, 2: R.nn.max_pool2d, 3: R.nn.max_pool3d}
_AVG = {1: R.nn.avg_pool1d, 2: R.nn.avg_pool2d, 3: R.nn.avg_pool3d}
_CHANNELS_FIRST = (None, "NCW", "NCHW", "NCDHW")


def _pool_supported(node, io):
    p = node.params
    if p.layout not in _CHANNELS_FIRST:
        return f"Pooling layout {p.layout} is not lowered (channels-first layouts only)"
    if p.pooling_convention == "same":
        return "Pooling pooling_convention='same' is not lowered"
    if io.in_dtypes[0] not in ("float16", "bfloat16", "float32", "float64"):
        return "Pooling is lowered for float data only"
    return True


def _grid(per_axis):
    """Outer product of per-axis count vectors."""
    out = np.ones((), dtype=np.int64)
    for i, c in enumerate(per_axis):
        out = out[..., None] * c if i else np.asarray(c, dtype=np.int64)
    return out


def _p_root(ctx: Lowering, y, p_value: int, dt: str):
    if p_value == 2:
        return ctx.emit(R.sqrt(y))
    if p_value == 3:
        return te_elementwise(ctx, extern_unary("cbrtf", "cbrt"), y, name="mxc_cbrt")
    return y


@register_converter("Pooling", "Pooling_v1", supports=_pool_supported)
def pooling(ctx: Lowering):
    p = ctx.p
    shape = ctx.in_shapes[0]
    nsp = len(shape) - 2
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    p_value = p.p_value or 1
    out_shape = ctx.out_shapes[0]
    if p.pool_type == "lp" and p_value != 1:
        x = ctx.emit(R.power(x, const(float(p_value), dt)))
    if p.global_pool:
        axes = list(range(2, 2 + nsp))
        fn = {"max": R.max, "avg": R.mean, "sum": R.sum, "lp": R.sum}[p.pool_type]
        y = ctx.emit(fn(x, axis=axes, keepdims=True))
        if p.pool_type == "lp":
            y = _p_root(ctx, y, p_value, dt)
        return [ctx.astype(y, ctx.out_dtype)]

    spatial = shape[2:]
    kernel, stride, pad = ctx.node.opdef.geometry(p, spatial)
    osp = out_shape[2:]
    right = [max(q, (o - 1) * s + k - n - q)
             for n, k, s, q, o in zip(spatial, kernel, stride, pad, osp)]
    widths = [0, 0, 0, 0]
    for q, r in zip(pad, right):
        widths += [q, r]
    zeros = (0,) * nsp
    if p.pool_type == "max":
        if any(widths):
            x = ctx.emit(R.nn.pad(x, widths, pad_mode="constant", pad_value=float("-inf")))
        y = ctx.emit(_MAX[nsp](x, pool_size=kernel, strides=stride, padding=zeros))
    else:
        if any(widths):
            x = ctx.emit(R.nn.pad(x, widths, pad_mode="constant", pad_value=0.0))
        y = ctx.emit(_AVG[nsp](x, pool_size=kernel, strides=stride, padding=zeros))
    if tuple(ctx.shape_of(y)[2:]) != tuple(osp):
        y = ctx.emit(R.strided_slice(y, axes=list(range(2, 2 + nsp)), begin=list(zeros),
                                     end=list(osp)))
    if p.pool_type == "max":
        valid = _grid([pool_axis_counts(n, k, s, q, o, False) > 0
                       for n, k, s, q, o in zip(spatial, kernel, stride, pad, osp)]) > 0
        if not valid.all():
            lowest = float(np.finfo(dt).min)
            y = ctx.emit(R.where(ctx.const(valid.reshape((1, 1) + valid.shape)), y,
                                 const(lowest, dt)))
    elif p.pool_type == "avg":
        include = True if p.count_include_pad is None else p.count_include_pad
        cnt = _grid([pool_axis_counts(n, k, s, q, o, include)
                     for n, k, s, q, o in zip(spatial, kernel, stride, pad, osp)])
        if not (cnt == np.prod(kernel)).all():   # y is sum / K: rescale to sum / count
            k = float(np.prod(kernel))
            factor = np.where(cnt == 0, np.nan, k / np.maximum(cnt, 1)).astype(dt)
            y = ctx.emit(R.multiply(y, ctx.const(factor.reshape((1, 1) + factor.shape))))
    else:   # sum and lp: window sums
        y = ctx.emit(R.multiply(y, const(float(np.prod(kernel)), dt)))
        if p.pool_type == "lp":
            y = _p_root(ctx, y, p_value, dt)
    return [ctx.astype(y, ctx.out_dtype)]


@register_converter("_contrib_AdaptiveAvgPooling2D")
def adaptive_avg_pool2d(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    y = ctx.emit(R.nn.adaptive_avg_pool2d(x, output_size=ctx.out_shape[2:]))
    return ctx.astype(y, ctx.out_dtype)
