"""Sliding-window patch extraction: ``im2col`` and its adjoint ``col2im``.

``im2col(data (N, C, H, W))`` -> ``(N, C*kh*kw, L)``: column ``l`` (output
positions row-major) holds the ``kernel``-sized block at that position,
ordered channel, kernel row, kernel column; ``stride``/``dilate``/``pad`` as in
Convolution.  ``col2im(data (N, C*kh*kw, L), output_size=(H, W))`` scatters the
blocks back and sums overlaps.  Only 2-D spatial input runs (as on MXNet's CPU).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape, merge_into
from .registry import Attr, OpDef, register_op, shape_error, to_shape


class _PatchOp(OpDef):
    attrs = {
        "kernel": Attr(to_shape),
        "stride": Attr(to_shape, ()),
        "dilate": Attr(to_shape, ()),
        "pad": Attr(to_shape, ()),
    }

    def validate(self, p):
        if len(p.kernel) != 2:
            raise attr_error(p, "kernel",
                             "only 2-D kernels are supported (as on MXNet's CPU)", op=self)
        for name in ("stride", "dilate", "pad"):
            if p[name] and len(p[name]) != 2:
                raise attr_error(p, name, "must have 2 entries like kernel", op=self)

    def geometry(self, p, h: int, w: int):
        """(stride, dilate, pad, out_h, out_w) for an ``h x w`` image."""
        stride = p.stride or (1, 1)
        dilate = p.dilate or (1, 1)
        pad = p.pad or (0, 0)
        outs = []
        for size, k, s, d, pd in zip((h, w), p.kernel, stride, dilate, pad):
            span = d * (k - 1) + 1
            if size + 2 * pd < span:
                raise shape_error(p, f"kernel {p.kernel} (dilated) exceeds the padded input "
                                     f"{h}x{w}")
            outs.append((size + 2 * pd - span) // s + 1)
        return stride, dilate, pad, outs[0], outs[1]

    def gather_index(self, p, c: int, h: int, w: int):
        """Flat indices into the padded ``(C, H+2ph, W+2pw)`` image for every column entry."""
        (sh, sw), (dh, dw), (ph, pw), oh, ow = self.geometry(p, h, w)
        kh, kw = p.kernel
        ch = np.arange(c)[:, None, None, None, None]
        ki = np.arange(kh)[None, :, None, None, None]
        kj = np.arange(kw)[None, None, :, None, None]
        oi = np.arange(oh)[None, None, None, :, None]
        oj = np.arange(ow)[None, None, None, None, :]
        rows = oi * sh + ki * dh
        cols = oj * sw + kj * dw
        hp, wp = h + 2 * ph, w + 2 * pw
        flat = (ch * hp + rows) * wp + cols
        return flat.reshape(c * kh * kw, oh * ow), (hp, wp), (ph, pw)


@register_op("im2col")
class Im2col(_PatchOp):
    def infer_shape(self, p, in_shapes, out_shapes):
        outs = list(out_shapes)
        d = in_shapes[0]
        if d is not None:
            if len(d) != 4:
                raise shape_error(p, f"data must be (N, C, H, W), got {fmt_shape(d)}")
            if all(x is not None for x in d):
                _, _, _, oh, ow = self.geometry(p, d[2], d[3])
                merge_into(p, outs, 0, (d[0], d[1] * p.kernel[0] * p.kernel[1], oh * ow),
                           "output")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        n, c, h, w = x.shape
        index, _, (ph, pw) = self.gather_index(p, c, h, w)
        padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))).reshape(n, -1)
        return [padded[:, index]]


@register_op("col2im")
class Col2im(_PatchOp):
    attrs = dict(_PatchOp.attrs, output_size=Attr(to_shape))

    def validate(self, p):
        super().validate(p)
        if len(p.output_size) != 2:
            raise attr_error(p, "output_size", "must be (H, W)", op=self)

    def infer_shape(self, p, in_shapes, out_shapes):
        outs = list(out_shapes)
        d = in_shapes[0]
        if d is not None:
            if len(d) != 3:
                raise shape_error(p, f"data must be (N, C*kh*kw, L), got {fmt_shape(d)}")
            block = p.kernel[0] * p.kernel[1]
            if d[1] is not None and d[1] % block:
                raise shape_error(p, f"axis 1 of {fmt_shape(d)} is not a multiple of the "
                                     f"kernel size {block}")
            _, _, _, oh, ow = self.geometry(p, *p.output_size)
            if d[2] is not None and d[2] != oh * ow:
                raise shape_error(p, f"axis 2 of {fmt_shape(d)} must be {oh * ow} blocks for "
                                     f"output_size {p.output_size}")
            c = None if d[1] is None else d[1] // block
            merge_into(p, outs, 0, (d[0], c) + tuple(p.output_size), "output")
        return list(in_shapes), outs

    def scatter_sources(self, p, c: int) -> np.ndarray:
        """For each position of the padded ``(C, H+2ph, W+2pw)`` image, the flat column
        entries that add into it, padded with ``-1`` (the gather form of col2im)."""
        h, w = p.output_size
        index, (hp, wp), _ = self.gather_index(p, c, h, w)
        target = index.reshape(-1)
        order = np.argsort(target, kind="stable")
        counts = np.bincount(target, minlength=c * hp * wp)
        width = max(int(counts.max(initial=0)), 1)
        sources = np.full((c * hp * wp, width), -1, dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        slot = np.arange(target.size) - np.repeat(starts, counts)
        sources[target[order], slot] = order
        return sources

    def forward(self, p, inputs, ctx):
        cols = inputs[0]
        n = cols.shape[0]
        c = cols.shape[1] // (p.kernel[0] * p.kernel[1])
        h, w = p.output_size
        index, (hp, wp), (ph, pw) = self.gather_index(p, c, h, w)
        acc = np.zeros((n, c * hp * wp), dtype=np.float64)
        for b in range(n):
            np.add.at(acc[b], index.reshape(-1), cols[b].reshape(-1).astype(np.float64))
        out = acc.reshape(n, c, hp, wp)[:, :, ph:ph + h, pw:pw + w]
        return [np.ascontiguousarray(out).astype(cols.dtype)]
