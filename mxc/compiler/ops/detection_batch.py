"""Batched and training-target detection operators: ``_contrib_MultiProposal``,
``_contrib_MultiBoxTarget`` and ``_contrib_bipartite_matching``.

* MultiProposal is ``_contrib_Proposal`` (``detection_proposal.py``) applied to each
  image of the batch; its ``rpn_post_nms_top_n`` rows per image carry the
  image index in column 0.
* bipartite_matching: greedy matching on a score matrix ``(..., N, M)``:
  repeatedly the best remaining pair (descending, or ascending with
  ``is_ascend``; ties in index order, MXNet's sort is stable) whose score is
  strictly above ``threshold`` (below with ``is_ascend``) is matched; outputs
  the column matched to each row and the row matched to each column (-1:
  none).  ``topk`` stops the matching once MORE than ``topk`` pairs are
  matched: MXNet counts the match before testing, so it keeps ``topk + 1``.
* MultiBoxTarget: SSD training targets from anchors, ground-truth labels and
  class predictions (see :class:`MultiBoxTarget`).

All run on the host (data-dependent control flow).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape, merge_into
from .detection_proposal import Proposal
from .registry import Attr, OpDef, register_op, shape_error, to_bool, to_float, to_float_tuple, \
    to_int


@register_op("_contrib_MultiProposal")
class MultiProposal(Proposal):
    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        c = ins[0]
        if c is None:
            return ins, list(out_shapes)
        ins, _ = super().infer_shape(p, ins, [None, None])
        rows = None if c[0] is None else c[0] * p.rpn_post_nms_top_n
        outs = list(out_shapes)
        merge_into(p, outs, 0, (rows, 5), "output")
        merge_into(p, outs, 1, (rows, 1), "score")
        return ins, outs

    def forward(self, p, inputs, ctx):
        cls, deltas, im_info = inputs
        rois, scores = [], []
        for b in range(cls.shape[0]):
            out, score = super().forward(p, [cls[b:b + 1], deltas[b:b + 1], im_info[b:b + 1]],
                                         ctx)
            out[:, 0] = b
            rois.append(out)
            scores.append(score)
        return [np.concatenate(rois), np.concatenate(scores)]


@register_op("_contrib_bipartite_matching")
class BipartiteMatching(OpDef):
    attrs = {"is_ascend": Attr(to_bool, False), "threshold": Attr(to_float),
             "topk": Attr(to_int, -1)}

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes, out_shapes):
        d, outs = in_shapes[0], list(out_shapes)
        if d is not None:
            if len(d) < 2:
                raise shape_error(p, f"data must have rank >= 2, got {fmt_shape(d)}")
            merge_into(p, outs, 0, tuple(d[:-1]), "row matches")
            merge_into(p, outs, 1, tuple(d[:-2]) + (d[-1],), "column matches")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        n, m = x.shape[-2:]
        mats = x.reshape(-1, n, m)
        rows = np.full((mats.shape[0], n), -1, dtype=x.dtype)
        cols = np.full((mats.shape[0], m), -1, dtype=x.dtype)
        limit = p.topk + 1 if p.topk > 0 else n * m  # MXNet breaks once count > topk
        for b, mat in enumerate(mats):
            flat = mat.reshape(-1)
            order = np.argsort(flat if p.is_ascend else -flat, kind="stable")
            matched = 0
            for idx in order:
                v = flat[idx]
                passes = v < p.threshold if p.is_ascend else v > p.threshold
                if not passes:
                    break
                i, j = divmod(int(idx), m)
                if rows[b, i] == -1 and cols[b, j] == -1:
                    rows[b, i], cols[b, j] = j, i
                    matched += 1
                    if matched >= limit:
                        break
        return [rows.reshape(x.shape[:-1]), cols.reshape(x.shape[:-2] + (m,))]


def _iou_matrix(anchors: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of corner boxes ``anchors (A, 4)`` x ``boxes (G, 4)`` (0 without overlap)."""
    lo = np.maximum(anchors[:, None, :2], boxes[None, :, :2])
    hi = np.minimum(anchors[:, None, 2:], boxes[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=2)
    area_a = np.prod(anchors[:, 2:] - anchors[:, :2], axis=1)[:, None]
    area_b = np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)[None, :]
    union = area_a + area_b - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0).astype(np.float32)


