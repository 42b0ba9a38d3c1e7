"""Pooling (max/avg/sum/lp, 1-D/2-D/3-D) and _contrib_AdaptiveAvgPooling2D.

Semantics of MXNet 1.9.1's CPU pooling kernels:

* output extent: ``valid`` floor((x+2p-k)/s)+1, ``full`` ceil((x+2p-k)/s)+1,
  ``same`` (1-D only) ceil((x+2p)/s); ``global_pool`` ignores kernel, stride
  and pad and pools each whole feature map;
* a window starts at ``o*s - p``; values are read only inside the input (max
  ignores padding, sums treat it as zero);
* avg divides by the window clipped to the padded input
  (``min(start+k, x+p) - start`` per axis) when ``count_include_pad`` (the
  default), or by the number of real input cells otherwise (0 cells -> NaN);
* lp pooling is ``(sum x**p) ** (1/p)`` without abs (p in 1, 2, 3; p=3 takes
  the real cube root).

Layouts NWC/NHWC/NDHWC are handled by permuting to channels-first and back.

Like the pip build of MXNet 1.9.1 (oneDNN enabled), max pooling with a 1-3-D
kernel in a channels-first layout has a second, hidden int32 output
``workspace`` (oneDNN's argmax buffer); it only shows in the node's output
count (``node_row_ptr`` of the symbol JSON) and is zeros here.
"""

from __future__ import annotations

import numpy as np

from ._nn_helpers import (LegacySchema, array_from_cf, array_to_cf, expand_tuple, shape_from_cf,
                          shape_to_cf, windows)
from .common import attr_error, cast_to, compute_dtype, fmt_shape, merge_into
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_int, \
    to_shape

_POOL_LAYOUTS = ("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC")
_LAYOUT_BY_NDIM = {3: "NCW", 4: "NCHW", 5: "NCDHW"}


