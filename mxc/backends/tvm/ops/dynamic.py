"""Operators with data-dependent output shapes (``mxc/compiler/ops/dynamic.py``).

Lowering is shape-specialised, so these run as host steps: the compiled
regions before them produce the mask, the host kernel gathers the kept rows,
and what follows a data-dependent shape runs on the host as well (its shapes
are not static either).  Relax's symbolic shapes could keep the consumers
compiled, at the price of one kernel per shape class; the deployment graphs
that use ``boolean_mask`` end with it or reduce right after it, so the host
step is where the time goes anyway.
"""

from __future__ import annotations

from ..converter import register_host_only

register_host_only("_contrib_boolean_mask",
                   reason="data-dependent output shape (rows kept are known only at run time): "
                          "runs as a host step")
