"""SSD's anchor operators: ``_contrib_MultiBoxPrior`` (prior boxes per
feature-map cell) and ``_contrib_MultiBoxDetection`` (decode, per-class NMS).

Like the box operators in ``detection.py`` they compute in float32 as MXNet's
CPU code does and loop over boxes in Python.
"""

from __future__ import annotations

import numpy as np

from .common import cast_to, compute_dtype, fmt_shape
from .detection import F32, attr_value_error, merge_output
from .registry import (Attr, OpDef, register_op, shape_error, to_bool, to_float,
                       to_float_tuple, to_int)


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
            raise attr_value_error(p, op, "sizes", "must not be empty")
        if not p.ratios:
            raise attr_value_error(p, op, "ratios", "must not be empty")
        if len(p.steps) != 2:
            raise attr_value_error(p, op, "steps", "must have 2 entries (step_y, step_x)")
        if len(p.offsets) != 2 or not all(0.0 <= o <= 1.0 for o in p.offsets):
            raise attr_value_error(p, op, "offsets", "must be 2 values in [0, 1]")
        if p.steps[0] * p.steps[1] < 0:
            raise attr_value_error(p, op, "steps", "must give both step_y and step_x")

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        if d is None:
            return list(in_shapes), list(out_shapes)
        if len(d) < 4:
            raise shape_error(p, f"data must be 4-D (batch, channel, y, x), got {fmt_shape(d)}")
        h, w = d[2], d[3]
        n = None if h is None or w is None else h * w * (len(p.sizes) + len(p.ratios) - 1)
        return list(in_shapes), [merge_output(p, (1, n, 4), out_shapes[0])]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        h, w = x0.shape[2], x0.shape[3]
        step_y, step_x = (F32(s) for s in p.steps)
        if step_y <= 0 or step_x <= 0:
            step_y, step_x = F32(1) / F32(h), F32(1) / F32(w)
        off_y, off_x = (F32(o) for o in p.offsets)
        cy = (np.arange(h, dtype=F32) + off_y) * step_y            # (H,)
        cx = (np.arange(w, dtype=F32) + off_x) * step_x            # (W,)
        half = []
        for s in p.sizes:
            s = F32(s)
            half.append((s * F32(h) / F32(w) / F32(2), s / F32(2)))
        s0 = F32(p.sizes[0])
        for r in p.ratios[1:]:
            rt = np.sqrt(F32(r))
            half.append((s0 * F32(h) / F32(w) * rt / F32(2), s0 / rt / F32(2)))
        hw = np.array([v[0] for v in half], dtype=F32)             # (A,)
        hh = np.array([v[1] for v in half], dtype=F32)
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
    w = np.maximum(F32(0), np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]))
    h = np.maximum(F32(0), np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]))
    i = w * h
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - i
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(u <= 0, F32(0), i / u)


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
            raise attr_value_error(p, "_contrib_MultiBoxDetection", "variances",
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
        return list(in_shapes), [merge_output(p, (c[0], a[1], 6), out_shapes[0])]

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
