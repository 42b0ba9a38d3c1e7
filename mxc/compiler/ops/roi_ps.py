"""Position-sensitive and rotated ROI pooling: ``_contrib_PSROIPooling``,
``_contrib_DeformablePSROIPooling`` (R-FCN, Deformable ConvNets) and
``_contrib_RROIAlign`` (rotated boxes), MXNet 1.9.1's CPU kernels.

* PSROIPooling: rois ``[batch, x1, y1, x2, y2]`` in image coordinates
  (rounded, scaled by ``spatial_scale``, end + 1); output bin ``(ph, pw)`` of
  output channel ``c`` averages input channel ``(c*G + gh)*G + gw`` over the
  bin's integer window (``G = group_size``, default ``pooled_size``).
* DeformablePSROIPooling: the same channel layout; each bin is shifted by
  ``trans * trans_std * roi size`` (per part, per class) and averages
  ``sample_per_part^2`` bilinear samples (points outside the map skipped).
  A second, hidden output holds the sample counts.
* RROIAlign: rois ``[batch, cx, cy, w, h, angle in degrees]``; each bin
  averages a grid of bilinear samples of the rotated box (``sampling_ratio``
  per axis, or ``ceil(roi size / pooled size)``).

They run on the host (data-dependent windows per ROI).
"""

from __future__ import annotations

import math

import numpy as np

from .common import attr_error, fmt_shape, merge_into
from .registry import Attr, OpDef, register_op, shape_error, to_bool, to_float, to_int, to_shape

F32 = np.float32


def _check_4d(p, data, rois, width: int):
    if data is not None and len(data) != 4:
        raise shape_error(p, f"data must be 4-D (N, C, H, W), got {fmt_shape(data)}")
    if rois is not None and (len(rois) != 2 or rois[1] not in (None, width)):
        raise shape_error(p, f"rois must be (num_rois, {width}), got {fmt_shape(rois)}")


class _PSROIBase(OpDef):
    arguments = ("data", "rois")

    def group(self, p) -> int:
        return p.group_size if p.group_size > 0 else p.pooled_size

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        data, rois = ins[0], ins[1]
        _check_4d(p, data, rois, 5)
        g = self.group(p)
        if data is not None and data[1] is not None and data[1] != p.output_dim * g * g:
            raise shape_error(p, f"data has {data[1]} channels; output_dim * group_size^2 = "
                                 f"{p.output_dim * g * g} are needed")
        if rois is not None:
            merge_into(p, outs, 0, (rois[0], p.output_dim, p.pooled_size, p.pooled_size),
                       "output")
        return ins, outs

    @staticmethod
    def roi_box(p, roi, shift: float):
        """(batch, x0, y0, width, height) of one roi in feature-map coordinates."""
        scale = F32(p.spatial_scale)
        x0 = F32(round(float(roi[1]))) * scale - F32(shift)
        y0 = F32(round(float(roi[2]))) * scale - F32(shift)
        x1 = F32(round(float(roi[3])) + 1.0) * scale - F32(shift)
        y1 = F32(round(float(roi[4])) + 1.0) * scale - F32(shift)
        return int(roi[0]), x0, y0, max(x1 - x0, F32(0.1)), max(y1 - y0, F32(0.1))


@register_op("_contrib_PSROIPooling")
class PSROIPooling(_PSROIBase):
    attrs = {"spatial_scale": Attr(to_float), "output_dim": Attr(to_int),
             "pooled_size": Attr(to_int), "group_size": Attr(to_int, 0)}

    def forward(self, p, inputs, ctx):
        data, rois = inputs
        _, _, h, w = data.shape
        k, g = p.pooled_size, self.group(p)
        out = np.zeros((rois.shape[0], p.output_dim, k, k), dtype=data.dtype)
        for n, roi in enumerate(rois):
            b, x0, y0, rw, rh = self.roi_box(p, roi, 0.0)
            bh, bw = rh / F32(k), rw / F32(k)
            for ph in range(k):
                hs = min(max(math.floor(F32(ph) * bh + y0), 0), h)
                he = min(max(math.ceil(F32(ph + 1) * bh + y0), 0), h)
                gh = min(max(int(math.floor(ph * g / k)), 0), g - 1)
                for pw in range(k):
                    ws = min(max(math.floor(F32(pw) * bw + x0), 0), w)
                    we = min(max(math.ceil(F32(pw + 1) * bw + x0), 0), w)
                    if he <= hs or we <= ws:
                        continue
                    gw = min(max(int(math.floor(pw * g / k)), 0), g - 1)
                    chans = (np.arange(p.output_dim) * g + gh) * g + gw
                    window = data[b, chans, hs:he, ws:we].astype(F32)
                    out[n, :, ph, pw] = window.sum(axis=(1, 2)) / F32((he - hs) * (we - ws))
        return [out]


def _bilinear(img: np.ndarray, x: float, y: float) -> np.ndarray:
    """``img (C, H, W)`` at a point already clamped inside the map."""
    x0, x1, y0, y1 = math.floor(x), math.ceil(x), math.floor(y), math.ceil(y)
    dx, dy = F32(x - x0), F32(y - y0)
    return ((1 - dx) * (1 - dy) * img[:, y0, x0] + (1 - dx) * dy * img[:, y1, x0]
            + dx * (1 - dy) * img[:, y0, x1] + dx * dy * img[:, y1, x1])


