"""Batched proposals and training targets (``mxc/compiler/ops/detection_batch.py``):
host only (sorting, NMS and greedy matching are data-dependent control flow)."""

from __future__ import annotations

from ..converter import register_host_only

register_host_only("_contrib_MultiProposal", "_contrib_bipartite_matching",
                   "_contrib_MultiBoxTarget",
                   reason="sorting, NMS and greedy matching are data-dependent control "
                          "flow; host")
