"""Gluon's image operators (``mx.nd.image.*``, ``gluon.data.vision.transforms``), MXNet 1.9.1.

Images are HWC (one image) or NHWC (a batch), uint8 or float, except for
``_image_normalize``, which works on the CHW/NCHW float tensors that
``_image_to_tensor`` produces.  The deterministic ops only; the
``_image_random_*`` augmentations are random samplers (``random.py``).

Where MXNet 1.9.1 is wrong, mxc is right (docs/deployment-formats.md):

* ``_image_flip_left_right`` / ``_image_flip_top_bottom`` on an ODD extent of
  the flipped axis: MXNet only swaps pixel pairs into a fresh output buffer
  and never writes the middle column/row, which holds uninitialised memory.
  mxc returns the true mirror image (the middle column/row unchanged).
* MXNet rejects 4-D (NHWC) input for the flips and ``_image_adjust_lighting``;
  mxc applies them to every image of the batch.

Resizing follows OpenCV's ``cv::resize`` (MXNet calls it), bit for bit for
uint8: bilinear weights quantised to 11 bits, rows combined with OpenCV's
fixed-point rounding (:func:`resize_bilinear`).
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape
from .registry import (Attr, OpDef, Params, register_op, shape_error, to_bool, to_float_tuple,
                       to_int, to_shape)

# AlexNet's PCA lighting noise: eigenvalues and eigenvectors of ImageNet's RGB covariance
_EIGVAL = np.array([55.46, 4.794, 1.148], dtype=np.float64)
_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                    [-0.5808, -0.0045, -0.8140],
                    [-0.5836, -0.6948, 0.4203]], dtype=np.float64)

#: OpenCV's INTER_RESIZE_COEF_BITS: bilinear weights are integers scaled by 2**11
_COEF_BITS = 11


def _image_rank(p: Params, shape, what: str = "data", ranks=(3, 4)) -> None:
    if shape is not None and len(shape) not in ranks:
        raise shape_error(p, f"{what} must be an image (H, W, C) or a batch (N, H, W, C), got "
                             f"{fmt_shape(shape)}")


def _same_shape(p, in_shapes, out_shapes, ranks=(3, 4)):
    s = in_shapes[0] if in_shapes[0] is not None else out_shapes[0]
    _image_rank(p, s, ranks=ranks)
    return [s], [s]


class _ImageOp(OpDef):
    """One image tensor in, one out; dtype kept unless an op says otherwise."""

    arguments = ("data",)

    def infer_type(self, p, in_types, out_types):
        t = in_types[0] if in_types[0] is not None else out_types[0]
        return [t], [t]


# ---------------------------------------------------------------------------
# layout and value conversions
# ---------------------------------------------------------------------------
@register_op("_image_to_tensor")
class ToTensor(_ImageOp):
    """HWC/NHWC -> CHW/NCHW float32 divided by 255 (float input is divided too)."""

    attrs: dict = {}

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        _image_rank(p, d)
        if d is None:
            return list(in_shapes), list(out_shapes)
        out = d[:-3] + (d[-1], d[-3], d[-2])
        return [d], [out]

    def infer_type(self, p, in_types, out_types):
        return [in_types[0]], ["float32"]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        y = np.moveaxis(x, -1, -3).astype(np.float32) / np.float32(255.0)
        return [np.ascontiguousarray(y)]


@register_op("_image_normalize")
class Normalize(_ImageOp):
    """CHW/NCHW: ``(x - mean[c]) / std[c]``; a one-element mean or std applies to every channel."""

    attrs = {"mean": Attr(to_float_tuple, (0.0, 0.0, 0.0, 0.0)),
             "std": Attr(to_float_tuple, (1.0, 1.0, 1.0, 1.0))}

    def validate(self, p):
        if any(s == 0 for s in p.std):
            raise attr_error(p, "std", f"entries must be non-zero, got {p.std}")

    def channel_stats(self, p, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) per channel, float32, as MXNet broadcasts a one-element tuple."""
        out = []
        for name, v in (("mean", p.mean), ("std", p.std)):
            if len(v) == 1:
                v = v * channels
            elif len(v) < channels:
                raise shape_error(p, f"{name} has {len(v)} entries for {channels} channels")
            out.append(np.asarray(v[:channels], dtype=np.float32))
        return out[0], out[1]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = _same_shape(p, in_shapes, out_shapes)
        if ins[0] is not None and ins[0][-3] is not None:
            self.channel_stats(p, ins[0][-3])
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        mean, std = self.channel_stats(p, x.shape[-3])
        y = (x.astype(np.float32) - mean[:, None, None]) / std[:, None, None]
        return [y.astype(x.dtype, copy=False)]


