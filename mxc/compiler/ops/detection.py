"""Object-detection operators: box_nms, box_iou, box_encode/decode,
MultiBoxPrior, MultiBoxDetection and Proposal.

Boxes are ``corner`` ``[xmin, ymin, xmax, ymax]`` or ``center``
``[x, y, width, height]``.  Kernels compute in float32 like MXNet's CPU code
(comparisons against thresholds depend on it) and loop over boxes in Python.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeInvalidError
from .common import cast_to, compute_dtype, fmt_shape, merge_all
from .registry import (Attr, OpDef, enum, register_op, shape_error, to_bool, to_float,
                       to_float_tuple, to_int)

_F = np.float32


def _attr_error(p, op, key, msg):
    return AttributeInvalidError(f"operator {op} (node {p.node_name!r}): attribute "
                                 f"{key}={p[key]!r} {msg}")


def _merge_out(p, inferred, known):
    if inferred is None:
        return known
    return merge_all(p, [inferred, known], "output")


# ---------------------------------------------------------------------------
# box geometry (float32 scalars / arrays, MXNet's formulas)
# ---------------------------------------------------------------------------
def _box_area(b, center):
    """Area of boxes ``b[..., 4]``; 0 when a side is negative."""
    if center:
        wd, ht = b[..., 2], b[..., 3]
    else:
        wd, ht = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    return np.where((wd < 0) | (ht < 0), _F(0), wd * ht).astype(b.dtype)


def _intersect_1d(a_lo, a_hi, b_lo, b_hi, center):
    """Overlap along one axis; ``lo``/``hi`` are (xmin, xmax) or (x, width)."""
    if center:
        aw, bw = a_hi / 2, b_hi / 2
        a_lo, a_hi = a_lo - aw, a_lo + aw
        b_lo, b_hi = b_lo - bw, b_lo + bw
    w = np.minimum(a_hi, b_hi) - np.maximum(a_lo, b_lo)
    return np.where(w > 0, w, 0).astype(np.result_type(w))


def _intersection(a, b, center):
    return (_intersect_1d(a[..., 0], a[..., 2], b[..., 0], b[..., 2], center)
            * _intersect_1d(a[..., 1], a[..., 3], b[..., 1], b[..., 3], center))


# ---------------------------------------------------------------------------
# _contrib_box_nms
# ---------------------------------------------------------------------------
@register_op("_contrib_box_nms", aliases=("_contrib_box_non_maximum_suppression",))
class BoxNMS(OpDef):
    """Non-maximum suppression over ``(..., num_box, width)`` records.

    Per batch: boxes with score > ``valid_thresh`` (and, with ``id_index``,
    class != ``background_id``) are stably sorted by descending score; the
    first ``topk`` take part in greedy NMS (IoU > ``overlap_thresh``
    suppresses, only within a class unless ``force_suppress``).  Survivors
    are written in score order, every other row is -1.  The hidden second
    output records each output row's flat input index (-1 for empty rows).
    """

    attrs = {
        "overlap_thresh": Attr(to_float, 0.5),
        "valid_thresh": Attr(to_float, 0.0),
        "topk": Attr(to_int, -1),
        "coord_start": Attr(to_int, 2),
        "score_index": Attr(to_int, 1),
        "id_index": Attr(to_int, -1),
        "background_id": Attr(to_int, -1),
        "force_suppress": Attr(to_bool, False),
        "in_format": Attr(enum("corner", "center"), "corner"),
        "out_format": Attr(enum("corner", "center"), "corner"),
    }

    def validate(self, p):
        op = "_contrib_box_nms"
        cs, si = p.coord_start, p.score_index
        if cs < 0:
            raise _attr_error(p, op, "coord_start", "must be >= 0")
        if si < 0 or cs <= si <= cs + 3:
            raise _attr_error(p, op, "score_index", f"must be >= 0 and outside the "
                                                    f"coordinates [{cs}, {cs + 3}]")
        if p.id_index >= 0 and (cs <= p.id_index <= cs + 3 or p.id_index == si):
            raise _attr_error(p, op, "id_index", "conflicts with the coordinates or "
                                                 "score_index")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]], "input and output")
        if s is None:
            return list(in_shapes), list(out_shapes)
        if len(s) < 2:
            raise shape_error(p, f"input must have at least 2 dimensions (..., num_box, "
                                 f"width), got {fmt_shape(s)}")
        width = s[-1]
        if width is not None:
            need = max(5 + (p.id_index >= 0), p.coord_start + 4, p.score_index + 1,
                       p.id_index + 1)
            if width < need:
                raise shape_error(p, f"the last dimension ({width}) is too small for "
                                     f"coord_start={p.coord_start}, score_index="
                                     f"{p.score_index}, id_index={p.id_index}")
        rec = tuple(s[:-1]) + (1,)
        return [s], [s, merge_all(p, [rec, out_shapes[1]], "output 1")]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        shape = x0.shape
        nb = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        ne, width = shape[-2], shape[-1]
        dt = compute_dtype(x0.dtype)
        x = x0.astype(dt, copy=False).reshape(nb, ne, width)
        topk = ne if p.topk < 0 else min(ne, p.topk)
        if topk < 1:
            rec = np.arange(nb * ne, dtype=dt).reshape(shape[:-1] + (1,))
            return [x0.copy(), cast_to(rec, x0.dtype)]
        center = p.in_format == "center"
        cs, si, ii = p.coord_start, p.score_index, p.id_index
        thresh = dt.type(p.overlap_thresh)
        out = np.full((nb, ne, width), -1, dtype=dt)
        rec = np.full((nb, ne), -1, dtype=dt)
        for b in range(nb):
            scores = x[b, :, si]
            valid = scores > dt.type(p.valid_thresh)
            if ii >= 0:
                valid &= x[b, :, ii] != dt.type(p.background_id)
            idx = np.nonzero(valid)[0]
            order = idx[np.argsort(-scores[idx], kind="stable")][:topk]
            boxes = x[b, order, cs:cs + 4]
            areas = _box_area(boxes, center)
            ids = x[b, order, ii].astype(np.int64) if ii >= 0 else None
            alive = np.ones(len(order), dtype=bool)
            for r in range(len(order)):
                if not alive[r]:
                    continue
                rest = np.arange(r + 1, len(order))
                rest = rest[alive[rest]]
                if not p.force_suppress and ids is not None:
                    rest = rest[ids[rest] == ids[r]]
                if rest.size == 0:
                    continue
                inter = _intersection(boxes[r], boxes[rest], center)
                with np.errstate(invalid="ignore", divide="ignore"):
                    iou = inter / (areas[r] + areas[rest] - inter)
                alive[rest[iou > thresh]] = False
            kept = order[alive]
            out[b, :len(kept)] = x[b, kept]
            rec[b, :len(kept)] = b * ne + kept
        if p.in_format != p.out_format:
            c = out[..., cs:cs + 4]
            conv = c[..., 0] >= 0          # MXNet skips rows whose first coordinate is < 0
            a0, a1, a2, a3 = (c[..., k].copy() for k in range(4))
            if p.out_format == "center":
                new = [(a0 + a2) / 2, (a1 + a3) / 2, a2 - a0, a3 - a1]
            else:
                new = [a0 - a2 / 2, a1 - a3 / 2, a0 + a2 / 2, a1 + a3 / 2]
            for k in range(4):
                c[..., k] = np.where(conv, new[k], c[..., k])
        return [cast_to(out.reshape(shape), x0.dtype),
                cast_to(rec.reshape(shape[:-1] + (1,)), x0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_box_iou
# ---------------------------------------------------------------------------
@register_op("_contrib_box_iou")
class BoxIoU(OpDef):
    """Pairwise IoU: ``(a..., 4)`` x ``(b..., 4)`` -> ``(a..., b...)``."""

    attrs = {"format": Attr(enum("corner", "center"), "corner")}
    arguments = ("lhs", "rhs")

    def infer_shape(self, p, in_shapes, out_shapes):
        l, r = in_shapes
        for name, s in (("lhs", l), ("rhs", r)):
            if s is not None and (len(s) < 2 or (s[-1] is not None and s[-1] != 4)):
                raise shape_error(p, f"{name} must be (..., 4), got {fmt_shape(s)}")
        if l is None or r is None:
            return list(in_shapes), list(out_shapes)
        out = tuple(l[:-1]) + tuple(r[:-1])
        return list(in_shapes), [_merge_out(p, out, out_shapes[0])]

    def forward(self, p, inputs, ctx):
        l0, r0 = inputs
        dt = compute_dtype(l0.dtype)
        center = p.format == "center"
        l = l0.astype(dt, copy=False).reshape(-1, 1, 4)
        r = r0.astype(dt, copy=False).reshape(1, -1, 4)
        inter = _intersection(l, r, center)
        union = _box_area(l, center) + _box_area(r, center) - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = np.where(inter <= 0, dt.type(0), inter / union)
        return [cast_to(iou.reshape(l0.shape[:-1] + r0.shape[:-1]), l0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_box_encode / _contrib_box_decode
# ---------------------------------------------------------------------------
@register_op("_contrib_box_encode")
class BoxEncode(OpDef):
    """Regression targets of matched corner boxes against corner anchors.

    Outputs ``targets`` (``(dx, dy, log dw, log dh)`` normalised by
    ``means``/``stds``) and ``masks``; both are 0 where ``samples <= 0.5``.
    """

    attrs: dict = {}
    arguments = ("samples", "matches", "anchors", "refs", "means", "stds")

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        s, m, a, r = ins[:4]
        if s is not None and len(s) != 2:
            raise shape_error(p, f"samples must be 2-D (B, N), got {fmt_shape(s)}")
        if m is not None and len(m) < 2:
            raise shape_error(p, f"matches must be at least 2-D, got {fmt_shape(m)}")
        for name, v in (("anchors", a), ("refs", r)):
            if v is not None and (len(v) < 3 or (v[-1] is not None and v[-1] != 4)):
                raise shape_error(p, f"{name} must be (B, n, 4), got {fmt_shape(v)}")
        ins[4] = merge_all(p, [(4,), ins[4]], "means")
        ins[5] = merge_all(p, [(4,), ins[5]], "stds")
        if a is None:
            return ins, list(out_shapes)
        return ins, [_merge_out(p, tuple(a), o) for o in out_shapes]

    def forward(self, p, inputs, ctx):
        samples, matches, anchors, refs, means, stds = inputs
        dt = compute_dtype(anchors.dtype)
        b, n = anchors.shape[0], anchors.shape[1]
        m = refs.shape[1]
        a = anchors.astype(dt, copy=False).reshape(b, n, 4)
        rf = refs.astype(dt, copy=False).reshape(b, m, 4)
        match = matches.reshape(b, n).astype(np.int64)
        valid = samples.reshape(b, n).astype(dt) > dt.type(0.5)
        ref = np.take_along_axis(rf, np.clip(match, 0, m - 1)[..., None], axis=1)
        ref_w = ref[..., 2] - ref[..., 0]
        ref_h = ref[..., 3] - ref[..., 1]
        ref_x = ref[..., 0] + ref_w * dt.type(0.5)
        ref_y = ref[..., 1] + ref_h * dt.type(0.5)
        a_w = a[..., 2] - a[..., 0]
        a_h = a[..., 3] - a[..., 1]
        a_x = a[..., 0] + a_w * dt.type(0.5)
        a_y = a[..., 1] + a_h * dt.type(0.5)
        mu = means.astype(dt, copy=False).reshape(4)
        sd = stds.astype(dt, copy=False).reshape(4)
        with np.errstate(all="ignore"):
            t = np.stack([((ref_x - a_x) / a_w - mu[0]) / sd[0],
                          ((ref_y - a_y) / a_h - mu[1]) / sd[1],
                          (np.log(ref_w / a_w) - mu[2]) / sd[2],
                          (np.log(ref_h / a_h) - mu[3]) / sd[3]], axis=-1)
        targets = np.where(valid[..., None], t, dt.type(0))
        masks = np.broadcast_to(valid[..., None], (b, n, 4)).astype(dt)
        return [cast_to(targets.reshape(anchors.shape), anchors.dtype),
                cast_to(masks.reshape(anchors.shape), anchors.dtype)]


@register_op("_contrib_box_decode")
class BoxDecode(OpDef):
    """Decode ``(B, N, 4)`` regression outputs against anchors (only the first
    ``N`` anchors are read); result is corner format.  ``clip > 0`` caps the
    log-size deltas before ``exp``."""

    attrs = {
        "std0": Attr(to_float, 1.0),
        "std1": Attr(to_float, 1.0),
        "std2": Attr(to_float, 1.0),
        "std3": Attr(to_float, 1.0),
        "clip": Attr(to_float, -1.0),
        "format": Attr(enum("corner", "center"), "center"),
    }
    arguments = ("data", "anchors")

    def infer_shape(self, p, in_shapes, out_shapes):
        d, a = in_shapes
        if d is not None and (len(d) != 3 or (d[-1] is not None and d[-1] != 4)):
            raise shape_error(p, f"data must be (B, N, 4), got {fmt_shape(d)}")
        if a is not None and (len(a) < 3 or (a[-1] is not None and a[-1] != 4)):
            raise shape_error(p, f"anchors must be (1, N, 4), got {fmt_shape(a)}")
        s = merge_all(p, [d, out_shapes[0]], "data and output")
        return [s, a], [s]

    def forward(self, p, inputs, ctx):
        x0, anchors = inputs
        dt = compute_dtype(x0.dtype)
        b, n = x0.shape[0], x0.shape[1]
        x = x0.astype(dt, copy=False)
        a = anchors.astype(dt, copy=False).reshape(-1)[:n * 4].reshape(1, n, 4)
        ax, ay, aw, ah = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
        if p.format == "corner":
            aw = aw - ax
            ah = ah - ay
            ax = ax + aw * dt.type(0.5)
            ay = ay + ah * dt.type(0.5)
        ox = x[..., 0] * dt.type(p.std0) * aw + ax
        oy = x[..., 1] * dt.type(p.std1) * ah + ay
        dw = x[..., 2] * dt.type(p.std2)
        dh = x[..., 3] * dt.type(p.std3)
        if p.clip > 0:
            dw = np.minimum(dw, dt.type(p.clip))
            dh = np.minimum(dh, dt.type(p.clip))
        ow = np.exp(dw) * aw * dt.type(0.5)
        oh = np.exp(dh) * ah * dt.type(0.5)
        out = np.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=-1)
        return [cast_to(out, x0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_MultiBoxPrior
# ---------------------------------------------------------------------------
@register_op("_contrib_MultiBoxPrior")
class MultiBoxPrior(OpDef):
    """SSD prior (anchor) boxes for every feature-map cell.

    Per cell: one box per size at ratio 1, then one per extra ratio at
    ``sizes[0]``; output ``(1, H*W*(len(sizes)+len(ratios)-1), 4)`` corners
    normalised to [0, 1] (clipped when ``clip``).  ``steps`` (y, x) <= 0 means
    ``1/H``, ``1/W``.
    """

    attrs = {
        "sizes": Attr(to_float_tuple, (1.0,)),
        "ratios": Attr(to_float_tuple, (1.0,)),
        "clip": Attr(to_bool, False),
        "steps": Attr(to_float_tuple, (-1.0, -1.0)),
        "offsets": Attr(to_float_tuple, (0.5, 0.5)),
    }

    def validate(self, p):
        op = "_contrib_MultiBoxPrior"
        if not p.sizes:
            raise _attr_error(p, op, "sizes", "must not be empty")
        if not p.ratios:
            raise _attr_error(p, op, "ratios", "must not be empty")
        if len(p.steps) != 2:
            raise _attr_error(p, op, "steps", "must have 2 entries (step_y, step_x)")
        if len(p.offsets) != 2 or not all(0.0 <= o <= 1.0 for o in p.offsets):
            raise _attr_error(p, op, "offsets", "must be 2 values in [0, 1]")
        if p.steps[0] * p.steps[1] < 0:
            raise _attr_error(p, op, "steps", "must give both step_y and step_x")

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        if d is None:
            return list(in_shapes), list(out_shapes)
        if len(d) < 4:
            raise shape_error(p, f"data must be 4-D (batch, channel, y, x), got {fmt_shape(d)}")
        h, w = d[2], d[3]
        n = None if h is None or w is None else h * w * (len(p.sizes) + len(p.ratios) - 1)
        return list(in_shapes), [_merge_out(p, (1, n, 4), out_shapes[0])]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        h, w = x0.shape[2], x0.shape[3]
        step_y, step_x = (_F(s) for s in p.steps)
        if step_y <= 0 or step_x <= 0:
            step_y, step_x = _F(1) / _F(h), _F(1) / _F(w)
        off_y, off_x = (_F(o) for o in p.offsets)
        cy = (np.arange(h, dtype=_F) + off_y) * step_y            # (H,)
        cx = (np.arange(w, dtype=_F) + off_x) * step_x            # (W,)
        half = []
        for s in p.sizes:
            s = _F(s)
            half.append((s * _F(h) / _F(w) / _F(2), s / _F(2)))
        s0 = _F(p.sizes[0])
        for r in p.ratios[1:]:
            rt = np.sqrt(_F(r))
            half.append((s0 * _F(h) / _F(w) * rt / _F(2), s0 / rt / _F(2)))
        hw = np.array([v[0] for v in half], dtype=_F)             # (A,)
        hh = np.array([v[1] for v in half], dtype=_F)
        cxg = cx[None, :, None]
        cyg = cy[:, None, None]
        boxes = np.stack(np.broadcast_arrays(cxg - hw, cyg - hh, cxg + hw, cyg + hh), axis=-1)
        boxes = boxes.reshape(1, -1, 4)
        if p.clip:
            boxes = np.clip(boxes, 0, 1)
        return [cast_to(boxes, x0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_MultiBoxDetection
# ---------------------------------------------------------------------------
def _overlap_corner(a, b):
    """IoU of one corner box with many (0 when the union is not positive)."""
    w = np.maximum(_F(0), np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]))
    h = np.maximum(_F(0), np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]))
    i = w * h
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - i
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(u <= 0, _F(0), i / u)


@register_op("_contrib_MultiBoxDetection")
class MultiBoxDetection(OpDef):
    """SSD post-processing: decode ``loc_pred`` against ``anchor``, pick each
    anchor's best non-background class, sort by score and apply NMS.

    Rows are ``[class_id, score, xmin, ymin, xmax, ymax]``.  Detections above
    ``threshold`` are compacted to the front (anchor order), sorted by score,
    and suppressed ones (IoU >= ``nms_threshold``) keep their values with
    ``class_id = -1``; unused rows are all -1.  Class 0 is the background
    (``background_id`` is accepted but, as in MXNet's CPU kernel, not used).
    """

    attrs = {
        "clip": Attr(to_bool, True),
        "threshold": Attr(to_float, 0.01),
        "background_id": Attr(to_int, 0),
        "nms_threshold": Attr(to_float, 0.5),
        "force_suppress": Attr(to_bool, False),
        "variances": Attr(to_float_tuple, (0.1, 0.1, 0.2, 0.2)),
        "nms_topk": Attr(to_int, -1),
    }
    arguments = ("cls_prob", "loc_pred", "anchor")

    def validate(self, p):
        if len(p.variances) != 4:
            raise _attr_error(p, "_contrib_MultiBoxDetection", "variances",
                              "must have 4 entries")

    def infer_shape(self, p, in_shapes, out_shapes):
        c, l, a = in_shapes
        for name, s, nd in (("cls_prob", c, 3), ("loc_pred", l, 2), ("anchor", a, 3)):
            if s is not None and len(s) != nd:
                raise shape_error(p, f"{name} must be {nd}-D, got {fmt_shape(s)}")
        if c is None or a is None:
            return list(in_shapes), list(out_shapes)
        if c[2] is not None and a[1] is not None and c[2] != a[1]:
            raise shape_error(p, f"cls_prob has {c[2]} anchors but anchor has {a[1]}")
        if l is not None and c[2] is not None and l[1] is not None and l[1] != 4 * c[2]:
            raise shape_error(p, f"loc_pred must have 4*{c[2]} entries per batch, got {l[1]}")
        if a[2] is not None and a[2] != 4:
            raise shape_error(p, f"anchor must be (1, num_anchors, 4), got {fmt_shape(a)}")
        return list(in_shapes), [_merge_out(p, (c[0], a[1], 6), out_shapes[0])]

    def forward(self, p, inputs, ctx):
        cls0, loc0, anc0 = inputs
        dt = compute_dtype(cls0.dtype)
        cls = cls0.astype(dt, copy=False)
        nb, nc, na = cls.shape
        loc = loc0.astype(dt, copy=False).reshape(nb, na, 4)
        anc = anc0.astype(dt, copy=False).reshape(-1)[:na * 4].reshape(na, 4)
        vx, vy, vw, vh = (dt.type(v) for v in p.variances)
        out = np.full((nb, na, 6), -1, dtype=dt)
        # decode every anchor once (the same for all batches but the predictions)
        al, at, ar, ab = anc[:, 0], anc[:, 1], anc[:, 2], anc[:, 3]
        aw, ah = ar - al, ab - at
        ax, ay = (al + ar) / dt.type(2), (at + ab) / dt.type(2)
        for b in range(nb):
            if nc > 1:
                probs = cls[b, 1:]                      # (C-1, A)
                best = np.argmax(probs, axis=0)
                score = probs[best, np.arange(na)]
                cid = best + 1
                # MXNet starts from score -1: a class only counts when > -1
                cid = np.where(score > -1, cid, 0)
                score = np.where(score > -1, score, dt.type(-1))
            else:
                cid = np.zeros(na, dtype=np.int64)
                score = np.full(na, -1, dtype=dt)
            cid = np.where((cid > 0) & (score < dt.type(p.threshold)), 0, cid)
            valid = np.nonzero(cid > 0)[0]
            nv = valid.size
            if nv == 0:
                continue
            px, py, pw, ph = (loc[b, valid, k] for k in range(4))
            ox = px * vx * aw[valid] + ax[valid]
            oy = py * vy * ah[valid] + ay[valid]
            ow = np.exp(pw * vw) * aw[valid] / dt.type(2)
            oh = np.exp(ph * vh) * ah[valid] / dt.type(2)
            box = np.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=-1)
            if p.clip:
                box = np.clip(box, 0, 1)
            rows = np.empty((nv, 6), dtype=dt)
            rows[:, 0] = cid[valid] - 1
            rows[:, 1] = score[valid]
            rows[:, 2:] = box
            out[b, :nv] = rows
            if nv < 1 or p.nms_threshold <= 0 or p.nms_threshold > 1:
                continue
            order = np.argsort(-rows[:, 1], kind="stable")
            nkeep = nv if not 0 < p.nms_topk < nv else p.nms_topk
            out[b, nkeep:nv, 0] = -1
            out[b, :nkeep] = rows[order[:nkeep]]
            det = out[b]
            thr = dt.type(p.nms_threshold)
            for i in range(nkeep):
                if det[i, 0] < 0:
                    continue
                rest = np.arange(i + 1, nkeep)
                rest = rest[det[rest, 0] >= 0]
                if not p.force_suppress:
                    rest = rest[det[rest, 0] == det[i, 0]]
                if rest.size == 0:
                    continue
                iou = _overlap_corner(det[i, 2:], det[rest, 2:])
                det[rest[iou >= thr], 0] = -1
        return [cast_to(out, cls0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_Proposal
# ---------------------------------------------------------------------------
def _introsort_desc(keys: np.ndarray, depth_limit: int | None = None) -> list:
    """The permutation libstdc++'s ``std::sort`` produces for ``keys[i] > keys[j]``.

    MXNet's Proposal sorts with the unstable ``std::sort``; ties (the -1 scores
    of filtered boxes) end up in an implementation-defined order that later
    decides which boxes fill the output.  This replays the same introsort
    (median-of-three quicksort down to 16 elements, heap sort past the depth
    limit ``2*floor(log2(n))``, then insertion sort).  ``depth_limit``
    overrides that limit (tests use 0 to exercise the heap-sort path).
    """
    a = list(range(len(keys)))
    k = [float(v) for v in keys]

    def less(i, j):                      # comp(i, j): keys[i] > keys[j]
        return k[i] > k[j]

    def move_median_to_first(result, x, y, z):
        if less(a[x], a[y]):
            if less(a[y], a[z]):
                a[result], a[y] = a[y], a[result]
            elif less(a[x], a[z]):
                a[result], a[z] = a[z], a[result]
            else:
                a[result], a[x] = a[x], a[result]
        elif less(a[x], a[z]):
            a[result], a[x] = a[x], a[result]
        elif less(a[y], a[z]):
            a[result], a[z] = a[z], a[result]
        else:
            a[result], a[y] = a[y], a[result]

    def unguarded_partition(first, last, pivot):
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def adjust_heap(first, hole, length, value):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first, last):          # std::partial_sort(first, last, last)
        length = last - first
        if length < 2:
            return
        parent = (length - 2) // 2
        while True:
            adjust_heap(first, parent, length, a[first + parent])
            if parent == 0:
                break
            parent -= 1
        while length > 1:
            length -= 1
            value = a[first + length]
            a[first + length] = a[first]
            adjust_heap(first, 0, length, value)

    def introsort_loop(first, last, depth):
        while last - first > 16:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            move_median_to_first(first, first + 1, mid, last - 1)
            cut = unguarded_partition(first + 1, last, first)
            introsort_loop(cut, last, depth)
            last = cut

    def insertion_sort(first, last):
        for i in range(first + 1, last):
            v = a[i]
            if less(v, a[first]):
                a[first + 1:i + 1] = a[first:i]
                a[first] = v
            else:
                j = i
                while less(v, a[j - 1]):
                    a[j] = a[j - 1]
                    j -= 1
                a[j] = v

    def unguarded_insertion_sort(first, last):
        for i in range(first, last):
            v = a[i]
            j = i
            while less(v, a[j - 1]):
                a[j] = a[j - 1]
                j -= 1
            a[j] = v

    n = len(a)
    if n > 1:
        introsort_loop(0, n, 2 * (n.bit_length() - 1) if depth_limit is None else depth_limit)
        if n > 16:
            insertion_sort(0, 16)
            unguarded_insertion_sort(16, n)
        else:
            insertion_sort(0, n)
    return a


def _generate_anchors(stride, ratios, scales):
    """Faster R-CNN base anchors (ratio-major), as (A, 4) float32 corners."""
    base_w = base_h = _F(stride)          # base box [0, 0, stride-1, stride-1]
    x_ctr = _F(0) + _F(0.5) * (base_w - _F(1))
    y_ctr = _F(0) + _F(0.5) * (base_h - _F(1))
    size = base_w * base_h
    anchors = []
    for r in ratios:
        for s in scales:
            size_ratios = np.floor(size / _F(r))
            new_w = np.floor(np.sqrt(size_ratios) + _F(0.5)) * _F(s)
            new_h = np.floor(new_w / _F(s) * _F(r) + _F(0.5)) * _F(s)
            anchors.append([x_ctr - _F(0.5) * (new_w - _F(1)), y_ctr - _F(0.5) * (new_h - _F(1)),
                            x_ctr + _F(0.5) * (new_w - _F(1)), y_ctr + _F(0.5) * (new_h - _F(1))])
    return np.array(anchors, dtype=_F)


@register_op("_contrib_Proposal")
class Proposal(OpDef):
    """Faster R-CNN region proposals from RPN scores and box deltas (batch 1).

    Anchors ``(ratio, scale)`` are shifted over the ``H x W`` grid by
    ``feature_stride``; deltas are applied and boxes clipped to the image;
    boxes narrower or shorter than ``rpn_min_size * im_info[2]`` (and cells
    outside ``im_info``'s extent) get score -1.  The top
    ``rpn_pre_nms_top_n`` by score go through NMS (IoU > ``threshold``) and
    ``rpn_post_nms_top_n`` rows ``[0, x1, y1, x2, y2]`` are written, cycling
    through the kept boxes when there are fewer.
    """

    attrs = {
        "rpn_pre_nms_top_n": Attr(to_int, 6000),
        "rpn_post_nms_top_n": Attr(to_int, 300),
        "threshold": Attr(to_float, 0.7),
        "rpn_min_size": Attr(to_int, 16),
        "scales": Attr(to_float_tuple, (4.0, 8.0, 16.0, 32.0)),
        "ratios": Attr(to_float_tuple, (0.5, 1.0, 2.0)),
        "feature_stride": Attr(to_int, 16),
        "output_score": Attr(to_bool, False),
        "iou_loss": Attr(to_bool, False),
    }
    arguments = ("cls_prob", "bbox_pred", "im_info")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 2 if p.output_score else 1

    def output_names(self, p):
        return ["output", "score"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        c = ins[0]
        if c is None:
            return ins, list(out_shapes)
        if len(c) != 4:
            raise shape_error(p, f"cls_prob must be 4-D (1, 2*A, H, W), got {fmt_shape(c)}")
        ins[1] = merge_all(p, [(c[0], None if c[1] is None else c[1] * 2, c[2], c[3]), ins[1]],
                           "bbox_pred")
        ins[2] = merge_all(p, [(c[0], 3), ins[2]], "im_info")
        n = p.rpn_post_nms_top_n
        return ins, [_merge_out(p, (n, 5), out_shapes[0]), _merge_out(p, (n, 1), out_shapes[1])]

    def forward(self, p, inputs, ctx):
        cls, deltas, im_info = (x.astype(_F, copy=False) for x in inputs)
        if cls.shape[0] != 1:
            raise shape_error(p, "only batch size 1 is supported (as in MXNet)")
        na = cls.shape[1] // 2
        h, w = cls.shape[2], cls.shape[3]
        if na != len(p.ratios) * len(p.scales):
            raise shape_error(p, f"cls_prob has {na} anchors per cell but ratios x scales "
                                 f"gives {len(p.ratios) * len(p.scales)}")
        count = na * h * w
        pre_n = p.rpn_pre_nms_top_n if p.rpn_pre_nms_top_n > 0 else count
        pre_n = min(pre_n, count)
        post_n = min(p.rpn_post_nms_top_n, pre_n)
        fs = p.feature_stride
        base = _generate_anchors(fs, p.ratios, p.scales)               # (A, 4)
        # proposal index = (y * W + x) * A + a
        sy = (np.arange(h) * fs).astype(_F)[:, None, None]
        sx = (np.arange(w) * fs).astype(_F)[None, :, None]
        x1 = base[None, None, :, 0] + sx
        y1 = base[None, None, :, 1] + sy
        x2 = base[None, None, :, 2] + sx
        y2 = base[None, None, :, 3] + sy
        x1, y1, x2, y2 = (np.broadcast_to(v, (h, w, na)).astype(_F) for v in (x1, y1, x2, y2))
        score = cls[0, na:].transpose(1, 2, 0).copy()                 # (H, W, A)
        d = deltas[0].reshape(na, 4, h, w).transpose(2, 3, 0, 1)      # (H, W, A, 4)
        im_h, im_w, im_scale = im_info[0, 0], im_info[0, 1], im_info[0, 2]
        if p.iou_loss:
            px1, py1 = x1 + d[..., 0], y1 + d[..., 1]
            px2, py2 = x2 + d[..., 2], y2 + d[..., 3]
        else:
            # float variables, but MXNet's double literals (1.0, 0.5) and exp() make some
            # intermediates double before they are stored back to float
            f64 = np.float64
            bw = ((x2 - x1).astype(f64) + 1.0).astype(_F)
            bh = ((y2 - y1).astype(f64) + 1.0).astype(_F)
            cx = (x1.astype(f64) + 0.5 * (bw.astype(f64) - 1.0)).astype(_F)
            cy = (y1.astype(f64) + 0.5 * (bh.astype(f64) - 1.0)).astype(_F)
            pcx = d[..., 0] * bw + cx
            pcy = d[..., 1] * bh + cy
            pw = (np.exp(d[..., 2].astype(f64)) * bw).astype(_F)
            ph = (np.exp(d[..., 3].astype(f64)) * bh).astype(_F)
            px1 = (pcx.astype(f64) - 0.5 * (pw.astype(f64) - 1.0)).astype(_F)
            py1 = (pcy.astype(f64) - 0.5 * (ph.astype(f64) - 1.0)).astype(_F)
            px2 = (pcx.astype(f64) + 0.5 * (pw.astype(f64) - 1.0)).astype(_F)
            py2 = (pcy.astype(f64) + 0.5 * (ph.astype(f64) - 1.0)).astype(_F)
        px1 = np.maximum(np.minimum(px1, im_w - _F(1)), _F(0))
        py1 = np.maximum(np.minimum(py1, im_h - _F(1)), _F(0))
        px2 = np.maximum(np.minimum(px2, im_w - _F(1)), _F(0))
        py2 = np.maximum(np.minimum(py2, im_h - _F(1)), _F(0))
        real_h = int(im_h / _F(fs))
        real_w = int(im_w / _F(fs))
        pad = (np.arange(h)[:, None] >= real_h) | (np.arange(w)[None, :] >= real_w)
        score = np.where(pad[..., None], _F(-1), score)
        dets = np.stack([px1, py1, px2, py2, score], axis=-1).reshape(count, 5).astype(_F)
        min_size = _F(p.rpn_min_size) * im_scale
        iw = dets[:, 2] - dets[:, 0] + _F(1)
        ih = dets[:, 3] - dets[:, 1] + _F(1)
        small = (iw < min_size) | (ih < min_size)
        half = min_size / _F(2)
        dets[small, 0] -= half
        dets[small, 1] -= half
        dets[small, 2] += half
        dets[small, 3] += half
        dets[small, 4] = _F(-1)
        order = _introsort_desc(dets[:, 4])[:pre_n]
        dets = dets[order]
        area = (dets[:, 2] - dets[:, 0] + _F(1)) * (dets[:, 3] - dets[:, 1] + _F(1))
        suppressed = np.zeros(pre_n, dtype=bool)
        keep = []
        thr = _F(p.threshold)
        for i in range(pre_n):
            if len(keep) >= post_n:
                break
            if suppressed[i]:
                continue
            keep.append(i)
            j = np.arange(i + 1, pre_n)
            j = j[~suppressed[j]]
            if j.size == 0:
                continue
            xx1 = np.maximum(dets[i, 0], dets[j, 0])
            yy1 = np.maximum(dets[i, 1], dets[j, 1])
            xx2 = np.minimum(dets[i, 2], dets[j, 2])
            yy2 = np.minimum(dets[i, 3], dets[j, 3])
            iw = np.maximum(_F(0), xx2 - xx1 + _F(1))
            ih = np.maximum(_F(0), yy2 - yy1 + _F(1))
            inter = iw * ih
            with np.errstate(invalid="ignore", divide="ignore"):
                ovr = inter / (area[i] + area[j] - inter)
            suppressed[j[ovr > thr]] = True
        n_out = p.rpn_post_nms_top_n
        rows = [keep[i % len(keep)] for i in range(n_out)]
        out = np.zeros((n_out, 5), dtype=_F)
        out[:, 1:] = dets[rows, :4]
        scores = dets[rows, 4:5]
        odt = ctx.out_dtypes[0] or "float32"
        return [out.astype(odt), scores.astype(odt)]
