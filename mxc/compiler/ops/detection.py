"""Box operators of object detection: box_nms, box_iou, box_encode/decode.

The SSD anchor ops live in ``detection_multibox.py``, Faster R-CNN's
``Proposal`` in ``detection_proposal.py`` and the batched/training ones in
``detection_batch.py``; they share the float32 alias and the two small
helpers defined here (:data:`F32`, :func:`attr_value_error`,
:func:`merge_output`).

Boxes are ``corner`` ``[xmin, ymin, xmax, ymax]`` or ``center``
``[x, y, width, height]``.  Kernels compute in float32 like MXNet's CPU code
(comparisons against thresholds depend on it) and loop over boxes in Python.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeInvalidError
from .common import cast_to, compute_dtype, fmt_shape, merge_all
from .registry import Attr, OpDef, enum, register_op, shape_error, to_bool, to_float, to_int

#: the dtype MXNet's CPU detection kernels compute in
F32 = np.float32


def attr_value_error(p, op, key, msg):
    """An :class:`AttributeInvalidError` naming op, node, attribute and value."""
    return AttributeInvalidError(f"operator {op} (node {p.node_ref}): attribute "
                                 f"{key}={p[key]!r} {msg}")


def merge_output(p, inferred, known):
    """Merge an inferred output shape into the known one (None: nothing inferred)."""
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
    return np.where((wd < 0) | (ht < 0), F32(0), wd * ht).astype(b.dtype)


def _intersect_1d(a_lo, a_hi, b_lo, b_hi, center):
    """Overlap along one axis; ``lo``/``hi`` are (xmin, xmax) or (x, width)."""
    if center:
        aw, bw = a_hi / 2, b_hi / 2
        a_lo, a_hi = a_lo - aw, a_lo + aw
        b_lo, b_hi = b_lo - bw, b_lo + bw
    w = np.minimum(a_hi, b_hi) - np.maximum(a_lo, b_lo)
    return np.where(w > 0, w, 0).astype(np.result_type(w), copy=False)


def _intersection(a, b, center):
    return (_intersect_1d(a[..., 0], a[..., 2], b[..., 0], b[..., 2], center)
            * _intersect_1d(a[..., 1], a[..., 3], b[..., 1], b[..., 3], center))


#: rows of the IoU matrix computed at once by :func:`_greedy_nms` (rows x boxes floats)
NMS_BLOCK = 256


def _greedy_nms(boxes, areas, ids, thresh, center) -> np.ndarray:
    """Which of *boxes* (sorted by descending score) survive greedy NMS: a box is
    suppressed by an earlier surviving one whose IoU with it exceeds *thresh*
    (and, when *ids* is given, that has the same id).

    With ids, each id's boxes are suppressed among themselves (in their order).
    The IoUs of a block of up to :data:`NMS_BLOCK` surviving rows against every
    later surviving box are computed at once, elementwise with the same float
    operations as one pair at a time (so the same values); only the greedy walk
    over the rows stays a Python loop, one vector operation per surviving box."""
    n = len(boxes)
    alive = np.ones(n, dtype=bool)
    if ids is not None:
        for value in np.unique(ids):
            sel = np.nonzero(ids == value)[0]
            alive[sel] = _greedy_nms(boxes[sel], areas[sel], None, thresh, center)
        return alive
    for start in range(0, n, NMS_BLOCK):
        rows = start + np.nonzero(alive[start:start + NMS_BLOCK])[0]
        cols = start + np.nonzero(alive[start:])[0]
        if rows.size == 0:
            continue
        inter = _intersection(boxes[rows, None, :], boxes[None, cols, :], center)
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (areas[rows, None] + areas[None, cols] - inter)
        over = (iou > thresh) & (cols[None, :] > rows[:, None])
        for k, r in enumerate(rows):
            if alive[r]:
                alive[cols[over[k]]] = False
    return alive


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
            raise attr_value_error(p, op, "coord_start", "must be >= 0")
        if si < 0 or cs <= si <= cs + 3:
            raise attr_value_error(p, op, "score_index", f"must be >= 0 and outside the "
                                                    f"coordinates [{cs}, {cs + 3}]")
        if p.id_index >= 0 and (cs <= p.id_index <= cs + 3 or p.id_index == si):
            raise attr_value_error(p, op, "id_index", "conflicts with the coordinates or "
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
            same_class = None if p.force_suppress else ids
            alive = _greedy_nms(boxes, areas, same_class, thresh, center)
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
        return list(in_shapes), [merge_output(p, out, out_shapes[0])]

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
        return ins, [merge_output(p, tuple(a), o) for o in out_shapes]

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
