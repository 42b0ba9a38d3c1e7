"""Correlation and DeformableConvolution (``mxc/compiler/ops/vision_misc.py``): host only."""

from __future__ import annotations

from ..converter import register_host_only

register_host_only(
    "Correlation",
    reason="the displacement-window cost volume has no Relax/TOPI counterpart; it runs on "
           "the host")
register_host_only(
    "_contrib_DeformableConvolution",
    reason="deformable convolution samples at data-dependent offsets; it runs on the host")