@register_op("_image_adjust_lighting")
class AdjustLighting(_ImageOp):
    """AlexNet-style PCA lighting with given ``alpha``: adds ``eigvec @ (alpha * eigval)``
    to the RGB channels of HWC/NHWC images (uint8 results saturate)."""

    attrs = {"alpha": Attr(to_float_tuple)}

    def validate(self, p):
        if len(p.alpha) != 3:
            raise attr_error(p, "alpha", f"needs 3 values (one per RGB eigenvector), got "
                                         f"{p.alpha}")

    def rgb_shift(self, p) -> np.ndarray:
        """The per-channel offset (3,) this node adds, in float32."""
        return (_EIGVEC @ (np.asarray(p.alpha) * _EIGVAL)).astype(np.float32)

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = _same_shape(p, in_shapes, out_shapes)
        if ins[0] is not None and ins[0][-1] not in (None, 3):
            raise shape_error(p, f"needs 3 (RGB) channels, got {fmt_shape(ins[0])}")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        y = x.astype(np.float32) + self.rgb_shift(p)
        return [_saturate(y, x.dtype)]


def _saturate(y: np.ndarray, dtype) -> np.ndarray:
    """Float results back to *dtype*, rounded and clipped for integers (OpenCV's saturate_cast)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(dtype)
    return y.astype(dtype, copy=False)


# ---------------------------------------------------------------------------
# geometry: crop and flips
# ---------------------------------------------------------------------------
@register_op("_image_crop")
class Crop(_ImageOp):
    """``data[..., y:y+height, x:x+width, :]`` of HWC/NHWC images."""

    attrs = {"x": Attr(to_int), "y": Attr(to_int), "width": Attr(to_int),
             "height": Attr(to_int)}

    def validate(self, p):
        for k in ("x", "y"):
            if p[k] < 0:
                raise attr_error(p, k, f"must be >= 0, got {p[k]}")
        for k in ("width", "height"):
            if p[k] <= 0:
                raise attr_error(p, k, f"must be > 0, got {p[k]}")

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        _image_rank(p, d)
        if d is None:
            return list(in_shapes), list(out_shapes)
        h, w = d[-3], d[-2]
        if (h is not None and p.y + p.height > h) or (w is not None and p.x + p.width > w):
            raise shape_error(p, f"crop x={p.x} y={p.y} width={p.width} height={p.height} "
                                 f"exceeds the image {fmt_shape(d)}")
        return [d], [d[:-3] + (p.height, p.width, d[-1])]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [np.ascontiguousarray(x[..., p.y:p.y + p.height, p.x:p.x + p.width, :])]


class _Flip(_ImageOp):
    """Mirror HWC/NHWC images along one axis (every column/row written, odd sizes too)."""

    attrs: dict = {}
    axis = -2

    def infer_shape(self, p, in_shapes, out_shapes):
        return _same_shape(p, in_shapes, out_shapes)

    def forward(self, p, inputs, ctx):
        return [np.ascontiguousarray(np.flip(inputs[0], axis=self.axis))]


@register_op("_image_flip_left_right")
class FlipLeftRight(_Flip):
    """Reverse the W axis."""

    axis = -2


@register_op("_image_flip_top_bottom")
class FlipTopBottom(_Flip):
    """Reverse the H axis."""

    axis = -3


# ---------------------------------------------------------------------------
# resize (OpenCV semantics)
# ---------------------------------------------------------------------------
def bilinear_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OpenCV's INTER_LINEAR taps along one axis: ``(i0, i1, w1)``.

    Output ``o`` reads input ``i0[o]`` with weight ``1 - w1[o]`` and
    ``i1[o]`` with ``w1[o]`` (pixel centres aligned, the source coordinate
    clamped to the image as ``cv::resize`` does).  Float32 arithmetic, as
    OpenCV computes the coordinates.
    """
    scale = np.float32(n_in / n_out)
    f = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    i0 = np.floor(f).astype(np.int64)
    w1 = (f - i0).astype(np.float32)
    low = i0 < 0
    w1[low], i0[low] = 0.0, 0
    high = i0 >= n_in - 1
    w1[high], i0[high] = 0.0, n_in - 1
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, w1


