"""Random image augmentations (``mxc/compiler/ops/image_random.py``): host only;
their factors come from mxc's seeded streams (mxc.compiler.rng)."""

from __future__ import annotations

from ..converter import register_host_only

register_host_only(
    "_image_random_flip_left_right", "_image_random_flip_top_bottom",
    "_image_random_brightness", "_image_random_contrast", "_image_random_saturation",
    "_image_random_hue", "_image_random_color_jitter", "_image_random_lighting",
    reason="random augmentation: its factors are drawn on the host from mxc's seeded streams")
