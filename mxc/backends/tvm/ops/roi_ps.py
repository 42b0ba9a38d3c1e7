"""Position-sensitive and rotated ROI pooling (``mxc/compiler/ops/roi_ps.py``): host only
(per-ROI data-dependent windows, as ROIPooling/ROIAlign)."""

from __future__ import annotations

from ..converter import register_host_only

register_host_only("_contrib_PSROIPooling", "_contrib_DeformablePSROIPooling",
                   "_contrib_RROIAlign",
                   reason="per-ROI data-dependent windows and sample points; host")
