"""Random image augmentations: ``_image_random_*`` on one HWC image.

Each op draws its factor(s) once per call from the node's stream
(:mod:`mxc.compiler.rng`) and applies the deterministic adjustment MXNet's
``image_random-inl.h`` describes:

* brightness: ``x * a``, ``a ~ U[min_factor, max_factor]``;
* contrast: ``x * a + (1 - a) * mean(gray)``, gray = 0.299 R + 0.587 G + 0.114 B
  (the plain mean of a 1-channel image);
* saturation: ``x * a + (1 - a) * gray`` per pixel;
* hue: RGB -> HLS, hue rotated by ``a * 360`` degrees, back to RGB;
* color_jitter: brightness, contrast, saturation and hue (each only when its
  amount is > 0; factors ``1 + U[-amount, amount]``, hue ``U[-hue, hue]``) in a
  random order;
* lighting: AlexNet PCA noise, ``alpha ~ N(0, alpha_std)`` per eigenvector;
* flips: the input or its mirror with probability 1/2 each.

uint8 results are rounded and clipped (``saturate_cast``), float results are
not clipped.  Where mxc deliberately differs from MXNet 1.9.1: flips of an
odd-sized axis keep the middle row/column (MXNet leaves it uninitialised), and
saturation uses the full luminance (MXNet's loop keeps only ``0.114 * B``, an
assignment where a sum was meant).  They run on the host.
"""

from __future__ import annotations

import numpy as np

from .common import attr_error, fmt_shape, merged_shape
from .random import RandomOp
from .registry import Attr, register_op, shape_error, to_float

_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_EIG = np.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                 [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                 [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], dtype=np.float32)


def saturate(values: np.ndarray, dtype) -> np.ndarray:
    """MXNet's ``saturate_cast``: integers round and clip, floats pass through."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    return values.astype(dt)


def adjust_brightness(x: np.ndarray, a: float) -> np.ndarray:
    return x * np.float32(a)


def adjust_contrast(x: np.ndarray, a: float) -> np.ndarray:
    gray = x[..., :3] @ _LUMA if x.shape[-1] > 1 else x[..., 0]
    return x * np.float32(a) + np.float32(1 - a) * np.float32(gray.mean())


def adjust_saturation(x: np.ndarray, a: float) -> np.ndarray:
    if x.shape[-1] == 1:
        return x
    gray = (x[..., :3] @ _LUMA)[..., None]
    return x * np.float32(a) + gray * np.float32(1 - a)


def _rgb_to_hls(rgb: np.ndarray):
    r, g, b = (rgb[..., i] / np.float32(255) for i in range(3))
    vmax = np.maximum(np.maximum(r, g), b)
    vmin = np.minimum(np.minimum(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * 0.5
    chroma = diff > np.finfo(np.float32).eps
    safe = np.where(chroma, diff, 1)
    sat = np.where(light < 0.5, diff / np.where(chroma, vmax + vmin, 1),
                   diff / np.where(chroma, 2 - vmax - vmin, 1))
    hue = np.where(vmax == r, (g - b) * 60 / safe,
                   np.where(vmax == g, (b - r) * 60 / safe + 120, (r - g) * 60 / safe + 240))
    hue = np.where(hue < 0, hue + 360, hue)
    return np.where(chroma, hue, 0), light, np.where(chroma, sat, 0)


def _hls_to_rgb(hue, light, sat):
    p2 = np.where(light <= 0.5, light * (1 + sat), light + sat - light * sat)
    p1 = 2 * light - p2
    h = np.mod(hue / 60.0, 6.0)
    sector = np.minimum(h.astype(np.int64), 5)
    frac = h - sector
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (1 - frac), p1 + (p2 - p1) * frac], axis=-1)
    # per sector: which tab entry feeds (b, g, r)
    pick = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])[sector]
    bgr = np.take_along_axis(tab, pick, axis=-1)
    rgb = bgr[..., ::-1]
    rgb = np.where((sat != 0)[..., None], rgb, light[..., None])
    return rgb * np.float32(255)


def adjust_hue(x: np.ndarray, a: float) -> np.ndarray:
    if x.shape[-1] == 1:
        return x
    hue, light, sat = _rgb_to_hls(x.astype(np.float32))
    return _hls_to_rgb(hue + np.float32(a * 360.0), light, sat).astype(np.float32)


def adjust_lighting(x: np.ndarray, alpha) -> np.ndarray:
    if x.shape[-1] == 1:
        return x
    return x + _EIG @ np.asarray(alpha, dtype=np.float32)


class _RandomImageOp(RandomOp):
    """One HWC image in, one of the same shape and dtype out."""

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merged_shape(p, in_shapes[0], out_shapes[0], "data and output")
        if s is not None and len(s) != 3:
            raise shape_error(p, f"input image must have shape (height, width, channels), "
                                 f"got {fmt_shape(s)}")
        return [s], [s]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        out = self.augment(p, x.astype(np.float32), self.generator(p))
        return [saturate(out, x.dtype)]

    def augment(self, p, x: np.ndarray, g: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


class _FlipOp(_RandomImageOp):
    axis = 0

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        return [np.flip(x, self.axis).copy() if self.generator(p).random() < 0.5 else x.copy()]


@register_op("_image_random_flip_left_right")
class RandomFlipLeftRight(_FlipOp):
    axis = 1


@register_op("_image_random_flip_top_bottom")
class RandomFlipTopBottom(_FlipOp):
    axis = 0


class _EnhanceOp(_RandomImageOp):
    attrs = {"min_factor": Attr(to_float), "max_factor": Attr(to_float)}
    adjust = staticmethod(adjust_brightness)

    def validate(self, p):
        if p.min_factor < 0 or p.max_factor < p.min_factor:
            raise attr_error(p, "max_factor", f"need 0 <= min_factor <= max_factor "
                                                     f"(min_factor={p.min_factor})", op=self)

    def augment(self, p, x, g):
        return type(self).adjust(x, g.uniform(p.min_factor, p.max_factor))


@register_op("_image_random_brightness")
class RandomBrightness(_EnhanceOp):
    adjust = staticmethod(adjust_brightness)


@register_op("_image_random_contrast")
class RandomContrast(_EnhanceOp):
    adjust = staticmethod(adjust_contrast)


@register_op("_image_random_saturation")
class RandomSaturation(_EnhanceOp):
    adjust = staticmethod(adjust_saturation)


@register_op("_image_random_hue")
class RandomHue(_EnhanceOp):
    adjust = staticmethod(adjust_hue)


@register_op("_image_random_color_jitter")
class RandomColorJitter(_RandomImageOp):
    attrs = {"brightness": Attr(to_float), "contrast": Attr(to_float),
             "saturation": Attr(to_float), "hue": Attr(to_float)}

    def augment(self, p, x, g):
        steps = [(p.brightness, adjust_brightness, 1.0), (p.contrast, adjust_contrast, 1.0),
                 (p.saturation, adjust_saturation, 1.0), (p.hue, adjust_hue, 0.0)]
        for i in g.permutation(4):
            amount, adjust, centre = steps[i]
            if amount > 0:
                x = adjust(x, centre + g.uniform(-amount, amount))
        return x


@register_op("_image_random_lighting")
class RandomLighting(_RandomImageOp):
    attrs = {"alpha_std": Attr(to_float, 0.05)}

    def augment(self, p, x, g):
        return adjust_lighting(x, g.normal(0.0, p.alpha_std, 3))
