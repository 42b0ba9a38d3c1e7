"""Convolution and Deconvolution (1-D, 2-D, 3-D), MXNet 1.9.1 semantics.

Shapes follow MXNet's ConvolutionShape/DeconvolutionShape: the weight (and
bias) shapes are derived from the data shape and the attributes, the output
from the data, and for Convolution the batch size and stride-1 spatial extents
of the data can be recovered from a known output.  Layouts other than the
channels-first default permute data, weight and output the same way MXNet's
``ConvertLayout`` does (NHWC: data (N, H, W, C), weight (F, kh, kw, C/g)).

The reference kernels lower to strided window views plus one ``tensordot``
per group (convolution) and one ``tensordot`` per group plus a scatter-add per
kernel tap (deconvolution); accumulation happens in float32 for float32 data
(float64 for float64), float16 computes in float32 as MXNet's CPU kernels do.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._nn_helpers import (DEFAULT_LAYOUT, LegacySchema, array_from_cf, array_to_cf, expand_tuple,
                          shape_from_cf, shape_to_cf, windows)
from .common import attr_error, cast_to, compute_dtype, fmt_shape, merge_into
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_int, \
    to_shape

_CONV_LAYOUTS = ("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC")
_CUDNN_TUNE = enum("off", "limited_workspace", "fastest")


class _ConvBase(OpDef):
    """What Convolution and Deconvolution share: attributes, arity, geometry."""

    def input_names(self, p):
        return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]

    # -- attribute normalisation (MXNet's param parser) -----------------------------
    def geometry(self, p):
        """(kernel, stride, dilate, pad, layout) with MXNet's empty-tuple defaults filled."""
        nk = len(p.kernel)
        return (tuple(p.kernel), expand_tuple(p.stride, nk, 1), expand_tuple(p.dilate, nk, 1),
                expand_tuple(p.pad, nk, 0), p.layout or DEFAULT_LAYOUT[nk])

    def validate(self, p):
        nk = len(p.kernel)
        if nk not in (1, 2, 3):
            raise attr_error(p, "kernel", f"{nk}-D {self.name} is not supported (kernel must "
                                          f"have 1, 2 or 3 entries, got {p.kernel})")
        for name in ("stride", "dilate", "pad") + (("adj",) if "adj" in self.attrs else ()):
            v = p[name]
            if len(v) and len(v) != nk:
                raise attr_error(p, name, f"must have the same number of dimensions as kernel "
                                          f"{p.kernel}, got {v}")
        kernel, stride, dilate, pad, layout = self.geometry(p)
        if any(k <= 0 for k in kernel):
            raise attr_error(p, "kernel", f"entries must be positive, got {p.kernel}")
        if any(s <= 0 for s in stride):
            raise attr_error(p, "stride", f"entries must be positive, got {stride}")
        if any(d <= 0 for d in dilate):
            raise attr_error(p, "dilate", f"entries must be positive, got {dilate}")
        if any(x < 0 for x in pad):
            raise attr_error(p, "pad", f"entries must be non-negative, got {pad}")
        if p.num_filter < 1:
            raise attr_error(p, "num_filter", f"must be >= 1, got {p.num_filter}")
        if p.num_group < 1:
            raise attr_error(p, "num_group", f"must be >= 1, got {p.num_group}")
        if p.num_filter % p.num_group:
            raise attr_error(p, "num_filter", f"num_filter={p.num_filter} must be divisible by "
                                              f"num_group={p.num_group}")
        if p.workspace < 0:
            raise attr_error(p, "workspace", f"must be >= 0, got {p.workspace}")
        if len(layout) != nk + 2:
            raise attr_error(p, "layout", f"layout {layout} does not fit a {nk}-D kernel "
                                          f"({DEFAULT_LAYOUT[nk]}-like layouts)")
        if nk == 3 and int(np.prod(dilate)) != 1:
            raise attr_error(p, "dilate", f"dilation is not supported in 3-D {self.name}")

    def _check_data(self, p, d):
        nk = len(p.kernel)
        if len(d) != nk + 2:
            raise shape_error(p, f"data must be {nk + 2}-D for a {nk}-D kernel, got "
                                 f"{fmt_shape(d)}")


def _conv_common_attrs(workspace_default: int, no_bias_default: bool) -> dict:
    return {
        "kernel": Attr(to_shape),
        "stride": Attr(to_shape, ()),
        "dilate": Attr(to_shape, ()),
        "pad": Attr(to_shape, ()),
        "num_filter": Attr(to_int),
        "num_group": Attr(to_int, 1),
        "workspace": Attr(to_int, workspace_default),
        "no_bias": Attr(to_bool, no_bias_default),
        "cudnn_tune": Attr(optional(_CUDNN_TUNE), None),
        "cudnn_off": Attr(to_bool, False),
        "layout": Attr(optional(enum(*_CONV_LAYOUTS)), None),
    }


