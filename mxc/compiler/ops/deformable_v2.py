"""``_contrib_ModulatedDeformableConvolution`` (DCNv2, Zhu et al. 2019).

Deformable convolution whose sampled values are also scaled by a learned
``mask`` ``(N, kh*kw*num_deformable_group, OH, OW)`` (channel ``g*kh*kw + t``
for tap ``t`` of deformable group ``g``).  Attributes, weights and offsets are
those of ``_contrib_DeformableConvolution`` (``vision_misc.py``), plus
``im2col_step``.  The bilinear sampling rule is DCNv2's, which differs at the
border from DCNv1's: a point is sampled when it lies in ``(-1, H) x (-1, W)``,
and each of its four neighbours outside the image reads 0.
"""

from __future__ import annotations

import numpy as np

from .common import merge_into
from .registry import Attr, register_op, to_int
from .vision_misc import DeformableConvolution


def dcn_v2_sample(img: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Bilinear samples of ``img (C, H, W)`` at float positions ``(P,)`` -> ``(C, P)``."""
    _, h, w = img.shape
    dt = img.dtype
    inside = (rows > -1) & (cols > -1) & (rows < h) & (cols < w)
    r0 = np.floor(rows).astype(np.int64)
    c0 = np.floor(cols).astype(np.int64)
    lr = (rows - r0).astype(dt)
    lc = (cols - c0).astype(dt)
    total = np.zeros((img.shape[0], rows.size), dtype=dt)
    for dr, wr in ((0, 1 - lr), (1, lr)):
        for dc, wc in ((0, 1 - lc), (1, lc)):
            rr, cc = r0 + dr, c0 + dc
            ok = inside & (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
            vals = img[:, np.clip(rr, 0, h - 1), np.clip(cc, 0, w - 1)]
            total += np.where(ok, vals, 0) * (wr * wc).astype(dt)
    return total


@register_op("_contrib_ModulatedDeformableConvolution")
class ModulatedDeformableConvolution(DeformableConvolution):
    attrs = dict(DeformableConvolution.attrs, im2col_step=Attr(to_int, 64))
    sample = staticmethod(dcn_v2_sample)

    def input_names(self, p):
        return ["data", "offset", "mask", "weight"] + ([] if p.no_bias else ["bias"])

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        mask = ins.pop(2)
        ins, outs = super().infer_shape(p, ins, out_shapes)
        ins.insert(2, mask)
        out = outs[0]
        if out is not None:
            kh, kw = p.kernel
            merge_into(p, ins, 2, (out[0], kh * kw * p.num_deformable_group, out[2], out[3]),
                       "mask")
        return ins, outs

    def split_inputs(self, inputs):
        data, offset, mask, weight, *bias = inputs
        return data, offset, mask, weight, (bias[0] if bias else None)
