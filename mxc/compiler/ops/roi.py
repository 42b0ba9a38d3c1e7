"""Region-of-interest pooling: ROIPooling (max) and _contrib_ROIAlign (bilinear average).

``rois`` is ``(R, 5)``: ``[batch_index, x1, y1, x2, y2]`` in image coordinates,
mapped onto the feature map by ``spatial_scale``.  Reference kernels loop over
ROIs (few) and vectorise the per-pixel work.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import AttributeInvalidError
from .common import cast_to, compute_dtype, fmt_shape, merge_all
from .registry import Attr, OpDef, register_op, shape_error, to_bool, to_float, to_int, to_shape


def _check_pool_attrs(p, op):
    if len(p.pooled_size) != 2 or min(p.pooled_size) <= 0:
        raise AttributeInvalidError(
            f"operator {op} (node {p.node_ref}): attribute pooled_size={p.pooled_size} "
            f"must be two positive integers (h, w)")
    if not 0.0 <= p.spatial_scale <= 1.0:
        raise AttributeInvalidError(
            f"operator {op} (node {p.node_ref}): attribute spatial_scale="
            f"{p.spatial_scale} must be in [0, 1]")


def _roi_shapes(p, in_shapes, out_shapes, channel_div=1):
    d, r = in_shapes
    if d is not None and len(d) != 4:
        raise shape_error(p, f"data must be 4-D (batch, channel, height, width), got "
                             f"{fmt_shape(d)}")
    if r is not None and (len(r) != 2 or (r[1] is not None and r[1] != 5)):
        raise shape_error(p, f"rois must be (num_rois, 5), got {fmt_shape(r)}")
    if d is None or r is None:
        return None
    c = d[1]
    if c is not None and channel_div > 1:
        if c % channel_div:
            raise shape_error(p, f"data channels ({c}) must be divisible by "
                                 f"pooled_size[0]*pooled_size[1] ({channel_div}) when "
                                 f"position_sensitive=True")
        c //= channel_div
    out = (r[0], c) + tuple(p.pooled_size)
    return [merge_all(p, [out, o], "output") for o in out_shapes]


def _c_round(x):
    """C ``round``: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


@register_op("ROIPooling")
class ROIPooling(OpDef):
    """Max pooling over each ROI split into ``pooled_size`` bins.

    ROI corners are rounded (half away from zero) after scaling; empty bins
    give 0.  The hidden second output holds the argmax position ``h*W + w``
    inside the channel (-1 for empty bins), as a float.
    """

    attrs = {
        "pooled_size": Attr(to_shape),
        "spatial_scale": Attr(to_float),
    }
    arguments = ("data", "rois")

    def validate(self, p):
        _check_pool_attrs(p, "ROIPooling")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "maxidx"]

    def infer_shape(self, p, in_shapes, out_shapes):
        outs = _roi_shapes(p, in_shapes, out_shapes)
        return list(in_shapes), outs if outs is not None else list(out_shapes)

    def forward(self, p, inputs, ctx):
        data0, rois0 = inputs
        dt = compute_dtype(data0.dtype)
        data = data0.astype(dt, copy=False)
        rois = rois0.astype(dt, copy=False)
        n, c, h, w = data.shape
        ph, pw = p.pooled_size
        scale = dt.type(p.spatial_scale)
        out = np.zeros((rois.shape[0], c, ph, pw), dtype=dt)
        arg = np.full((rois.shape[0], c, ph, pw), -1, dtype=dt)
        for r, roi in enumerate(rois):
            b = int(roi[0])
            if not 0 <= b < n:
                raise shape_error(p, f"roi {r} has batch index {b} outside [0, {n})")
            x1, y1, x2, y2 = (int(v) for v in _c_round(roi[1:5] * scale))
            roi_h = max(y2 - y1 + 1, 1)
            roi_w = max(x2 - x1 + 1, 1)
            bin_h = dt.type(roi_h) / dt.type(ph)
            bin_w = dt.type(roi_w) / dt.type(pw)
            hb = [(min(max(int(math.floor(dt.type(i) * bin_h)) + y1, 0), h),
                   min(max(int(math.ceil(dt.type(i + 1) * bin_h)) + y1, 0), h)) for i in range(ph)]
            wb = [(min(max(int(math.floor(dt.type(j) * bin_w)) + x1, 0), w),
                   min(max(int(math.ceil(dt.type(j + 1) * bin_w)) + x1, 0), w)) for j in range(pw)]
            _max_pool_bins(data[b], hb, wb, out[r], arg[r])
        return [cast_to(out, data0.dtype), cast_to(arg, data0.dtype)]