@register_op("Convolution", aliases=("_npx_convolution",))
class Convolution(_ConvBase):
    """N-D cross-correlation; weight (num_filter, C/num_group, *kernel)."""

    attrs = _conv_common_attrs(1024, False)

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = ins[0]
        if d is None:
            return ins, outs
        self._check_data(p, d)
        kernel, stride, dilate, pad, layout = self.geometry(p)
        g, nf = p.num_group, p.num_filter
        dn = list(shape_to_cf(d, layout))
        c = dn[1]
        if c is not None and c % g:
            raise shape_error(p, f"input channels {c} must be divisible by num_group={g}")
        merge_into(p, ins, 1, shape_from_cf((nf, None if c is None else c // g, *kernel),
                                            layout), "weight")
        if not p.no_bias:
            merge_into(p, ins, 2, (nf,), "bias")
        dk = [(k - 1) * dl + 1 for k, dl in zip(kernel, dilate)]
        osp = []
        for i, x in enumerate(dn[2:]):
            if x is None:
                osp.append(None)
                continue
            if dk[i] > x + 2 * pad[i]:
                raise shape_error(p, f"kernel size {dk[i]} (dilated) exceeds input "
                                     f"{fmt_shape(d)} padded by {pad[i]} in spatial dim {i}")
            osp.append((x + 2 * pad[i] - dk[i]) // stride[i] + 1)
        merge_into(p, outs, 0, shape_from_cf((dn[0], nf, *osp), layout), "output")
        # backward: batch size always, spatial extents where the stride is 1
        on = shape_to_cf(outs[0], layout)
        back = [on[0], None]
        for i, o in enumerate(on[2:]):
            back.append(o + dk[i] - 1 - 2 * pad[i] if o is not None and stride[i] == 1 else None)
        merge_into(p, ins, 0, shape_from_cf(tuple(back), layout), "data")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, w = inputs[0], inputs[1]
        kernel, stride, dilate, pad, layout = self.geometry(p)
        dt = compute_dtype(x.dtype)
        xc = array_to_cf(x, layout).astype(dt, copy=False)
        wc = array_to_cf(w, layout).astype(dt, copy=False)
        y = conv_nd(xc, wc, stride, dilate, pad, p.num_group)
        if not p.no_bias:
            y = y + inputs[2].astype(dt, copy=False).reshape((1, -1) + (1,) * len(kernel))
        return [cast_to(array_from_cf(y, layout), ctx.out_dtypes[0] or x.dtype)]


@register_op("Convolution_v1")
class ConvolutionV1(LegacySchema, Convolution):
    """The pre-1.0 Convolution (1-D to 3-D): the same arithmetic as :class:`Convolution`.

    Its schema lacks nothing mxc needs; MXNet 1.9.1 runs it through the
    same im2col kernel, so the results match the modern op bit for bit.
    """

    legacy_attrs = ("kernel", "stride", "dilate", "pad", "num_filter", "num_group", "workspace",
                    "no_bias", "cudnn_tune", "cudnn_off", "layout")


def conv_nd(x: np.ndarray, w: np.ndarray, stride, dilate, pad, groups: int) -> np.ndarray:
    """Channels-first grouped N-D convolution (cross-correlation), no bias.

    x: (N, C, *S); w: (F, C/groups, *K) -> (N, F, *O).
    """
    nsp = x.ndim - 2
    if any(pad):
        x = np.pad(x, [(0, 0), (0, 0)] + [(q, q) for q in pad])
    win = windows(x, w.shape[2:], stride, dilate)  # (N, C, *O, *K)
    n, c = win.shape[:2]
    osp = win.shape[2:2 + nsp]
    f = w.shape[0]
    cg, fg = c // groups, f // groups
    kaxes = tuple(range(2 + nsp, 2 + 2 * nsp))
    parts = []
    for gi in range(groups):
        a = win[:, gi * cg:(gi + 1) * cg]
        b = w[gi * fg:(gi + 1) * fg]
        # contract channel and kernel axes: (N, *O, Fg)
        parts.append(np.tensordot(a, b, axes=((1,) + kaxes, (1,) + tuple(range(2, 2 + nsp)))))
    y = parts[0] if groups == 1 else np.concatenate(parts, axis=-1)
    y = np.moveaxis(y, -1, 1)
    assert y.shape == (n, f) + tuple(osp)
    return np.ascontiguousarray(y)


@register_op("Deconvolution", aliases=("_npx_deconvolution",))
class Deconvolution(_ConvBase):
    """Transposed convolution; weight (C, num_filter/num_group, *kernel), no bias by default."""

    attrs = {
        **_conv_common_attrs(512, True),
        "adj": Attr(to_shape, ()),
        "target_shape": Attr(to_shape, ()),
    }

    def validate(self, p):
        super().validate(p)
        if p.num_filter > 100000:
            raise attr_error(p, "num_filter", f"must be <= 100000, got {p.num_filter}")
        if not 0 <= p.workspace <= 8192:
            raise attr_error(p, "workspace", f"must be in [0, 8192], got {p.workspace}")

    def pad_adj(self, p, spatial):
        """Effective (pad, adj): from target_shape when it is set (MXNet's InferPad)."""
        kernel, stride, dilate, pad, layout = self.geometry(p)
        nk = len(kernel)
        adj = expand_tuple(p.adj, nk, 0)
        if not any(t != 0 for t in p.target_shape):
            return list(pad), list(adj)
        opad, oadj = [None] * nk, [None] * nk
        for i in range(nk):
            if spatial[i] is None:
                continue
            dk = (kernel[i] - 1) * dilate[i] + 1
            total = stride[i] * (spatial[i] - 1) + dk
            tgt = p.target_shape[i] if i < len(p.target_shape) else 0
            if total < tgt:
                raise shape_error(p, f"target_shape {p.target_shape} is too big for input "
                                     f"extent {spatial[i]} in spatial dim {i}")
            total -= tgt
            oadj[i] = total % 2
            opad[i] = (total + 1) // 2
        return opad, oadj

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = ins[0]
        if d is None:
            return ins, outs
        self._check_data(p, d)
        kernel, stride, dilate, pad, layout = self.geometry(p)
        g, nf = p.num_group, p.num_filter
        dn = shape_to_cf(d, layout)
        c = dn[1]
        if c is not None and c % g:
            raise shape_error(p, f"input channels {c} must be divisible by num_group={g}")
        merge_into(p, ins, 1, shape_from_cf((c, nf // g, *kernel), layout), "weight")
        if not p.no_bias:
            merge_into(p, ins, 2, (nf,), "bias")
        opad, oadj = self.pad_adj(p, dn[2:])
        osp = []
        for i, x in enumerate(dn[2:]):
            if oadj[i] is not None and oadj[i] > stride[i] - 1:
                raise shape_error(p, f"adj {oadj[i]} must be smaller than stride {stride[i]} "
                                     f"in spatial dim {i}")
            if x is None or opad[i] is None:
                osp.append(None)
                continue
            dk = (kernel[i] - 1) * dilate[i] + 1
            o = stride[i] * (x - 1) + dk - 2 * opad[i] + oadj[i]
            tgt = p.target_shape[i] if i < len(p.target_shape) else 0
            if len(p.target_shape) >= len(kernel) and tgt > 0 and tgt != o:
                raise shape_error(p, f"target_shape {p.target_shape} cannot be produced from "
                                     f"input {fmt_shape(d)}")
            if o <= 0:
                raise shape_error(p, f"output extent {o} in spatial dim {i} is not positive "
                                     f"(input {fmt_shape(d)}, pad {opad[i]})")
            osp.append(o)
        merge_into(p, outs, 0, shape_from_cf((dn[0], nf, *osp), layout), "output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, w = inputs[0], inputs[1]
        kernel, stride, dilate, _, layout = self.geometry(p)
        dt = compute_dtype(x.dtype)
        xc = array_to_cf(x, layout).astype(dt, copy=False)
        wc = array_to_cf(w, layout).astype(dt, copy=False)
        opad, oadj = self.pad_adj(p, xc.shape[2:])
        y = deconv_nd(xc, wc, stride, dilate, opad, oadj, p.num_group)
        if not p.no_bias:
            y = y + inputs[2].astype(dt, copy=False).reshape((1, -1) + (1,) * len(kernel))
        return [cast_to(array_from_cf(y, layout), ctx.out_dtypes[0] or x.dtype)]


def deconv_nd(x: np.ndarray, w: np.ndarray, stride, dilate, pad, adj, groups: int) -> np.ndarray:
    """Channels-first grouped N-D transposed convolution, no bias.

    x: (N, C, *I); w: (C, F/groups, *K) -> (N, F, *O) with
    ``O = stride*(I-1) + dilate*(K-1) + 1 - 2*pad + adj``.
    """
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    isp = x.shape[2:]
    ksp = w.shape[2:]
    fg = w.shape[1]
    cg = c // groups
    parts = []
    for gi in range(groups):
        # (N, *I, Fg, *K): every input pixel's contribution to every kernel tap
        parts.append(np.tensordot(x[:, gi * cg:(gi + 1) * cg], w[gi * cg:(gi + 1) * cg],
                                  axes=((1,), (0,))))
    cols = parts[0] if groups == 1 else np.concatenate(parts, axis=1 + nsp)
    f = cols.shape[1 + nsp]
    full = [(i - 1) * s + (k - 1) * d + 1 for i, s, k, d in zip(isp, stride, ksp, dilate)]
    osp = [s * (i - 1) + (k - 1) * d + 1 - 2 * q + a
           for i, s, k, d, q, a in zip(isp, stride, ksp, dilate, pad, adj)]
    buf_len = [max(fl, q + o) for fl, q, o in zip(full, pad, osp)]
    buf = np.zeros((n, f, *buf_len), dtype=cols.dtype)
    cols = np.moveaxis(cols, 1 + nsp, 1)  # (N, F, *I, *K)
    for tap in itertools.product(*(range(k) for k in ksp)):
        sl = tuple(slice(t * d, t * d + (i - 1) * s + 1, s)
                   for t, d, i, s in zip(tap, dilate, isp, stride))
        buf[(slice(None), slice(None)) + sl] += cols[(Ellipsis,) + tap]
    crop = tuple(slice(q, q + o) for q, o in zip(pad, osp))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])
