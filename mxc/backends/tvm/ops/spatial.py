"""Spatial resampling (``mxc/compiler/ops/spatial.py``): nearest UpSampling and
``_contrib_BilinearResize2D`` (MXNet's source-index rule, precomputed as
constant gather indices and weights).  Bilinear UpSampling and the
grid samplers stay on the host."""

from __future__ import annotations

import numpy as np

from ....compiler.ops.spatial import affine_grid_destination, resize_axis_weights
from ..converter import Lowering, register_converter, register_host_only
from ._common import R, compute_dtype


def _upsampling_supported(node, io):
    if node.params.sample_type != "nearest":
        return "UpSampling sample_type='bilinear' (a learned depthwise deconvolution) " \
               "is not lowered"
    return True


@register_converter("UpSampling", supports=_upsampling_supported)
def upsampling(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    oh, ow = ctx.in_shapes[0][2] * p.scale, ctx.in_shapes[0][3] * p.scale
    parts = []
    for x, shape in zip(ctx.inputs, ctx.in_shapes):
        x = ctx.astype(x, dt)
        sh, sw = oh // shape[2], ow // shape[3]
        if sh > 1:
            x = ctx.emit(R.repeat(x, sh, axis=2))
        if sw > 1:
            x = ctx.emit(R.repeat(x, sw, axis=3))
        parts.append(x)
    if len(parts) == 1:
        y = parts[0]
    elif p.multi_input_mode == "sum":
        y = parts[0]
        for part in parts[1:]:
            y = ctx.emit(R.add(y, part))
    else:
        y = ctx.emit(R.concat(parts, axis=1))
    return ctx.astype(y, ctx.out_dtype)


def _low_high_weight(in_size: int, out_size: int, align_corners: bool):
    """Per output index: low source index, high source index and the weight of high
    (the op's own rule, :func:`~mxc.compiler.ops.spatial.resize_axis_weights`)."""
    low, step, lam1 = resize_axis_weights(in_size, out_size, align_corners)
    return low, low + step, lam1


@register_converter("_contrib_BilinearResize2D")
def bilinear_resize2d(ctx: Lowering):
    x0 = ctx.inputs[0]
    _, _, h, w = ctx.in_shapes[0]
    oh, ow = ctx.out_shape[2], ctx.out_shape[3]
    if (oh, ow) == (h, w):
        return x0
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(x0, dt)
    hl, hh, hw1 = _low_high_weight(h, oh, ctx.p.align_corners)
    wl, wh, ww1 = _low_high_weight(w, ow, ctx.p.align_corners)

    def take(v, idx, axis):
        return ctx.emit(R.take(v, ctx.const(idx), axis=axis))

    def weight(lam, shape):
        return ctx.const(lam.astype(dt).reshape(shape))

    r0, r1 = take(x, hl, 2), take(x, hh, 2)
    wsh = (1, 1, 1, ow)
    wl0, wl1 = weight(1 - ww1, wsh), weight(ww1, wsh)
    top = ctx.emit(R.add(R.multiply(take(r0, wl, 3), wl0), R.multiply(take(r0, wh, 3), wl1)))
    bot = ctx.emit(R.add(R.multiply(take(r1, wl, 3), wl0), R.multiply(take(r1, wh, 3), wl1)))
    hsh = (1, 1, oh, 1)
    y = ctx.emit(R.add(R.multiply(weight(1 - hw1, hsh), top), R.multiply(weight(hw1, hsh), bot)))
    return ctx.astype(y, ctx.out_dtype)


@register_converter("GridGenerator")
def grid_generator(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    if p.transform_type == "affine":
        h, w = p.target_shape
        dst = affine_grid_destination(h, w, dt)
        n = ctx.in_shapes[0][0]
        y = ctx.emit(R.matmul(ctx.reshape(x, (n * 2, 3)), ctx.const(dst)))
        out = ctx.reshape(y, (n, 2, h, w))
    else:
        n, _, h, w = ctx.in_shapes[0]
        gx = np.broadcast_to(np.arange(w, dtype=dt), (h, w))
        gy = np.broadcast_to(np.arange(h, dtype=dt)[:, None], (h, w))
        dst = np.stack([gx, gy])
        half = np.array([(np.dtype(dt).type(w) - 1.0) / 2.0, (np.dtype(dt).type(h) - 1.0) / 2.0],
                        dtype=dt).reshape(1, 2, 1, 1)
        out = ctx.emit(R.subtract(R.divide(R.add(x, ctx.const(dst[None])), ctx.const(half)),
                                  ctx.const(np.ones((), dt))))
    outs = [ctx.astype(out, ctx.out_dtypes[0])]
    if len(ctx.out_shapes) > 1:   # the hidden destination grid
        outs.append(ctx.const(dst.astype(ctx.out_dtypes[1]).reshape(ctx.out_shapes[1])))
    return outs


register_host_only(
    "BilinearSampler", "SpatialTransformer",
    reason="data-dependent bilinear gathers (grid sampling with zero padding) are not "
           "lowered yet; they run on the host")