def _max_pool_bins(img, hb, wb, out, arg) -> None:
    """Max (and its position ``h*W + w``) over the bins ``hb[i] x wb[j]`` of *img*
    (C, H, W) into *out*/*arg* (C, ph, pw); empty bins are left alone.

    Separable: the maximum of each row segment ``wb[j]`` first, then of those over
    the rows ``hb[i]`` -- the same element a row-major ``argmax`` over the bin
    picks (the first of equal maxima, the first NaN), in ph + pw vector operations
    instead of ph * pw."""
    cols = [j for j, (ws, we) in enumerate(wb) if we > ws]
    rows = [i for i, (hs, he) in enumerate(hb) if he > hs]
    if not cols or not rows:
        return
    lo, hi = min(hb[i][0] for i in rows), max(hb[i][1] for i in rows)
    c = img.shape[0]
    colmax = np.empty((c, hi - lo, len(cols)), dtype=img.dtype)
    colarg = np.empty((c, hi - lo, len(cols)), dtype=np.int64)
    for k, j in enumerate(cols):
        ws, we = wb[j]
        seg = img[:, lo:hi, ws:we]
        a = seg.argmax(axis=2)
        colarg[:, :, k] = a + ws
        colmax[:, :, k] = np.take_along_axis(seg, a[..., None], axis=2)[..., 0]
    width = img.shape[2]
    for i in rows:
        hs, he = hb[i]
        seg = colmax[:, hs - lo:he - lo]                        # (C, rows of the bin, cols)
        a = seg.argmax(axis=1)                                  # (C, cols)
        out[:, i, cols] = np.take_along_axis(seg, a[:, None], axis=1)[:, 0]
        wpos = np.take_along_axis(colarg[:, hs - lo:he - lo], a[:, None], axis=1)[:, 0]
        arg[:, i, cols] = (a + hs) * width + wpos


def _align_axis_weights(start, bin_size, pooled, grid, size):
    """Bilinear weights (pooled*grid, size) of the sample points along one axis.

    A row is all zero when the sample lies outside ``[-1, size]``.
    """
    f = np.float32
    pos = np.arange(pooled, dtype=f)[:, None] * bin_size
    frac = ((np.arange(grid, dtype=f) + f(0.5)) * bin_size / f(grid))[None, :]
    v = (start + pos + frac).astype(f).ravel()
    wts = np.zeros((v.size, size), dtype=f)
    inside = (v >= -1.0) & (v <= size)
    v = np.where(v <= 0, f(0), v).astype(f)
    low = v.astype(np.int64)
    top = low >= size - 1
    low = np.where(top, size - 1, low)
    high = np.where(top, size - 1, low + 1)
    v = np.where(top, low.astype(f), v).astype(f)
    lh = (v - low.astype(f)).astype(f)
    hh = (f(1) - lh).astype(f)
    rows = np.nonzero(inside)[0]
    np.add.at(wts, (rows, low[rows]), hh[rows])
    np.add.at(wts, (rows, high[rows]), lh[rows])
    return wts


def _bilinear_samples(img: np.ndarray, wy: np.ndarray, wx: np.ndarray) -> np.ndarray:
    """``wy (Y, H) @ img (C, H, W) @ wx.T (W, X)`` -> ``(C, Y, X)``: every channel's
    weighted sums, as two single matrix products over the ROI's window.

    Only the rows and columns some weight reads (a few cells for a typical ROI)
    take part; the rest of the weights are zero.  Folding the channels into the
    matrices makes each product one GEMM instead of C small ones (numpy runs a
    stacked ``matmul`` matrix by matrix).  MXNet adds sample by sample; these sums
    are reassociated, equal to float rounding of the magnitudes summed.
    """
    c = img.shape[0]
    rows = np.flatnonzero(wy.any(axis=0))
    cols = np.flatnonzero(wx.any(axis=0))
    if rows.size == 0 or cols.size == 0:
        return np.zeros((c, wy.shape[0], wx.shape[0]), dtype=img.dtype)
    y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    win = img[:, y0:y1, x0:x1]
    h, w = win.shape[1:]
    t = win.reshape(c * h, w) @ wx[:, x0:x1].T                       # (C*h, X)
    t = t.reshape(c, h, -1).transpose(1, 0, 2).reshape(h, -1)        # (h, C*X)
    s = wy[:, y0:y1] @ t                                             # (Y, C*X)
    return s.reshape(wy.shape[0], c, wx.shape[0]).transpose(1, 0, 2)