@register_op("_contrib_DeformablePSROIPooling")
class DeformablePSROIPooling(_PSROIBase):
    attrs = {"spatial_scale": Attr(to_float), "output_dim": Attr(to_int),
             "group_size": Attr(to_int), "pooled_size": Attr(to_int),
             "part_size": Attr(to_int, 0), "sample_per_part": Attr(to_int, 1),
             "trans_std": Attr(to_float, 0.0), "no_trans": Attr(to_bool, False)}

    def input_names(self, p):
        return ["data", "rois"] + ([] if p.no_trans else ["trans"])

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "top_count"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = super().infer_shape(p, list(in_shapes[:2]), list(out_shapes[:1]))
        ins = list(ins) + list(in_shapes[2:])
        outs = list(outs) + [outs[0]]
        if outs[1] is None:
            outs[1] = out_shapes[1]
        return ins, outs

    def forward(self, p, inputs, ctx):
        data, rois = inputs[0], inputs[1]
        trans = None if p.no_trans else inputs[2].astype(F32)
        _, _, h, w = data.shape
        k, g, spp = p.pooled_size, self.group(p), p.sample_per_part
        part = p.part_size if p.part_size > 0 else k
        classes = 1 if trans is None else trans.shape[1] // 2
        per_class = p.output_dim // classes
        out = np.zeros((rois.shape[0], p.output_dim, k, k), dtype=F32)
        count = np.zeros_like(out)
        for n, roi in enumerate(rois):
            b, x0, y0, rw, rh = self.roi_box(p, roi, 0.5)
            bh, bw = rh / F32(k), rw / F32(k)
            img = data[b].astype(F32)
            for c in range(p.output_dim):
                cls = c // per_class
                for ph in range(k):
                    part_h = int(math.floor(F32(ph) / F32(k) * F32(part)))
                    gh = min(max(int(math.floor(ph * g / k)), 0), g - 1)
                    for pw in range(k):
                        part_w = int(math.floor(F32(pw) / F32(k) * F32(part)))
                        gw = min(max(int(math.floor(pw * g / k)), 0), g - 1)
                        tx = ty = F32(0)
                        if trans is not None:
                            tx = trans[n, 2 * cls, part_h, part_w] * F32(p.trans_std)
                            ty = trans[n, 2 * cls + 1, part_h, part_w] * F32(p.trans_std)
                        ws = F32(pw) * bw + x0 + tx * rw
                        hs = F32(ph) * bh + y0 + ty * rh
                        chan = img[(c * g + gh) * g + gw][None]
                        total, hits = F32(0), 0
                        for ih in range(spp):
                            for iw in range(spp):
                                x = ws + F32(iw) * (bw / F32(spp))
                                y = hs + F32(ih) * (bh / F32(spp))
                                if x < -0.5 or x > w - 0.5 or y < -0.5 or y > h - 0.5:
                                    continue
                                x = min(max(x, F32(0)), F32(w - 1))
                                y = min(max(y, F32(0)), F32(h - 1))
                                total += _bilinear(chan, x, y)[0]
                                hits += 1
                        out[n, c, ph, pw] = total / hits if hits else 0
                        count[n, c, ph, pw] = hits
        return [out.astype(data.dtype), count.astype(data.dtype)]


@register_op("_contrib_RROIAlign")
class RROIAlign(OpDef):
    attrs = {"pooled_size": Attr(to_shape), "spatial_scale": Attr(to_float),
             "sampling_ratio": Attr(to_int, -1)}
    arguments = ("data", "rois")

    def validate(self, p):
        if len(p.pooled_size) != 2:
            raise attr_error(p, "pooled_size", "must be (h, w)", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        data, rois = ins
        _check_4d(p, data, rois, 6)
        if data is not None and rois is not None:
            merge_into(p, outs, 0, (rois[0], data[1]) + tuple(p.pooled_size), "output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        data, rois = inputs
        _, c, h, w = data.shape
        kh, kw = p.pooled_size
        out = np.zeros((rois.shape[0], c, kh, kw), dtype=data.dtype)
        scale = F32(p.spatial_scale)
        for n, roi in enumerate(rois.astype(F32)):
            cx, cy = roi[1] * scale, roi[2] * scale
            rw, rh = max(roi[3] * scale, F32(1)), max(roi[4] * scale, F32(1))
            theta = roi[5] * F32(math.pi / 180.0)
            cos_t, sin_t = F32(math.cos(theta)), F32(math.sin(theta))
            bh, bw = rh / F32(kh), rw / F32(kw)
            gh = p.sampling_ratio if p.sampling_ratio > 0 else math.ceil(rh / kh)
            gw = p.sampling_ratio if p.sampling_ratio > 0 else math.ceil(rw / kw)
            img = data[int(roi[0])].astype(F32)
            for ph in range(kh):
                for pw in range(kw):
                    acc = np.zeros(c, dtype=F32)
                    for iy in range(gh):
                        yy = -rh / 2 + F32(ph) * bh + F32(iy + 0.5) * bh / F32(gh)
                        for ix in range(gw):
                            xx = -rw / 2 + F32(pw) * bw + F32(ix + 0.5) * bw / F32(gw)
                            x = xx * cos_t + yy * sin_t + cx
                            y = yy * cos_t - xx * sin_t + cy
                            if y < -1.0 or y > h or x < -1.0 or x > w:
                                continue
                            acc += _align_sample(img, float(max(x, 0)), float(max(y, 0)))
                    out[n, :, ph, pw] = acc / F32(gh * gw)
        return [out]


def _align_sample(img: np.ndarray, x: float, y: float) -> np.ndarray:
    """ROIAlign's bilinear rule: the high neighbour collapses at the last row/column."""
    _, h, w = img.shape
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = F32(y - y0), F32(x - x0)
    hy, hx = 1 - ly, 1 - lx
    return (hy * hx * img[:, y0, x0] + hy * lx * img[:, y0, x1]
            + ly * hx * img[:, y1, x0] + ly * lx * img[:, y1, x1])
