"""Correlation (FlowNet cost volume) and _contrib_DeformableConvolution."""

from __future__ import annotations

import math

import numpy as np

from .common import attr_error, cast_to, compute_dtype, fmt_shape, merge_all
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_int,
                       to_shape)


# ---------------------------------------------------------------------------
# Correlation
# ---------------------------------------------------------------------------
@register_op("Correlation")
class Correlation(OpDef):
    """Correlation of two feature maps over a (2r+1)^2 displacement grid.

    ``out[n, d, i, j] = mean over kernel window and channels of
    data1[y1, x1] * data2[y1 + dy, x1 + dx]`` (or ``|a - b|`` when
    ``is_multiply=False``), with both inputs zero-padded by ``pad_size`` and
    ``(y1, x1) = (i, j) * stride1 + max_displacement``.  Two hidden outputs hold
    the padded inputs in NHWC layout.
    """

    attrs = {
        "kernel_size": Attr(to_int, 1),
        "max_displacement": Attr(to_int, 1),
        "stride1": Attr(to_int, 1),
        "stride2": Attr(to_int, 1),
        "pad_size": Attr(to_int, 0),
        "is_multiply": Attr(to_bool, True),
    }
    arguments = ("data1", "data2")

    def validate(self, p):
        for key in ("stride1", "stride2"):
            if p[key] < 1:
                raise attr_error(p, key, "must be >= 1", op="Correlation")
        for key in ("kernel_size", "max_displacement", "pad_size"):
            if p[key] < 0:
                raise attr_error(p, key, "must be >= 0", op="Correlation")
        if p.kernel_size % 2 == 0:
            raise attr_error(p, "kernel_size", "must be odd", op="Correlation")

    def num_outputs(self, p):
        return 3

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "tmp1", "tmp2"]

    @staticmethod
    def _geometry(p, h, w):
        ph, pw = h + 2 * p.pad_size, w + 2 * p.pad_size
        border = p.max_displacement + (p.kernel_size - 1) // 2
        th = math.ceil((ph - 2 * border) / p.stride1)
        tw = math.ceil((pw - 2 * border) / p.stride1)
        radius = p.max_displacement // p.stride2
        return ph, pw, th, tw, radius

    def infer_shape(self, p, in_shapes, out_shapes):
        d1, d2 = in_shapes
        for name, s in (("data1", d1), ("data2", d2)):
            if s is not None and len(s) != 4:
                raise shape_error(p, f"{name} must be 4-D, got {fmt_shape(s)}")
        if d1 is None or d1[2] is None or d1[3] is None:
            return list(in_shapes), list(out_shapes)
        ph, pw, th, tw, radius = self._geometry(p, d1[2], d1[3])
        if th < 1 or tw < 1:
            raise shape_error(p, "the neighbourhood and kernel do not fit in the padded input")
        grid = 2 * radius + 1
        outs = [(d1[0], grid * grid, th, tw), (d1[0], ph, pw, d1[1]), (d1[0], ph, pw, d1[1])]
        return list(in_shapes), [merge_all(p, [o, k], "output") for o, k in zip(outs, out_shapes)]

    def forward(self, p, inputs, ctx):
        a0, b0 = inputs
        dt = compute_dtype(a0.dtype)
        n, c, h, w = a0.shape
        ps = p.pad_size
        _, _, th, tw, radius = self._geometry(p, h, w)
        grid = 2 * radius + 1
        t1 = np.pad(a0.astype(dt, copy=False).transpose(0, 2, 3, 1),
                    ((0, 0), (ps, ps), (ps, ps), (0, 0)))
        t2 = np.pad(b0.astype(dt, copy=False).transpose(0, 2, 3, 1),
                    ((0, 0), (ps, ps), (ps, ps), (0, 0)))
        k, s1, md = p.kernel_size, p.stride1, p.max_displacement
        out = np.zeros((n, grid * grid, th, tw), dtype=dt)
        span_h = (th - 1) * s1 + 1
        span_w = (tw - 1) * s1 + 1
        for tc in range(grid * grid):
            dx = (tc % grid - radius) * p.stride2
            dy = (tc // grid - radius) * p.stride2
            acc = np.zeros((n, th, tw), dtype=dt)
            for kh in range(k):
                for kw in range(k):
                    y1, x1 = md + kh, md + kw
                    a = t1[:, y1:y1 + span_h:s1, x1:x1 + span_w:s1, :]
                    b = t2[:, y1 + dy:y1 + dy + span_h:s1, x1 + dx:x1 + dx + span_w:s1, :]
                    acc += (a * b).sum(-1) if p.is_multiply else np.abs(a - b).sum(-1)
            out[:, tc] = acc / dt.type(k * k * c)
        return [cast_to(out, a0.dtype), cast_to(t1, a0.dtype), cast_to(t2, a0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_DeformableConvolution
# ---------------------------------------------------------------------------
def _deformable_sample(img, rows, cols):
    """Bilinear samples of ``img`` (C, H, W) at float positions (P,) -> (C, P).

    MXNet's CPU rule: points outside ``[0, H) x [0, W)`` read 0; at the last
    row/column the high neighbour collapses onto the low one.
    """
    c, h, w = img.shape
    dt = img.dtype
    ok = (rows >= 0) & (cols >= 0) & (rows < h) & (cols < w)
    r = np.where(ok, rows, 0).astype(dt)
    q = np.where(ok, cols, 0).astype(dt)
    r_lo = np.floor(r).astype(np.int64)
    q_lo = np.floor(q).astype(np.int64)
    r_top = r_lo >= h - 1
    q_top = q_lo >= w - 1
    r_hi = np.where(r_top, h - 1, r_lo + 1)
    q_hi = np.where(q_top, w - 1, q_lo + 1)
    r = np.where(r_top, r_lo.astype(dt), r)
    q = np.where(q_top, q_lo.astype(dt), q)
    lh = (r - r_lo).astype(dt)
    lw = (q - q_lo).astype(dt)
    hh = (1 - lh).astype(dt)
    hw = (1 - lw).astype(dt)
    v = (hh * hw * img[:, r_lo, q_lo] + hh * lw * img[:, r_lo, q_hi]
         + lh * hw * img[:, r_hi, q_lo] + lh * lw * img[:, r_hi, q_hi])
    return np.where(ok, v, 0).astype(dt)


@register_op("_contrib_DeformableConvolution")
class DeformableConvolution(OpDef):
    """2-D deformable convolution (Dai et al. 2017).

    ``offset`` is ``(N, 2*kh*kw*num_deformable_group, OH, OW)``: for kernel tap
    ``t = i*kw + j`` of deformable group ``g``, channels ``g*2*kh*kw + 2t`` and
    ``+1`` are the row and column displacements.  Weight is
    ``(num_filter, C/num_group, kh, kw)``.
    """

    attrs = {
        "kernel": Attr(to_shape),
        "stride": Attr(to_shape, ()),
        "dilate": Attr(to_shape, ()),
        "pad": Attr(to_shape, ()),
        "num_filter": Attr(to_int),
        "num_group": Attr(to_int, 1),
        "num_deformable_group": Attr(to_int, 1),
        "workspace": Attr(to_int, 1024),
        "no_bias": Attr(to_bool, False),
        "layout": Attr(optional(enum("NCW", "NCHW", "NCDHW")), None),
    }

    def validate(self, p):
        op = "_contrib_DeformableConvolution"
        if len(p.kernel) != 2:
            raise attr_error(p, "kernel", "must be 2-D (h, w); only 2-D deformable "
                                               "convolution exists", op=op)
        for key in ("stride", "dilate", "pad"):
            if len(p[key]) not in (0, 2):
                raise attr_error(p, key, "must be empty or have 2 entries", op=op)
        if not 1 <= p.num_filter <= 100000:
            raise attr_error(p, "num_filter", "must be in [1, 100000]", op=op)
        for key in ("num_group", "num_deformable_group"):
            if p[key] < 1:
                raise attr_error(p, key, "must be >= 1", op=op)
        if p.num_filter % p.num_group:
            raise attr_error(p, "num_filter", f"must be divisible by num_group="
                                                   f"{p.num_group}", op=op)
        if p.layout not in (None, "NCHW"):
            raise attr_error(p, "layout", "must be NCHW for a 2-D kernel", op=op)

    def input_names(self, p):
        return ["data", "offset", "weight"] + ([] if p.no_bias else ["bias"])

    @staticmethod
    def _conv(p):
        stride = p.stride or (1, 1)
        dilate = p.dilate or (1, 1)
        pad = p.pad or (0, 0)
        return stride, dilate, pad

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        d, off = ins[0], ins[1]
        for name, s in (("data", d), ("offset", off)):
            if s is not None and len(s) != 4:
                raise shape_error(p, f"{name} must be 4-D, got {fmt_shape(s)}")
        kh, kw = p.kernel
        stride, dilate, pad = self._conv(p)
        out = out_shapes[0]
        if d is not None and d[1] is not None:
            c = d[1]
            if c % p.num_group or c % p.num_deformable_group:
                raise shape_error(p, f"data channels ({c}) must be divisible by num_group "
                                     f"and num_deformable_group")
            ins[2] = merge_all(p, [(p.num_filter, c // p.num_group, kh, kw), ins[2]], "weight")
        if not p.no_bias:
            ins[3] = merge_all(p, [(p.num_filter,), ins[3]], "bias")

        def extent(size, i):
            if size is None:
                return None
            return (size + 2 * pad[i] - (dilate[i] * ((kh, kw)[i] - 1) + 1)) // stride[i] + 1
        if d is not None:
            o = (d[0], p.num_filter, extent(d[2], 0), extent(d[3], 1))
            if any(v is not None and v <= 0 for v in o[2:]):
                raise shape_error(p, f"the kernel does not fit in data {fmt_shape(d)}")
            out = merge_all(p, [o, out], "output")
        if out is not None and ins[0] is not None:
            # MXNet back-fills the batch, and the spatial extents where the stride is 1
            back = [out[0], None, None, None]
            for i in range(2):
                if stride[i] == 1 and out[2 + i] is not None:
                    back[2 + i] = out[2 + i] + dilate[i] * ((kh, kw)[i] - 1) - 2 * pad[i]
            ins[0] = merge_all(p, [tuple(back), ins[0]], "data")
        if out is not None and off is not None:
            # checked, not filled in: MXNet never infers the offset shape
            want_off = (out[0], 2 * kh * kw * p.num_deformable_group, out[2], out[3])
            merge_all(p, [want_off, off], "offset")
        return ins, [out]

    #: bilinear sampler ``(img (C, H, W), rows (P,), cols (P,)) -> (C, P)``
    sample = staticmethod(_deformable_sample)

    def split_inputs(self, inputs):
        """(data, offset, mask or None, weight, bias or None) from the node's inputs."""
        data, offset, weight, *bias = inputs
        return data, offset, None, weight, (bias[0] if bias else None)

    def forward(self, p, inputs, ctx):
        data0, offset, mask, weight, bias = self.split_inputs(inputs)
        dt = compute_dtype(data0.dtype)
        data, offset, weight = (x.astype(dt, copy=False) for x in (data0, offset, weight))
        n, c, h, w = data.shape
        kh, kw = p.kernel
        (sh, sw), (dh, dw), (ph, pw) = self._conv(p)
        oh, ow = offset.shape[2], offset.shape[3]
        taps = kh * kw
        dg = p.num_deformable_group
        cpg = c // dg
        base_r = (np.arange(oh) * sh - ph)[:, None].astype(dt)
        base_c = (np.arange(ow) * sw - pw)[None, :].astype(dt)
        g = p.num_group
        f = p.num_filter
        wmat = weight.reshape(g, f // g, (c // g) * taps)
        out = np.empty((n, f, oh * ow), dtype=dt)
        for b in range(n):
            col = np.empty((c, taps, oh * ow), dtype=dt)
            for grp in range(dg):
                img = data[b, grp * cpg:(grp + 1) * cpg]
                for t in range(taps):
                    i, j = divmod(t, kw)
                    ch = grp * 2 * taps + 2 * t
                    rows = base_r + dt.type(i * dh) + offset[b, ch]
                    cols = base_c + dt.type(j * dw) + offset[b, ch + 1]
                    vals = type(self).sample(img, rows.ravel(), cols.ravel())
                    if mask is not None:
                        vals = vals * mask[b, grp * taps + t].astype(dt).ravel()
                    col[grp * cpg:(grp + 1) * cpg, t] = vals
            colg = col.reshape(g, (c // g) * taps, oh * ow)
            out[b] = np.matmul(wmat, colg).reshape(f, oh * ow)
        out = out.reshape(n, f, oh, ow)
        if bias is not None:
            out = out + bias.astype(dt, copy=False)[None, :, None, None]
        return [cast_to(out, data0.dtype)]
