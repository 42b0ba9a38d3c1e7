"""Box arithmetic of the detection family (``mxc/compiler/ops/detection.py``):
``box_iou``, ``box_encode`` and ``box_decode``.  The data-dependent control
flow of NMS stays on the host (so do MultiBoxDetection and Proposal, in
``detection_multibox.py`` and ``detection_proposal.py``)."""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, compute_dtype, const


def _col(ctx: Lowering, b, k: int):
    """Coordinate *k* of boxes ``b[..., 4]`` (keeping a trailing axis of 1)."""
    nd = len(ctx.shape_of(b))
    return ctx.emit(R.strided_slice(b, axes=[nd - 1], begin=[k], end=[k + 1]))


def _area(ctx: Lowering, c, center: bool, dt: str):
    if center:
        wd, ht = c[2], c[3]
    else:
        wd, ht = ctx.emit(R.subtract(c[2], c[0])), ctx.emit(R.subtract(c[3], c[1]))
    zero = const(0, dt)
    neg = R.logical_or(R.less(wd, zero), R.less(ht, zero))
    return ctx.emit(R.where(neg, zero, R.multiply(wd, ht)))


def _overlap(ctx: Lowering, a_lo, a_hi, b_lo, b_hi, center: bool, dt: str):
    if center:
        half = const(2, dt)
        aw, bw = R.divide(a_hi, half), R.divide(b_hi, half)
        a_lo, a_hi = ctx.emit(R.subtract(a_lo, aw)), ctx.emit(R.add(a_lo, aw))
        b_lo, b_hi = ctx.emit(R.subtract(b_lo, bw)), ctx.emit(R.add(b_lo, bw))
    w = ctx.emit(R.subtract(R.minimum(a_hi, b_hi), R.maximum(a_lo, b_lo)))
    return ctx.emit(R.where(R.greater(w, const(0, dt)), w, const(0, dt)))


@register_converter("_contrib_box_iou")
def box_iou(ctx: Lowering):
    center = ctx.p.format == "center"
    dt = compute_dtype(ctx.in_dtypes[0])
    sl, sr = ctx.in_shapes
    nl, nr = int(np.prod(sl[:-1])), int(np.prod(sr[:-1]))
    lhs = ctx.reshape(ctx.astype(ctx.inputs[0], dt), (nl, 1, 4))
    rhs = ctx.reshape(ctx.astype(ctx.inputs[1], dt), (1, nr, 4))
    a = [_col(ctx, lhs, k) for k in range(4)]
    b = [_col(ctx, rhs, k) for k in range(4)]
    inter = ctx.emit(R.multiply(_overlap(ctx, a[0], a[2], b[0], b[2], center, dt),
                                _overlap(ctx, a[1], a[3], b[1], b[3], center, dt)))
    union = ctx.emit(R.subtract(R.add(_area(ctx, a, center, dt), _area(ctx, b, center, dt)),
                                inter))
    iou = ctx.emit(R.where(R.less_equal(inter, const(0, dt)), const(0, dt),
                           R.divide(inter, union)))
    return ctx.astype(ctx.reshape(iou, ctx.out_shape), ctx.out_dtype)


def _center_form(ctx: Lowering, c, dt):
    """corner columns -> (x, y, w, h) columns."""
    w = ctx.emit(R.subtract(c[2], c[0]))
    h = ctx.emit(R.subtract(c[3], c[1]))
    half = const(0.5, dt)
    return (ctx.emit(R.add(c[0], R.multiply(w, half))), ctx.emit(R.add(c[1], R.multiply(h, half))),
            w, h)


@register_converter("_contrib_box_decode")
def box_decode(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    n = ctx.in_shapes[0][1]
    x = ctx.astype(ctx.inputs[0], dt)
    flat = ctx.reshape(ctx.astype(ctx.inputs[1], dt), (int(np.prod(ctx.in_shapes[1])),))
    a = ctx.reshape(ctx.emit(R.strided_slice(flat, axes=[0], begin=[0], end=[n * 4])),
                    (1, n, 4))
    ac = [_col(ctx, a, k) for k in range(4)]
    ax, ay, aw, ah = _center_form(ctx, ac, dt) if p.format == "corner" else ac
    xc = [_col(ctx, x, k) for k in range(4)]
    ox = ctx.emit(R.add(R.multiply(R.multiply(xc[0], const(p.std0, dt)), aw), ax))
    oy = ctx.emit(R.add(R.multiply(R.multiply(xc[1], const(p.std1, dt)), ah), ay))
    dw = ctx.emit(R.multiply(xc[2], const(p.std2, dt)))
    dh = ctx.emit(R.multiply(xc[3], const(p.std3, dt)))
    if p.clip > 0:
        dw = ctx.emit(R.minimum(dw, const(p.clip, dt)))
        dh = ctx.emit(R.minimum(dh, const(p.clip, dt)))
    half = const(0.5, dt)
    ow = ctx.emit(R.multiply(R.multiply(R.exp(dw), aw), half))
    oh = ctx.emit(R.multiply(R.multiply(R.exp(dh), ah), half))
    out = ctx.emit(R.concat([R.subtract(ox, ow), R.subtract(oy, oh), R.add(ox, ow),
                             R.add(oy, oh)], axis=2))
    return ctx.astype(out, ctx.out_dtype)


@register_converter("_contrib_box_encode")
def box_encode(ctx: Lowering):
    samples, matches, anchors, refs, means, stds = ctx.inputs
    dt = compute_dtype(ctx.in_dtypes[2])
    b, n = ctx.in_shapes[2][0], ctx.in_shapes[2][1]
    m = ctx.in_shapes[3][1]
    a = ctx.reshape(ctx.astype(anchors, dt), (b, n, 4))
    rf = ctx.reshape(ctx.astype(refs, dt), (b, m, 4))
    match = ctx.reshape(ctx.astype(matches, "int64"), (b, n, 1))
    match = ctx.emit(R.broadcast_to(R.clip(match, 0, m - 1), (b, n, 4)))
    valid = ctx.emit(R.greater(ctx.reshape(ctx.astype(samples, dt), (b, n, 1)),
                               const(0.5, dt)))
    ref = ctx.emit(R.gather_elements(rf, match, axis=1))
    rx, ry, rw, rh = _center_form(ctx, [_col(ctx, ref, k) for k in range(4)], dt)
    ax, ay, aw, ah = _center_form(ctx, [_col(ctx, a, k) for k in range(4)], dt)
    mu = ctx.astype(means, dt)
    sd = ctx.astype(stds, dt)
    raw = ctx.emit(R.concat([R.divide(R.subtract(rx, ax), aw), R.divide(R.subtract(ry, ay), ah),
                             R.log(R.divide(rw, aw)), R.log(R.divide(rh, ah))], axis=2))
    t = ctx.emit(R.divide(R.subtract(raw, ctx.reshape(mu, (1, 1, 4))),
                          ctx.reshape(sd, (1, 1, 4))))
    targets = ctx.emit(R.where(valid, t, const(0, dt)))
    masks = ctx.emit(R.broadcast_to(R.astype(valid, dt), (b, n, 4)))
    return [ctx.astype(ctx.reshape(targets, ctx.out_shapes[0]), ctx.out_dtypes[0]),
            ctx.astype(ctx.reshape(masks, ctx.out_shapes[1]), ctx.out_dtypes[1])]


#: why every op that runs non-maximum suppression stays on the host
NMS_ON_HOST = ("non-maximum suppression is data-dependent sequential control flow (sort, "
               "suppress, compact); it runs on the host")

register_host_only("_contrib_box_nms", reason=NMS_ON_HOST)
