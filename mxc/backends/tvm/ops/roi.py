"""ROI pooling ops (``mxc/compiler/ops/roi.py``): host only.

MXNet's ROIPooling/ROIAlign bin rules (rounding of ROI corners, adaptive
sample counts, ``aligned``) differ in detail from Relax's ``roi_pool`` /
``roi_align``, and each ROI reads a data-dependent window.
"""

from __future__ import annotations

from ..converter import register_host_only

register_host_only(
    "ROIPooling", "_contrib_ROIAlign",
    reason="per-ROI data-dependent windows with MXNet-specific bin rules; they run on the host")
