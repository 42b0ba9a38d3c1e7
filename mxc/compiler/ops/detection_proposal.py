"""Faster R-CNN's ``_contrib_Proposal``: region proposals from RPN scores.

Reproducing MXNet's output order needs libstdc++'s unstable ``std::sort``
(:func:`_introsort_desc`); ``_contrib_MultiProposal`` (``detection_batch.py``)
is this op applied per image.
"""

from __future__ import annotations

import numpy as np

from .common import fmt_shape, merge_all
from .detection import F32, merge_output
from .registry import (Attr, OpDef, register_op, shape_error, to_bool, to_float,
                       to_float_tuple, to_int)


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


def _top_desc(keys: np.ndarray, n: int) -> np.ndarray:
    """The first *n* indices of :func:`_introsort_desc` (*keys*), without replaying
    it where the answer does not depend on the sort algorithm.

    Any correct descending sort puts the *n* largest keys first in decreasing
    order; only the order of equal keys is the algorithm's.  When the top *n*
    keys are all distinct and the *n*-th is strictly greater than the next one,
    no tie reaches the prefix and numpy's sort gives the same indices.  Otherwise
    (ties among the top *n* -- saturated scores --, or a tie straddling the cut,
    or NaN, which makes ``std::sort``'s result depend on its pivots) the
    introsort is replayed in Python: about 20x slower.
    """
    n = min(n, len(keys))
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    if not np.isnan(keys).any():
        order = np.argsort(-keys, kind="stable")
        top = keys[order[:n + 1]]
        if np.all(top[1:] < top[:-1]):
            return order[:n]
    return np.asarray(_introsort_desc(keys)[:n], dtype=np.intp)


def _generate_anchors(stride, ratios, scales):
    """Faster R-CNN base anchors (ratio-major), as (A, 4) float32 corners."""
    base_w = base_h = F32(stride)          # base box [0, 0, stride-1, stride-1]
    x_ctr = F32(0) + F32(0.5) * (base_w - F32(1))
    y_ctr = F32(0) + F32(0.5) * (base_h - F32(1))
    size = base_w * base_h
    anchors = []
    for r in ratios:
        for s in scales:
            size_ratios = np.floor(size / F32(r))
            new_w = np.floor(np.sqrt(size_ratios) + F32(0.5)) * F32(s)
            new_h = np.floor(new_w / F32(s) * F32(r) + F32(0.5)) * F32(s)
            half_w, half_h = F32(0.5) * (new_w - F32(1)), F32(0.5) * (new_h - F32(1))
            anchors.append([x_ctr - half_w, y_ctr - half_h, x_ctr + half_w, y_ctr + half_h])
    return np.array(anchors, dtype=F32)


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
        return ins, [merge_output(p, (n, 5), out_shapes[0]), merge_output(p, (n, 1), out_shapes[1])]

    def forward(self, p, inputs, ctx):
        cls, deltas, im_info = (x.astype(F32, copy=False) for x in inputs)
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
        sy = (np.arange(h) * fs).astype(F32)[:, None, None]
        sx = (np.arange(w) * fs).astype(F32)[None, :, None]
        x1 = base[None, None, :, 0] + sx
        y1 = base[None, None, :, 1] + sy
        x2 = base[None, None, :, 2] + sx
        y2 = base[None, None, :, 3] + sy
        x1, y1, x2, y2 = (np.broadcast_to(v, (h, w, na)).astype(F32) for v in (x1, y1, x2, y2))
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
            bw = ((x2 - x1).astype(f64) + 1.0).astype(F32)
            bh = ((y2 - y1).astype(f64) + 1.0).astype(F32)
            cx = (x1.astype(f64) + 0.5 * (bw.astype(f64) - 1.0)).astype(F32)
            cy = (y1.astype(f64) + 0.5 * (bh.astype(f64) - 1.0)).astype(F32)
            pcx = d[..., 0] * bw + cx
            pcy = d[..., 1] * bh + cy
            pw = (np.exp(d[..., 2].astype(f64)) * bw).astype(F32)
            ph = (np.exp(d[..., 3].astype(f64)) * bh).astype(F32)
            px1 = (pcx.astype(f64) - 0.5 * (pw.astype(f64) - 1.0)).astype(F32)
            py1 = (pcy.astype(f64) - 0.5 * (ph.astype(f64) - 1.0)).astype(F32)
            px2 = (pcx.astype(f64) + 0.5 * (pw.astype(f64) - 1.0)).astype(F32)
            py2 = (pcy.astype(f64) + 0.5 * (ph.astype(f64) - 1.0)).astype(F32)
        px1 = np.maximum(np.minimum(px1, im_w - F32(1)), F32(0))
        py1 = np.maximum(np.minimum(py1, im_h - F32(1)), F32(0))
        px2 = np.maximum(np.minimum(px2, im_w - F32(1)), F32(0))
        py2 = np.maximum(np.minimum(py2, im_h - F32(1)), F32(0))
        real_h = int(im_h / F32(fs))
        real_w = int(im_w / F32(fs))
        pad = (np.arange(h)[:, None] >= real_h) | (np.arange(w)[None, :] >= real_w)
        score = np.where(pad[..., None], F32(-1), score)
        dets = np.stack([px1, py1, px2, py2, score], axis=-1).reshape(count, 5).astype(F32)
        min_size = F32(p.rpn_min_size) * im_scale
        iw = dets[:, 2] - dets[:, 0] + F32(1)
        ih = dets[:, 3] - dets[:, 1] + F32(1)
        small = (iw < min_size) | (ih < min_size)
        half = min_size / F32(2)
        dets[small, 0] -= half
        dets[small, 1] -= half
        dets[small, 2] += half
        dets[small, 3] += half
        dets[small, 4] = F32(-1)
        order = _top_desc(dets[:, 4], pre_n)
        dets = dets[order]
        area = (dets[:, 2] - dets[:, 0] + F32(1)) * (dets[:, 3] - dets[:, 1] + F32(1))
        suppressed = np.zeros(pre_n, dtype=bool)
        keep = []
        thr = F32(p.threshold)
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
            iw = np.maximum(F32(0), xx2 - xx1 + F32(1))
            ih = np.maximum(F32(0), yy2 - yy1 + F32(1))
            inter = iw * ih
            with np.errstate(invalid="ignore", divide="ignore"):
                ovr = inter / (area[i] + area[j] - inter)
            suppressed[j[ovr > thr]] = True
        n_out = p.rpn_post_nms_top_n
        rows = [keep[i % len(keep)] for i in range(n_out)]
        out = np.zeros((n_out, 5), dtype=F32)
        out[:, 1:] = dets[rows, :4]
        scores = dets[rows, 4:5]
        odt = ctx.out_dtypes[0] or "float32"
        return [out.astype(odt), scores.astype(odt)]
