"""Spatial resampling: UpSampling, BilinearResize2D, BilinearSampler,
GridGenerator and SpatialTransformer.

All of them work on NCHW images.  The samplers take normalised coordinates in
``[-1, 1]`` (``-1`` is the centre of the first pixel, ``1`` the centre of the
last one) and read zero outside the image.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeInvalidError
from .common import cast_to, compute_dtype, fmt_shape, is_known, merge_all
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool,
                       to_float, to_int, to_shape)


def _f32(x):
    return np.float32(x)


def _need_4d(p, shape, what):
    if shape is not None and len(shape) != 4:
        raise shape_error(p, f"{what} must be 4-D (batch, channel, height, width), "
                             f"got {fmt_shape(shape)}")


def _merge_out(p, inferred, known):
    """Merge an inferred output shape with what the graph already knows."""
    if inferred is None:
        return known
    return merge_all(p, [inferred, known], "output")


# ---------------------------------------------------------------------------
# UpSampling
# ---------------------------------------------------------------------------
def _upsample_nearest(x, sh, sw):
    return np.repeat(np.repeat(x, sh, axis=2), sw, axis=3)


def _deconv_depthwise(x, w, stride, pad):
    """Transposed depthwise convolution (one output channel per input channel).

    ``out[y] += x[iy] * w[ky]`` with ``y = iy * stride + ky - pad``: what
    MXNet's Deconvolution computes with ``num_group == channels``.
    """
    n, c, h, wd = x.shape
    k = w.shape[-1]
    full_h = (h - 1) * stride + k
    full_w = (wd - 1) * stride + k
    full = np.zeros((n, c, full_h, full_w), dtype=x.dtype)
    for ky in range(k):
        for kx in range(k):
            full[:, :, ky:ky + (h - 1) * stride + 1:stride,
                 kx:kx + (wd - 1) * stride + 1:stride] += x * w[:, 0, ky, kx][None, :, None, None]
    out_h = (h - 1) * stride - 2 * pad + k
    out_w = (wd - 1) * stride - 2 * pad + k
    return full[:, :, pad:pad + out_h, pad:pad + out_w]


@register_op("UpSampling")
class UpSampling(OpDef):
    """Nearest-neighbour (1..N inputs) or bilinear (data + weight) upsampling.

    Bilinear mode is MXNet's depthwise Deconvolution with kernel
    ``2*scale - scale % 2``, stride ``scale`` and pad ``ceil((scale-1)/2)``;
    the weight (``(C, 1, k, k)``) is an ordinary input.
    """

    attrs = {
        "scale": Attr(to_int),
        "num_filter": Attr(to_int, 0),
        "sample_type": Attr(enum("nearest", "bilinear")),
        "multi_input_mode": Attr(enum("concat", "sum"), "concat"),
        "num_args": Attr(to_int),
        "workspace": Attr(to_int, 512),
    }

    def validate(self, p):
        if p.scale < 1:
            raise AttributeInvalidError(
                f"operator UpSampling (node {p.node_ref}): attribute scale={p.scale} "
                f"must be >= 1")
        if p.num_args < 1:
            raise AttributeInvalidError(
                f"operator UpSampling (node {p.node_ref}): attribute num_args={p.num_args} "
                f"must be >= 1")
        if not 0 <= p.workspace <= 8192:
            raise AttributeInvalidError(
                f"operator UpSampling (node {p.node_ref}): attribute workspace="
                f"{p.workspace} must be in [0, 8192]")

    def input_names(self, p):
        if p.sample_type == "nearest":
            return [f"arg{i}" for i in range(p.num_args)]
        return ["data", "weight"]

    @staticmethod
    def _kernel(scale):
        return int(2 * scale - scale % 2)

    def infer_shape(self, p, in_shapes, out_shapes):
        s = p.scale
        ins = list(in_shapes)
        for i, shp in enumerate(ins):
            if p.sample_type == "bilinear" and i == 1:
                continue
            _need_4d(p, shp, f"input {i}")
        d = ins[0]
        if p.sample_type == "bilinear":
            if d is None:
                return ins, list(out_shapes)
            k = self._kernel(s)
            ins[1] = merge_all(p, [(d[1], 1, k, k), ins[1]], "weight")
            out = (d[0], d[1], None if d[2] is None else d[2] * s,
                   None if d[3] is None else d[3] * s)
            return ins, [_merge_out(p, out, out_shapes[0])]
        if d is None:
            return ins, list(out_shapes)
        oh = None if d[2] is None else d[2] * s
        ow = None if d[3] is None else d[3] * s
        known_c = []
        for i, shp in enumerate(ins):
            if shp is None:
                continue
            for dim, total in ((2, oh), (3, ow)):
                if shp[dim] is not None and total is not None and total % shp[dim]:
                    raise shape_error(p, f"input {i} extent {shp[dim]} does not divide the "
                                         f"output extent {total}")
            if shp[1] is not None:
                known_c.append(shp[1])
        if p.multi_input_mode == "sum":
            if len(set(known_c)) > 1:
                raise shape_error(p, "all inputs must have the same number of channels when "
                                     "multi_input_mode='sum'")
            channels = known_c[0] if known_c else None
        else:
            channels = sum(known_c) if len(known_c) == len(ins) else None
        out = (d[0], channels, oh, ow)
        return ins, [_merge_out(p, out, out_shapes[0])]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        dt = compute_dtype(x0.dtype)
        if p.sample_type == "bilinear":
            x = x0.astype(dt, copy=False)
            w = inputs[1].astype(dt, copy=False)
            if p.num_filter != x.shape[1]:
                raise shape_error(p, f"bilinear upsampling needs num_filter ({p.num_filter}) "
                                     f"equal to the number of channels ({x.shape[1]})")
            s = p.scale
            pad = int(np.ceil((s - 1) / 2.0))
            y = _deconv_depthwise(x, w, s, pad)
            return [cast_to(y, x0.dtype)]
        oh, ow = x0.shape[2] * p.scale, x0.shape[3] * p.scale
        parts = []
        for x in inputs:
            parts.append(_upsample_nearest(x.astype(dt, copy=False),
                                           oh // x.shape[2], ow // x.shape[3]))
        if len(parts) == 1:
            y = parts[0]
        elif p.multi_input_mode == "sum":
            y = parts[0].copy()
            for part in parts[1:]:
                y += part
        else:
            y = np.concatenate(parts, axis=1)
        return [cast_to(y, x0.dtype)]


# ---------------------------------------------------------------------------
# _contrib_BilinearResize2D
# ---------------------------------------------------------------------------
def resize_axis_weights(in_size, out_size, align_corners):
    """Per output index: low source index, high offset (0/1) and the weight of high."""
    if out_size > 1:
        ratio = (_f32(in_size - 1) / _f32(out_size - 1) if align_corners
                 else _f32(in_size) / _f32(out_size))
    else:
        ratio = _f32(0.0)
    dst = np.arange(out_size)
    if align_corners:
        src = (ratio * dst.astype(np.float32)).astype(np.float32)
    else:
        src = (np.float64(ratio) * (dst + 0.5) - 0.5)
        src = np.where(src < 0, 0.0, src).astype(np.float32)
    low = src.astype(np.int64)
    step = (low < in_size - 1).astype(np.int64)
    lam1 = (src - low.astype(np.float32)).astype(np.float32)
    return low, step, lam1


@register_op("_contrib_BilinearResize2D")
class BilinearResize2D(OpDef):
    """Bilinear resize of NCHW data to a size, a scale, another input's size
    (``mode='like'``) or the nearest even/odd size.

    MXNet quirk kept: in ``mode='size'`` the output width uses ``scale_width``
    whenever ``scale_height`` is given (and ``width`` otherwise).
    """

    attrs = {
        "height": Attr(to_int, 1),
        "width": Attr(to_int, 1),
        "scale_height": Attr(optional(to_float), None),
        "scale_width": Attr(optional(to_float), None),
        "mode": Attr(enum("size", "odd_scale", "like", "to_even_down", "to_even_up",
                          "to_odd_down", "to_odd_up"), "size"),
        "align_corners": Attr(to_bool, True),
    }

    def validate(self, p):
        for key in ("height", "width"):
            if not 1 <= p[key] <= 10000:
                raise AttributeInvalidError(
                    f"operator _contrib_BilinearResize2D (node {p.node_ref}): attribute "
                    f"{key}={p[key]} must be in [1, 10000]")
        need = []
        if p.mode == "odd_scale":
            need = ["scale_height", "scale_width"]
        elif p.mode == "size" and p.scale_height is not None:
            need = ["scale_width"]
        for key in need:
            if p[key] is None:
                raise AttributeInvalidError(
                    f"operator _contrib_BilinearResize2D (node {p.node_ref}): attribute "
                    f"{key} is required with mode={p.mode!r}"
                    + (" and scale_height set" if p.mode == "size" else ""))

    def input_names(self, p):
        return ["data", "like"] if p.mode == "like" else ["data"]

    def _out_hw(self, p, d, like):
        h, w = d[2], d[3]
        mode = p.mode
        if mode == "size":
            if p.scale_height is not None:
                nh = None if h is None else int(_f32(p.scale_height) * _f32(h))
                nw = None if w is None else int(_f32(p.scale_width) * _f32(w))
            else:
                nh, nw = p.height, p.width
            return nh, nw
        if mode == "odd_scale":
            def odd(v, sc):
                if v is None:
                    return None
                if v % 2 == 0:
                    return int(_f32(v) * _f32(sc))
                return int(_f32(v - 1) * _f32(sc)) + 1
            return odd(h, p.scale_height), odd(w, p.scale_width)
        if mode == "like":
            if like is None:
                return None, None
            return like[2], like[3]

        def adjust(v):
            if v is None:
                return None
            even = v % 2 == 0
            if mode == "to_even_down":
                return v if even else v - 1
            if mode == "to_even_up":
                return v if even else v + 1
            if mode == "to_odd_down":
                return v if not even else v - 1
            return v if not even else v + 1
        return adjust(h), adjust(w)

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        _need_4d(p, d, "data")
        like = in_shapes[1] if p.mode == "like" else None
        if p.mode == "like":
            _need_4d(p, like, "like")
        if d is None:
            return list(in_shapes), list(out_shapes)
        nh, nw = self._out_hw(p, d, like)
        for v in (nh, nw):
            if v is not None and v <= 0:
                raise shape_error(p, f"the output size ({nh}, {nw}) is not positive")
        out = (d[0], d[1], nh, nw)
        return list(in_shapes), [_merge_out(p, out, out_shapes[0])]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        x = x0.astype(compute_dtype(x0.dtype), copy=False)
        n, c, h, w = x.shape
        oh, ow = ctx.out_shapes[0][2], ctx.out_shapes[0][3]
        if (oh, ow) == (h, w):
            return [x0.copy()]
        hl, hs, hl1 = resize_axis_weights(h, oh, p.align_corners)
        wl, ws, wl1 = resize_axis_weights(w, ow, p.align_corners)
        hl0 = (1 - hl1).astype(np.float32)
        wl0 = (1 - wl1).astype(np.float32)
        rows0 = x[:, :, hl, :]
        rows1 = x[:, :, hl + hs, :]
        top = rows0[..., wl] * wl0 + rows0[..., wl + ws] * wl1
        bot = rows1[..., wl] * wl0 + rows1[..., wl + ws] * wl1
        y = hl0[:, None] * top + hl1[:, None] * bot
        return [cast_to(y, x0.dtype)]


# ---------------------------------------------------------------------------
# bilinear sampling shared by BilinearSampler and SpatialTransformer
# ---------------------------------------------------------------------------
def _bilinear_sample(data, gx, gy):
    """Sample ``data`` (N, C, H, W) at normalised grid points (N, Ho, Wo).

    Corners outside the image contribute zero, as MXNet's CPU kernels do.
    """
    n, c, h, w = data.shape
    dt = data.dtype
    y_real = ((gy + 1) * (h - 1) / 2).astype(dt)
    x_real = ((gx + 1) * (w - 1) / 2).astype(dt)
    y0 = np.floor(y_real).astype(np.int64)
    x0 = np.floor(x_real).astype(np.int64)
    wy0 = (1 - (y_real - y0)).astype(dt)
    wx0 = (1 - (x_real - x0)).astype(dt)
    bidx = np.arange(n)[:, None, None]
    out = np.zeros((n, c) + gx.shape[1:], dtype=dt)
    for dy, wy in ((0, wy0), (1, 1 - wy0)):
        for dx, wx in ((0, wx0), (1, 1 - wx0)):
            yy = y0 + dy
            xx = x0 + dx
            ok = (yy >= 0) & (yy <= h - 1) & (xx >= 0) & (xx <= w - 1)
            v = data[bidx, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]  # (N, Ho, Wo, C)
            v = np.where(ok[..., None], v, 0).transpose(0, 3, 1, 2)
            out += v * (wy * wx)[:, None]
    return out


@register_op("BilinearSampler")
class BilinearSampler(OpDef):
    """Bilinear sampling of ``data`` at the (x, y) points of ``grid`` (N, 2, Ho, Wo)."""

    attrs = {"cudnn_off": Attr(optional(to_bool), None)}
    arguments = ("data", "grid")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "tmp"]

    def infer_shape(self, p, in_shapes, out_shapes):
        d, g = in_shapes
        _need_4d(p, d, "data")
        _need_4d(p, g, "grid")
        if d is None or g is None:
            return list(in_shapes), list(out_shapes)
        if g[1] is not None and g[1] != 2:
            raise shape_error(p, f"grid must have 2 channels (x, y), got {fmt_shape(g)}")
        if d[0] is not None and g[0] is not None and d[0] != g[0]:
            raise shape_error(p, f"data and grid batch sizes differ: {fmt_shape(d)} vs "
                                 f"{fmt_shape(g)}")
        out = (d[0], d[1], g[2], g[3])
        tmp = (g[0], g[2], g[3], 2)
        return list(in_shapes), [_merge_out(p, out, out_shapes[0]),
                                 _merge_out(p, tmp, out_shapes[1])]

    def forward(self, p, inputs, ctx):
        data, grid = inputs
        dt = compute_dtype(data.dtype)
        g = grid.astype(dt, copy=False)
        out = _bilinear_sample(data.astype(dt, copy=False), g[:, 0], g[:, 1])
        tmp = np.zeros((grid.shape[0], grid.shape[2], grid.shape[3], 2), dtype=data.dtype)
        return [cast_to(out, data.dtype), tmp]


# ---------------------------------------------------------------------------
# GridGenerator
# ---------------------------------------------------------------------------
def affine_grid_destination(h, w, dt):
    """(3, h*w) destination grid rows x, y, 1 in [-1, 1]."""
    i = np.arange(h * w)
    with np.errstate(divide="ignore", invalid="ignore"):       # a 1-pixel target: NaN, as MXNet
        step_x = np.asarray(2.0 / np.float64(w - 1), dt)
        step_y = np.asarray(2.0 / np.float64(h - 1), dt)
        gx = np.asarray(-1.0, dt) + (i % w).astype(dt) * step_x
        gy = np.asarray(-1.0, dt) + (i // w).astype(dt) * step_y
    return np.stack([gx, gy, np.ones(h * w, dt)]).astype(dt)


@register_op("GridGenerator")
class GridGenerator(OpDef):
    """Sampling grids for BilinearSampler from an affine matrix (N, 6) or an
    optical flow (N, 2, H, W)."""

    attrs = {
        "transform_type": Attr(enum("affine", "warp")),
        "target_shape": Attr(to_shape, (0, 0)),
    }

    def validate(self, p):
        # None (MXNet: a shape of unknown rank) is what gluoncv writes for 'warp', which
        # takes its size from the flow; 'affine' needs it (checked by inference)
        if p.target_shape is not None and len(p.target_shape) != 2:
            raise AttributeInvalidError(
                f"operator GridGenerator (node {p.node_ref}): attribute target_shape="
                f"{p.target_shape} must have 2 entries (H, W)")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "grid_dst"]

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        if d is None:
            return list(in_shapes), list(out_shapes)
        if p.transform_type == "affine":
            if len(d) != 2 or (d[1] is not None and d[1] != 6):
                raise shape_error(p, f"affine data must be (batch, 6), got {fmt_shape(d)}")
            h, w = _target_shape(p)
            if h <= 0 or w <= 0:
                raise shape_error(p, f"target_shape={p.target_shape} must be positive for "
                                     f"transform_type='affine'")
            out = (d[0], 2, h, w)
            dst = (3, h * w)
        else:
            if len(d) != 4 or (d[1] is not None and d[1] != 2):
                raise shape_error(p, f"warp data (optical flow) must be (batch, 2, H, W), "
                                     f"got {fmt_shape(d)}")
            out = tuple(d)
            dst = (2, d[2], d[3])
        return list(in_shapes), [_merge_out(p, out, out_shapes[0]),
                                 _merge_out(p, dst, out_shapes[1])]

    def forward(self, p, inputs, ctx):
        x0 = inputs[0]
        dt = compute_dtype(x0.dtype)
        x = x0.astype(dt, copy=False)
        if p.transform_type == "affine":
            h, w = p.target_shape
            dst = affine_grid_destination(h, w, dt)
            out = (x.reshape(-1, 3) @ dst).reshape(x.shape[0], 2, h, w)
            return [cast_to(out, x0.dtype), cast_to(dst, x0.dtype)]
        n, _, h, w = x.shape
        gx = np.broadcast_to(np.arange(w, dtype=dt), (h, w))
        gy = np.broadcast_to(np.arange(h, dtype=dt)[:, None], (h, w))
        dst = np.stack([gx, gy])
        half = np.array([(dt.type(w) - 1.0) / 2.0, (dt.type(h) - 1.0) / 2.0],
                        dtype=dt).reshape(1, 2, 1, 1)
        out = (x + dst[None]) / half - dt.type(1)
        return [cast_to(out, x0.dtype), cast_to(dst, x0.dtype)]


def _target_shape(p) -> tuple[int, int]:
    """``(H, W)`` of an affine grid; ``target_shape=None`` (unknown) cannot size one."""
    if p.target_shape is None:
        raise shape_error(p, "target_shape=None (a shape of unknown rank) cannot size an "
                             "affine grid; give (H, W)")
    return tuple(p.target_shape)


# ---------------------------------------------------------------------------
# SpatialTransformer
# ---------------------------------------------------------------------------
@register_op("SpatialTransformer")
class SpatialTransformer(OpDef):
    """Affine spatial transformer: GridGenerator(loc) then bilinear sampling."""

    attrs = {
        "target_shape": Attr(to_shape, (0, 0)),
        "transform_type": Attr(enum("affine")),
        "sampler_type": Attr(enum("bilinear")),
        "cudnn_off": Attr(optional(to_bool), None),
    }
    arguments = ("data", "loc")

    def validate(self, p):
        if p.target_shape is not None and len(p.target_shape) != 2:
            raise AttributeInvalidError(
                f"operator SpatialTransformer (node {p.node_ref}): attribute target_shape="
                f"{p.target_shape} must have 2 entries (H, W)")

    def num_outputs(self, p):
        return 3

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "grid_dst", "grid_src"]

    def infer_shape(self, p, in_shapes, out_shapes):
        d, loc = in_shapes
        _need_4d(p, d, "data")
        if loc is not None and (len(loc) != 2 or (loc[1] is not None and loc[1] != 6)):
            raise shape_error(p, f"loc must be (batch, 6), got {fmt_shape(loc)}")
        if not is_known(d) or not is_known(loc):
            return list(in_shapes), list(out_shapes)
        h, w = _target_shape(p)
        if h <= 0 or w <= 0:
            raise shape_error(p, f"target_shape={p.target_shape} must be positive")
        outs = [(d[0], d[1], h, w), (3, h * w), (d[0], 2, h * w)]
        return list(in_shapes), [_merge_out(p, o, k) for o, k in zip(outs, out_shapes)]

    def forward(self, p, inputs, ctx):
        data, loc = inputs
        dt = compute_dtype(data.dtype)
        h, w = p.target_shape
        n = data.shape[0]
        i = np.arange(h * w)
        with np.errstate(divide="ignore", invalid="ignore"):   # a 1-pixel target: NaN, as MXNet
            gx = -1.0 + (i % w) * 2.0 / np.float64(w - 1)
            gy = -1.0 + (i // w) * 2.0 / np.float64(h - 1)
        dst = np.stack([gx, gy, np.ones(h * w)]).astype(dt)
        src = loc.astype(dt, copy=False).reshape(n, 2, 3) @ dst
        out = _bilinear_sample(data.astype(dt, copy=False),
                               src[:, 0].reshape(n, h, w), src[:, 1].reshape(n, h, w))
        return [cast_to(out, data.dtype), cast_to(dst, data.dtype), cast_to(src, data.dtype)]