@register_op("_contrib_MultiBoxTarget")
class MultiBoxTarget(OpDef):
    """SSD targets: ``[loc_target (B, 4A), loc_mask (B, 4A), cls_target (B, A)]``.

    Per image: each ground truth (rows of ``label`` until the first class -1)
    is first matched greedily to its best free anchor; then every other anchor
    whose best IoU exceeds ``overlap_threshold`` is positive.  Negatives are
    all remaining anchors, or with ``negative_mining_ratio > 0`` the
    ``ratio * positives`` anchors below ``negative_mining_thresh`` with the
    lowest background probability.  Positives get class ``label + 1`` and the
    variance-scaled center/size encoding; negatives class 0; the rest keep
    ``ignore_label``.
    """

    attrs = {
        "overlap_threshold": Attr(to_float, 0.5),
        "ignore_label": Attr(to_float, -1.0),
        "negative_mining_ratio": Attr(to_float, -1.0),
        "negative_mining_thresh": Attr(to_float, 0.5),
        "minimum_negative_samples": Attr(to_int, 0),
        "variances": Attr(to_float_tuple, (0.1, 0.1, 0.2, 0.2)),
    }
    arguments = ("anchor", "label", "cls_pred")

    def validate(self, p):
        if len(p.variances) != 4:
            raise attr_error(p, "variances", "must have 4 entries", op=self)

    def num_outputs(self, p):
        return 3

    def output_names(self, p):
        return ["loc_target", "loc_mask", "cls_target"]

    def infer_shape(self, p, in_shapes, out_shapes):
        anchor, label, pred = in_shapes
        outs = list(out_shapes)
        if anchor is not None and (len(anchor) != 3 or anchor[2] != 4):
            raise shape_error(p, f"anchor must be (1, A, 4), got {fmt_shape(anchor)}")
        if label is not None and (len(label) != 3 or (label[2] is not None and label[2] < 5)):
            raise shape_error(p, f"label must be (B, G, >=5), got {fmt_shape(label)}")
        if anchor is not None and pred is not None:
            merge_into(p, outs, 0, (pred[0], anchor[1] * 4), "loc_target")
            merge_into(p, outs, 1, (pred[0], anchor[1] * 4), "loc_mask")
            merge_into(p, outs, 2, (pred[0], anchor[1]), "cls_target")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        anchors = inputs[0].reshape(-1, 4).astype(np.float32)
        labels = inputs[1].astype(np.float32)
        preds = inputs[2].astype(np.float32)
        batch, num_a = labels.shape[0], anchors.shape[0]
        loc_t = np.zeros((batch, num_a, 4), dtype=np.float32)
        loc_m = np.zeros((batch, num_a, 4), dtype=np.float32)
        cls_t = np.full((batch, num_a), p.ignore_label, dtype=np.float32)
        for b in range(batch):
            gts = labels[b]
            ends = np.nonzero(gts[:, 0] == -1)[0]
            gts = gts[:ends[0]] if ends.size else gts
            if len(gts) == 0:
                continue
            flags, best = self._match(p, _iou_matrix(anchors, gts[:, 1:5]))
            self._mine_negatives(p, flags, best, preds[b])
            pos = np.nonzero(flags == 1)[0]
            cls_t[b, flags == 0] = 0
            cls_t[b, pos] = gts[best[pos, 1].astype(np.int64), 0] + 1
            loc_m[b, pos] = 1
            loc_t[b, pos] = self._encode(p, anchors[pos], gts[best[pos, 1].astype(np.int64), 1:5])
        dt = inputs[0].dtype
        return [loc_t.reshape(batch, -1).astype(dt), loc_m.reshape(batch, -1).astype(dt),
                cls_t.astype(dt)]

    @staticmethod
    def _match(p, iou: np.ndarray):
        """Anchor flags (1 positive, -1 undecided) and ``(best iou, gt)`` per anchor."""
        num_a, num_g = iou.shape
        flags = np.full(num_a, -1, dtype=np.int8)
        best = np.tile(np.array([-1.0, -1.0], dtype=np.float32), (num_a, 1))
        gt_done = np.zeros(num_g, dtype=bool)
        while not gt_done.all():
            masked = np.where((flags[:, None] == 1) | gt_done[None, :], -np.inf, iou)
            j, k = np.unravel_index(int(np.argmax(masked)), masked.shape)
            if not masked[j, k] > 1e-6:
                break
            best[j] = (masked[j, k], k)
            gt_done[k] = True
            flags[j] = 1
        if p.overlap_threshold > 0:
            for j in np.nonzero(flags != 1)[0]:
                k = int(np.argmax(iou[j]))
                best[j] = (iou[j, k], k)
                if iou[j, k] > p.overlap_threshold:
                    flags[j] = 1
        return flags, best

    @staticmethod
    def _mine_negatives(p, flags, best, pred):
        positives = int((flags == 1).sum())
        if p.negative_mining_ratio <= 0:
            flags[flags != 1] = 0
            return
        count = min(int(positives * p.negative_mining_ratio), len(flags) - positives)
        if count <= 0:
            return
        shifted = pred - pred.max(axis=0, keepdims=True)
        background = np.exp(shifted[0]) / np.exp(shifted).sum(axis=0)
        candidates = [j for j in range(len(flags))
                      if flags[j] == -1 and best[j, 0] < p.negative_mining_thresh]
        candidates.sort(key=lambda j: background[j])  # stable: lowest background first
        for j in candidates[:count]:
            flags[j] = 0

    @staticmethod
    def _encode(p, anchors, boxes):
        vx, vy, vw, vh = p.variances
        aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
        ax, ay = (anchors[:, 0] + anchors[:, 2]) * 0.5, (anchors[:, 1] + anchors[:, 3]) * 0.5
        gw, gh = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        gx, gy = (boxes[:, 0] + boxes[:, 2]) * 0.5, (boxes[:, 1] + boxes[:, 3]) * 0.5
        return np.stack([(gx - ax) / aw / vx, (gy - ay) / ah / vy,
                         np.log(gw / aw) / vw, np.log(gh / ah) / vh], axis=1)
