"""The vectorised detection kernels of the reference backend against their old forms.

``_contrib_box_nms``'s greedy suppression now computes IoUs a block of rows at
a time (:func:`~mxc.compiler.ops.detection._greedy_nms`); the surviving set
must be exactly the one the old pair-at-a-time loop (kept below, as it was)
gives.  ``_contrib_ROIAlign`` now sums each bin's sample weights and contracts
them with two matrix products over the ROI's window (channels folded into one
GEMM each) instead of a three-operand ``einsum``: the sums are reassociated, so the outputs agree with the old ``einsum`` (kept below) to
float rounding of the summed magnitudes, not bit for bit.  ``ROIPooling`` takes
each bin's maximum separably; its values and argmax positions must be exactly
the per-bin loop's (kept below).  The corpus cases of the three operators
(MXNet's outputs) are run by ``tests/ops/test_corpus_ops.py``.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.compiler.ops import detection
from mxc.compiler.ops.detection import _box_area, _greedy_nms, _intersection
from mxc.compiler.ops.roi import _align_axis_weights


def _old_alive(boxes, areas, ids, thresh, center):
    """The suppression loop of ``_contrib_box_nms`` before vectorisation."""
    alive = np.ones(len(boxes), dtype=bool)
    for r in range(len(boxes)):
        if not alive[r]:
            continue
        rest = np.arange(r + 1, len(boxes))
        rest = rest[alive[rest]]
        if ids is not None:
            rest = rest[ids[rest] == ids[r]]
        if rest.size == 0:
            continue
        inter = _intersection(boxes[r], boxes[rest], center)
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (areas[r] + areas[rest] - inter)
        alive[rest[iou > thresh]] = False
    return alive


def _boxes(seed, n, center, spread):
    rng = np.random.default_rng(seed)
    lo = rng.uniform(0, spread, (n, 2))
    size = rng.uniform(-2, spread / 2, (n, 2))     # a few negative sizes (zero area)
    if center:
        b = np.concatenate([lo, size], 1)
    else:
        b = np.concatenate([lo, lo + size], 1)
    dup = rng.integers(0, n, n // 5)                  # exact duplicates: IoU 1 (or 0/0)
    b[dup] = b[rng.integers(0, n, len(dup))]
    return b.astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 700), center=st.booleans(),
       with_ids=st.booleans(), thresh=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
       spread=st.sampled_from([10.0, 100.0]), block=st.sampled_from([1, 7, 256]))
def test_greedy_nms_keeps_exactly_the_boxes_the_pairwise_loop_kept(
        seed, n, center, with_ids, thresh, spread, block):
    boxes = _boxes(seed, n, center, spread)
    areas = _box_area(boxes, center)
    ids = (np.random.default_rng(seed + 1).integers(0, 3, n) if with_ids else None)
    saved = detection.NMS_BLOCK
    detection.NMS_BLOCK = block            # blocks of 1 and 7 cross many block seams
    try:
        got = _greedy_nms(boxes, areas, ids, np.float32(thresh), center)
    finally:
        detection.NMS_BLOCK = saved
    np.testing.assert_array_equal(got, _old_alive(boxes, areas, ids, np.float32(thresh), center))


def test_box_nms_op_on_a_detector_sized_input_suppresses_as_before():
    """The whole op, 3,000 boxes of 20 classes: the same rows, bit for bit."""
    rng = np.random.default_rng(3)
    n = 3000
    boxes = _boxes(4, n, False, 300.0)
    rec = np.concatenate([rng.integers(0, 20, (n, 1)), rng.uniform(0, 1, (n, 1)), boxes], 1)
    x = rec.astype(np.float32)[None]
    node = S._contrib_box_nms(S.var("data"), overlap_thresh=0.5, valid_thresh=0.05, topk=2000,
                              coord_start=2, score_index=1, id_index=0, name="nms")
    out = run_graph(node.graph, {"data": x})[0][0]
    valid = np.nonzero(x[0, :, 1] > np.float32(0.05))[0]
    order = valid[np.argsort(-x[0, valid, 1], kind="stable")][:2000]
    b = x[0, order, 2:6]
    alive = _old_alive(b, _box_area(b, False), x[0, order, 0].astype(np.int64),
                       np.float32(0.5), False)
    kept = x[0, order[alive]]
    np.testing.assert_array_equal(out[:len(kept)], kept)
    assert (out[len(kept):] == -1).all()


def _old_roi_align(data, rois, pooled, scale, sample_ratio, aligned):
    """``_contrib_ROIAlign`` (not position-sensitive) with the old ``einsum``."""
    f = np.float32
    ph, pw = pooled
    out = np.zeros((len(rois), data.shape[1], ph, pw), dtype=data.dtype)
    offset = f(0.5) if aligned else f(0)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        x1, y1, x2, y2 = ((roi[1:5] * f(scale)).astype(f) - offset).astype(f)
        roi_w, roi_h = f(x2 - x1), f(y2 - y1)
        if not aligned:
            roi_w, roi_h = max(roi_w, f(1)), max(roi_h, f(1))
        bin_h, bin_w = f(roi_h / f(ph)), f(roi_w / f(pw))
        gh = sample_ratio if sample_ratio > 0 else int(math.ceil(f(roi_h / f(ph))))
        gw = sample_ratio if sample_ratio > 0 else int(math.ceil(f(roi_w / f(pw))))
        wy = _align_axis_weights(y1, bin_h, ph, gh, data.shape[2])
        wx = _align_axis_weights(x1, bin_w, pw, gw, data.shape[3])
        s = np.einsum("yh,chw,xw->cyx", wy, data[b], wx)
        out[r] = s.reshape(-1, ph, gh, pw, gw).sum(axis=(2, 4)) / data.dtype.type(gh * gw)
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), nrois=st.integers(1, 12), side=st.integers(2, 20),
       pooled=st.sampled_from([(1, 1), (2, 3), (7, 7)]), sample_ratio=st.sampled_from([-1, 1, 2]),
       aligned=st.booleans(), scale=st.sampled_from([1.0, 0.5, 0.0625]))
def test_roi_align_matches_the_einsum_form_to_rounding(seed, nrois, side, pooled, sample_ratio,
                                                       aligned, scale):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((2, 5, side, side + 3)).astype(np.float32)
    extent = (side + 3) / scale
    lo = rng.uniform(-2, extent * 0.8, (nrois, 2))
    hi = lo + rng.uniform(0.5, extent * 0.6, (nrois, 2))
    rois = np.concatenate([rng.integers(0, 2, (nrois, 1)), lo, hi], 1).astype(np.float32)
    node = S._contrib_ROIAlign(S.var("data"), S.var("rois"), pooled_size=pooled,
                               spatial_scale=scale, sample_ratio=sample_ratio, aligned=aligned,
                               name="align")
    got = run_graph(node.graph, {"data": data, "rois": rois})[0]
    want = _old_roi_align(data, rois, pooled, scale, sample_ratio, aligned)
    # reassociated float32 sums: bounded by the magnitudes summed, |w| <= 1 per sample
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(data).max()))


def test_roi_align_window_edges_match_the_einsum_form():
    """The product runs over the cells the samples read only: ROIs at each edge of the
    map, one of a single cell, one wholly past the map (every weight zero: zeros) and one
    covering it all must give what the full contraction gives."""
    rng = np.random.default_rng(7)
    data = rng.standard_normal((1, 6, 9, 11)).astype(np.float32)
    rois = np.array([[0, -3, -3, 2, 2], [0, 8, 6, 14, 12], [0, 4.2, 3.7, 4.4, 3.9],
                     [0, 30, 30, 40, 40], [0, 0, 0, 10, 8], [0, -1, 4, 12, 5]], np.float32)
    for sample_ratio in (-1, 2):
        node = S._contrib_ROIAlign(S.var("data"), S.var("rois"), pooled_size=(3, 2),
                                   spatial_scale=1.0, sample_ratio=sample_ratio, name="align")
        got = run_graph(node.graph, {"data": data, "rois": rois})[0]
        want = _old_roi_align(data, rois, (3, 2), 1.0, sample_ratio, False)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(data).max()))
        assert not got[3].any()                    # past the map: no sample reads a cell


def _old_roi_pooling(data, rois, pooled, scale):
    """``ROIPooling`` before vectorisation: one flattened argmax per bin."""
    from mxc.compiler.ops.roi import _c_round
    dt = data.dtype
    n, c, h, w = data.shape
    ph, pw = pooled
    out = np.zeros((len(rois), c, ph, pw), dtype=dt)
    arg = np.full((len(rois), c, ph, pw), -1, dtype=dt)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        x1, y1, x2, y2 = (int(v) for v in _c_round(roi[1:5] * dt.type(scale)))
        bin_h = dt.type(max(y2 - y1 + 1, 1)) / dt.type(ph)
        bin_w = dt.type(max(x2 - x1 + 1, 1)) / dt.type(pw)
        img = data[b].reshape(c, h * w)
        for i in range(ph):
            hs = min(max(int(math.floor(dt.type(i) * bin_h)) + y1, 0), h)
            he = min(max(int(math.ceil(dt.type(i + 1) * bin_h)) + y1, 0), h)
            for j in range(pw):
                ws = min(max(int(math.floor(dt.type(j) * bin_w)) + x1, 0), w)
                we = min(max(int(math.ceil(dt.type(j + 1) * bin_w)) + x1, 0), w)
                if he <= hs or we <= ws:
                    continue
                idx = (np.arange(hs, he)[:, None] * w + np.arange(ws, we)[None, :]).ravel()
                vals = img[:, idx]
                k = np.argmax(vals, axis=1)
                out[r, :, i, j] = vals[np.arange(c), k]
                arg[r, :, i, j] = idx[k]
    return out, arg


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), nrois=st.integers(1, 10), side=st.integers(1, 16),
       pooled=st.sampled_from([(1, 1), (2, 3), (7, 7), (4, 1)]),
       scale=st.sampled_from([1.0, 0.5, 0.0625]), ties=st.booleans(), nans=st.booleans())
def test_roi_pooling_picks_the_same_maxima_and_positions_as_the_per_bin_loop(
        seed, nrois, side, pooled, scale, ties, nans):
    rng = np.random.default_rng(seed)
    shape = (2, 3, side, side + 2)
    data = (rng.integers(-2, 3, shape) if ties else rng.standard_normal(shape)).astype(np.float32)
    if nans:
        data[rng.random(shape) < 0.1] = np.nan
    extent = (side + 2) / scale
    lo = rng.uniform(-extent / 3, extent, (nrois, 2))        # some ROIs past the edges
    hi = lo + rng.uniform(-2, extent / 2, (nrois, 2))        # some inverted or tiny
    rois = np.concatenate([rng.integers(0, 2, (nrois, 1)), lo, hi], 1).astype(np.float32)
    node = S.ROIPooling(S.var("data"), S.var("rois"), pooled_size=pooled, spatial_scale=scale,
                        name="pool")
    g = node.graph
    from mxc.compiler.ir import Entry
    g.outputs.append(Entry(g.outputs[0].node, 1))             # the hidden argmax output too
    got, got_arg = run_graph(g, {"data": data, "rois": rois})
    want, want_arg = _old_roi_pooling(data, rois, pooled, scale)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_arg, want_arg)
