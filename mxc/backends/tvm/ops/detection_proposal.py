"""Faster R-CNN's ``Proposal`` (``mxc/compiler/ops/detection_proposal.py``):
it sorts and runs NMS, so it stays on the host."""

from __future__ import annotations

from ..converter import register_host_only
from .detection import NMS_ON_HOST

register_host_only("_contrib_Proposal", reason=NMS_ON_HOST)