@register_op("Pooling", aliases=("_npx_pooling",))
class Pooling(OpDef):
    attrs = {
        "kernel": Attr(to_shape, ()),
        "pool_type": Attr(enum("max", "avg", "sum", "lp"), "max"),
        "global_pool": Attr(to_bool, False),
        "cudnn_off": Attr(to_bool, False),
        "pooling_convention": Attr(enum("full", "valid", "same"), "valid"),
        "stride": Attr(to_shape, ()),
        "pad": Attr(to_shape, ()),
        "p_value": Attr(optional(to_int), None),
        "count_include_pad": Attr(optional(to_bool), None),
        "layout": Attr(optional(enum(*_POOL_LAYOUTS)), None),
        # MXNet's adaptive-pooling plumbing; it does not change Pooling's own result
        "output_size": Attr(optional(to_shape), None),
    }
    arguments = ("data",)

    def has_workspace(self, p) -> bool:
        """oneDNN max pooling keeps a hidden int32 workspace output."""
        return (p.pool_type == "max" and 1 <= len(p.kernel) <= 3 and p.output_size is None
                and p.layout in (None, "NCW", "NCHW", "NCDHW"))

    def num_outputs(self, p):
        return 2 if self.has_workspace(p) else 1

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "workspace"] if self.has_workspace(p) else ["output"]

    def infer_type(self, p, in_types, out_types):
        dtype = in_types[0] if in_types[0] is not None else out_types[0]
        if dtype is None:
            return list(in_types), list(out_types)
        return [dtype], [dtype, "int32"][:len(out_types)]

    def validate(self, p):
        nk = len(p.kernel)
        if not p.global_pool and nk not in (1, 2, 3):
            raise attr_error(p, "kernel", f"{nk}-D pooling is not supported (kernel must have "
                                          f"1, 2 or 3 entries, got {p.kernel})")
        if any(k <= 0 for k in p.kernel):
            raise attr_error(p, "kernel", f"entries must be positive, got {p.kernel}")
        if any(s <= 0 for s in p.stride):
            raise attr_error(p, "stride", f"entries must be positive, got {p.stride}")
        if nk:
            for name in ("stride", "pad"):
                if len(p[name]) and len(p[name]) != nk:
                    raise attr_error(p, name, f"must have the same length as kernel {p.kernel}, "
                                              f"got {p[name]}")
        if p.pool_type == "lp":
            if p.p_value is None:
                raise attr_error(p, "p_value", "is required for pool_type='lp'")
            if p.p_value not in (1, 2, 3):
                raise attr_error(p, "p_value", f"p value of {p.p_value} is not supported "
                                               f"(1, 2 or 3)")
        if p.pooling_convention == "same" and any(p.pad):
            raise attr_error(p, "pad", "pooling_convention='same' does not allow padding")

    # -- geometry ------------------------------------------------------------------
    def layout(self, p, ndim: int) -> str:
        return p.layout or _LAYOUT_BY_NDIM.get(ndim, "NCHW")

    def geometry(self, p, spatial):
        """(kernel, stride, pad) actually used for channels-first spatial extents."""
        nsp = len(spatial)
        if p.global_pool:
            return tuple(spatial), (1,) * nsp, (0,) * nsp
        return tuple(p.kernel), expand_tuple(p.stride, nsp, 1), expand_tuple(p.pad, nsp, 0)

    def out_extent(self, p, x, k, s, q):
        if x is None:
            return None
        if p.global_pool:
            return 1
        if k > x + 2 * q:
            raise shape_error(p, f"kernel size ({k}) exceeds input ({x} padded to {x + 2 * q})")
        if p.pooling_convention == "valid":
            return 1 + (x + 2 * q - k) // s
        if p.pooling_convention == "full" or len(p.kernel) != 1:
            return 1 + -(-(x + 2 * q - k) // s)
        return -(-(x + 2 * q) // s)  # 'same'

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        outs = list(out_shapes)
        if d is None:
            return list(in_shapes), outs
        if not 3 <= len(d) <= 5:
            raise shape_error(p, f"data must be 3-D (N, C, x), 4-D or 5-D, got {fmt_shape(d)}")
        if not p.global_pool and len(d) != len(p.kernel) + 2:
            raise shape_error(p, f"data must be {len(p.kernel) + 2}-D for kernel {p.kernel}, "
                                 f"got {fmt_shape(d)}")
        if p.pooling_convention == "same" and len(d) != 3:
            raise shape_error(p, "pooling_convention='same' supports 1-D pooling only")
        layout = self.layout(p, len(d))
        if len(layout) != len(d):
            raise shape_error(p, f"layout {layout} does not fit {len(d)}-D data {fmt_shape(d)}")
        dn = shape_to_cf(d, layout)
        spatial = dn[2:]
        if p.global_pool:
            osp = [1] * len(spatial)
        else:
            kernel, stride, pad = self.geometry(p, spatial)
            osp = [self.out_extent(p, x, k, s, q)
                   for x, k, s, q in zip(spatial, kernel, stride, pad)]
        merge_into(p, outs, 0, shape_from_cf((dn[0], dn[1], *osp), layout), "output")
        if len(outs) > 1:
            merge_into(p, outs, 1, outs[0], "workspace output")
        ins = list(in_shapes)
        o = shape_to_cf(outs[0], layout)
        merge_into(p, ins, 0, shape_from_cf((o[0], o[1]) + (None,) * len(spatial), layout),
                   "data")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        layout = self.layout(p, x.ndim)
        xc = array_to_cf(x, layout)
        dt = compute_dtype(x.dtype)
        spatial = xc.shape[2:]
        kernel, stride, pad = self.geometry(p, spatial)
        osp = [self.out_extent(p, n, k, s, q) for n, k, s, q in zip(spatial, kernel, stride, pad)]
        include_pad = True if p.count_include_pad is None else p.count_include_pad
        y = pool_nd(xc.astype(dt, copy=False), kernel, stride, pad, osp, p.pool_type,
                    include_pad, p.p_value or 1)
        out = [cast_to(array_from_cf(y, layout), ctx.out_dtypes[0] or x.dtype)]
        if self.has_workspace(p):
            out.append(np.zeros(out[0].shape, dtype=np.int32))
        return out


def pool_axis_counts(n, k, s, q, o, include_pad):
    """Per-output-position divisor along one axis (MXNet's pool_size factor)."""
    start = np.arange(o) * s - q
    if include_pad:
        return np.minimum(start + k, n + q) - start
    return np.maximum(np.minimum(start + k, n) - np.maximum(start, 0), 0)


@register_op("Pooling_v1")
class PoolingV1(LegacySchema, Pooling):
    """The pre-1.0 Pooling (max/avg/sum): :class:`Pooling`'s arithmetic, one output.

    Its schema has no ``layout``, ``p_value``, ``count_include_pad`` or
    ``cudnn_off``; average pooling counts the padding as the modern op does
    by default.  It never has oneDNN's hidden workspace output.
    """

    legacy_attrs = ("kernel", "pool_type", "global_pool", "pooling_convention", "stride", "pad")
    attrs = {**Pooling.attrs, "pool_type": Attr(enum("max", "avg", "sum"), "max")}

    def has_workspace(self, p) -> bool:
        return False


def pool_nd(x: np.ndarray, kernel, stride, pad, osp, pool_type: str, include_pad: bool,
            p_value: int = 1) -> np.ndarray:
    """Channels-first N-D pooling with MXNet's window/divisor rules."""
    nsp = x.ndim - 2
    spatial = x.shape[2:]
    # pad left by `pad`, right far enough for the last (possibly overhanging) window
    right = [max(q, (o - 1) * s + k - n - q) for n, k, s, q, o in zip(spatial, kernel, stride,
                                                                      pad, osp)]
    widths = [(0, 0), (0, 0)] + [(q, r) for q, r in zip(pad, right)]
    kaxes = tuple(range(2 + nsp, 2 + 2 * nsp))
    osl = (slice(None), slice(None)) + tuple(slice(0, o) for o in osp)
    if pool_type == "max":
        if x.dtype.kind == "f":
            fill = -np.inf
            lowest = np.finfo(x.dtype).min
        else:
            fill = lowest = np.iinfo(x.dtype).min
        xp = np.pad(x, widths, constant_values=fill)
        y = windows(xp, kernel, stride, (1,) * nsp)[osl].max(axis=kaxes)
        # a window lying wholly in the padding yields the dtype's lowest value
        valid = _valid_mask(spatial, kernel, stride, pad, osp)
        if not valid.all():
            y = np.where(valid, y, lowest)
        return y
    xp = np.pad(x, widths)
    if pool_type == "lp" and p_value != 1:
        xp = xp ** p_value
    y = windows(xp, kernel, stride, (1,) * nsp)[osl].sum(axis=kaxes)
    if pool_type == "avg":
        cnt = np.ones((), dtype=np.int64)
        for i, (n, k, s, q, o) in enumerate(zip(spatial, kernel, stride, pad, osp)):
            c = pool_axis_counts(n, k, s, q, o, include_pad)
            cnt = cnt[..., None] * c if i else c
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(cnt == 0, np.nan, y / np.maximum(cnt, 1).astype(y.dtype))
        y = y.astype(x.dtype, copy=False)
    elif pool_type == "lp":
        if p_value == 2:
            y = np.sqrt(y)
        elif p_value == 3:
            y = np.cbrt(y)
    return y


def _valid_mask(spatial, kernel, stride, pad, osp) -> np.ndarray:
    """True where the pooling window overlaps the real input."""
    mask = np.ones((), dtype=bool)
    for i, (n, k, s, q, o) in enumerate(zip(spatial, kernel, stride, pad, osp)):
        c = pool_axis_counts(n, k, s, q, o, include_pad=False) > 0
        mask = mask[..., None] & c if i else c
    return mask


@register_op("_contrib_AdaptiveAvgPooling2D")
class AdaptiveAvgPooling2D(OpDef):
    """Average over bins [floor(i*H/oh), ceil((i+1)*H/oh)) of an NCHW input."""

    attrs = {"output_size": Attr(to_shape, ())}
    arguments = ("data",)

    def validate(self, p):
        if len(p.output_size) > 2:
            raise attr_error(p, "output_size", f"must be an int or (height, width), got "
                                               f"{p.output_size}")
        if any(v <= 0 for v in p.output_size):
            raise attr_error(p, "output_size", f"entries must be positive, got {p.output_size}")

    def out_hw(self, p):
        s = p.output_size
        if not s:
            return 1, 1
        return (s[0], s[0]) if len(s) == 1 else (s[0], s[1])

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        outs = list(out_shapes)
        ins = list(in_shapes)
        if d is not None:
            if len(d) != 4:
                raise shape_error(p, f"data must be 4-D (N, C, H, W), got {fmt_shape(d)}")
            merge_into(p, outs, 0, (d[0], d[1], *self.out_hw(p)), "output")
        if outs[0] is not None:
            merge_into(p, ins, 0, (outs[0][0], outs[0][1], None, None), "data")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        oh, ow = self.out_hw(p)
        y = _adaptive_mean(x.astype(dt, copy=False), 2, oh)
        y = _adaptive_mean(y, 3, ow)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


def _adaptive_mean(x: np.ndarray, axis: int, out: int) -> np.ndarray:
    n = x.shape[axis]
    parts = []
    for i in range(out):
        lo = (i * n) // out
        hi = -(-((i + 1) * n) // out)
        parts.append(np.take(x, range(lo, hi), axis=axis).mean(axis=axis, keepdims=True))
    return np.concatenate(parts, axis=axis)
