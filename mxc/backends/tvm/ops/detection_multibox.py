"""SSD's anchor operators (``mxc/compiler/ops/detection_multibox.py``): the
``MultiBoxPrior`` anchors are a constant of the feature map's shape;
``MultiBoxDetection`` runs NMS and stays on the host."""

from __future__ import annotations

from ..converter import Lowering, register_converter, register_host_only
from ._common import reference_constant
from .detection import NMS_ON_HOST


@register_converter("_contrib_MultiBoxPrior")
def multibox_prior(ctx: Lowering):
    """Anchors depend only on the feature map's shape: a constant."""
    return reference_constant(ctx)


register_host_only("_contrib_MultiBoxDetection", reason=NMS_ON_HOST)