@register_op("_contrib_ROIAlign")
class ROIAlign(OpDef):
    """ROI Align: average of ``sample_ratio``^2 (adaptive when -1) bilinear
    samples per bin.

    ``aligned=True`` shifts ROI corners by -0.5 pixel (continuous coordinates)
    and keeps ROI sizes unclamped; otherwise ROI sizes are at least 1.
    ``position_sensitive`` reads channel ``c*ph*pw + i*pw + j`` for bin (i, j).
    ROIs with a negative batch index give zeros.
    """

    attrs = {
        "pooled_size": Attr(to_shape),
        "spatial_scale": Attr(to_float),
        "sample_ratio": Attr(to_int, -1),
        "position_sensitive": Attr(to_bool, False),
        "aligned": Attr(to_bool, False),
    }
    arguments = ("data", "rois")

    def validate(self, p):
        _check_pool_attrs(p, "_contrib_ROIAlign")

    def output_names(self, p):
        return ["output"]

    def infer_shape(self, p, in_shapes, out_shapes):
        div = p.pooled_size[0] * p.pooled_size[1] if p.position_sensitive else 1
        outs = _roi_shapes(p, in_shapes, out_shapes, div)
        return list(in_shapes), outs if outs is not None else list(out_shapes)

    def forward(self, p, inputs, ctx):
        data0, rois0 = inputs
        f = np.float32
        data = data0.astype(np.float64 if data0.dtype == np.float64 else f, copy=False)
        rois = rois0.astype(f, copy=False)
        n, c_in, h, w = data.shape
        ph, pw = p.pooled_size
        c_out = c_in // (ph * pw) if p.position_sensitive else c_in
        out = np.zeros((rois.shape[0], c_out, ph, pw), dtype=data.dtype)
        scale = f(p.spatial_scale)
        offset = f(0.5) if p.aligned else f(0)
        for r, roi in enumerate(rois):
            b = int(roi[0])
            if b < 0:
                continue
            x1, y1, x2, y2 = ((roi[1:5] * scale).astype(f) - offset).astype(f)
            roi_w = f(x2 - x1)
            roi_h = f(y2 - y1)
            if p.aligned:
                if not (roi_w > 0 and roi_h > 0):
                    raise shape_error(p, f"roi {r} has a non-positive size with aligned=True")
            else:
                roi_w = max(roi_w, f(1))
                roi_h = max(roi_h, f(1))
            bin_h = f(roi_h / f(ph))
            bin_w = f(roi_w / f(pw))
            gh = p.sample_ratio if p.sample_ratio > 0 else int(math.ceil(f(roi_h / f(ph))))
            gw = p.sample_ratio if p.sample_ratio > 0 else int(math.ceil(f(roi_w / f(pw))))
            wy = _align_axis_weights(y1, bin_h, ph, gh, h).astype(data.dtype)
            wx = _align_axis_weights(x1, bin_w, pw, gw, w).astype(data.dtype)
            count = data.dtype.type(gh * gw)
            # a bin's samples are summed through their weights: (ph*gh, H) -> (ph, H)
            wy = wy.reshape(ph, gh, h).sum(axis=1)
            wx = wx.reshape(pw, gw, w).sum(axis=1)
            pooled = _bilinear_samples(data[b], wy, wx) / count        # (C_in, ph, pw)
            if p.position_sensitive:
                pooled = pooled.reshape(c_out, ph, pw, ph, pw)
                ii, jj = np.meshgrid(np.arange(ph), np.arange(pw), indexing="ij")
                pooled = pooled[:, ii, jj, ii, jj]
            out[r] = pooled
        return [cast_to(out, data0.dtype)]
