"""``_contrib_ModulatedDeformableConvolution`` (``mxc/compiler/ops/deformable_v2.py``):
host, like ``_contrib_DeformableConvolution`` (data-dependent bilinear sampling)."""

from __future__ import annotations

from ..converter import register_host_only

register_host_only("_contrib_ModulatedDeformableConvolution",
                   reason="offsets drive data-dependent bilinear sampling; host")