def fixed_weights(w1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 11-bit integer weights ``(1 - w1, w1)`` of OpenCV's uint8 path."""
    scale = float(1 << _COEF_BITS)
    a0 = np.rint((1.0 - w1.astype(np.float32)) * np.float32(scale)).astype(np.int32)
    a1 = np.rint(w1.astype(np.float32) * np.float32(scale)).astype(np.int32)
    return a0, a1


def resize_bilinear(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """``cv::resize(..., INTER_LINEAR)`` of HWC/NHWC *x*; uint8 bit-exact with OpenCV.

    uint8: a horizontal pass with 11-bit weights into int32, then a vertical
    pass ``((b0 * (r0 >> 4)) >> 16) + ((b1 * (r1 >> 4)) >> 16) + 2 >> 2``,
    OpenCV's fixed-point rounding.  Float: the same taps in float32.
    """
    h, w = x.shape[-3], x.shape[-2]
    yi0, yi1, yw = bilinear_taps(h, out_h)
    xi0, xi1, xw = bilinear_taps(w, out_w)
    if x.dtype == np.uint8:
        a0, a1 = fixed_weights(xw)
        b0, b1 = fixed_weights(yw)
        xs = x.astype(np.int32)
        rows = xs[..., xi0, :] * a0[:, None] + xs[..., xi1, :] * a1[:, None]
        r0 = rows[..., yi0, :, :] >> 4
        r1 = rows[..., yi1, :, :] >> 4
        out = (((b0[:, None, None] * r0) >> 16) + ((b1[:, None, None] * r1) >> 16) + 2) >> 2
        return np.clip(out, 0, 255).astype(np.uint8)
    xf = x.astype(np.float32)
    rows = xf[..., xi0, :] * (1 - xw)[:, None] + xf[..., xi1, :] * xw[:, None]
    out = rows[..., yi0, :, :] * (1 - yw)[:, None, None] + rows[..., yi1, :, :] * yw[:, None, None]
    return _saturate(out, x.dtype)


def nearest_taps(n_in: int, n_out: int) -> np.ndarray:
    """OpenCV's INTER_NEAREST source index per output position: ``floor(o * n_in / n_out)``."""
    scale = n_in / n_out
    return np.minimum(np.floor(np.arange(n_out) * scale).astype(np.int64), n_in - 1)


def resize_nearest(x: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """``cv::resize(..., INTER_NEAREST)`` of HWC/NHWC *x*."""
    rows = nearest_taps(x.shape[-3], out_h)
    cols = nearest_taps(x.shape[-2], out_w)
    return np.ascontiguousarray(x[..., rows, :, :][..., cols, :])


class _ResizeBase(_ImageOp):
    """Shared resize semantics in OpenCV's arithmetic: nearest (``interp`` 0) or bilinear (1)."""

    def out_size(self, p, h: int | None, w: int | None) -> tuple[int | None, int | None]:
        raise NotImplementedError

    def validate(self, p):
        if p.interp not in (0, 1):
            raise attr_error(p, "interp", f"only nearest (0) and bilinear (1) interpolation are "
                                          f"supported, got {p.interp}")

    def infer_shape(self, p, in_shapes, out_shapes):
        d = in_shapes[0]
        _image_rank(p, d)
        if d is None:
            return list(in_shapes), list(out_shapes)
        oh, ow = self.out_size(p, d[-3], d[-2])
        return [d], [d[:-3] + (oh, ow, d[-1])]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        oh, ow = self.out_size(p, x.shape[-3], x.shape[-2])
        if p.interp == 0:
            return [resize_nearest(x, oh, ow)]
        return [resize_bilinear(x, oh, ow)]


@register_op("_image_resize")
class Resize(_ResizeBase):
    """``size=(w, h)`` (width first) or one int for both edges; with ``keep_ratio`` an
    int sets the SHORT edge and the long one keeps the aspect ratio (rounded down)."""

    attrs = {"size": Attr(to_shape, ()), "keep_ratio": Attr(to_bool, False),
             "interp": Attr(to_int, 1)}

    def validate(self, p):
        super().validate(p)
        if len(p.size) not in (1, 2) or any(v <= 0 for v in p.size):
            raise attr_error(p, "size", f"must be one or two positive ints, got {p.size}")

    def out_size(self, p, h, w):
        if len(p.size) == 2:
            return p.size[1], p.size[0]
        s = p.size[0]
        if not p.keep_ratio:
            return s, s
        if h is None or w is None:
            return None, None
        if h > w:
            return h * s // w, s
        return s, w * s // h


@register_op("_cvimresize")
class CvImResize(_ResizeBase):
    """``mx.image.imresize``: OpenCV resize of an HWC image to ``(h, w)``."""

    attrs = {"w": Attr(to_int), "h": Attr(to_int), "interp": Attr(to_int, 1)}

    def validate(self, p):
        super().validate(p)
        if p.w <= 0 or p.h <= 0:
            raise attr_error(p, "w", f"w and h must be positive, got w={p.w} h={p.h}")

    def out_size(self, p, h, w):
        return p.h, p.w
