"""MXNet's ``Custom`` operator (``mxc/compiler/ops/custom.py``): always a host node.

Its forward is Python code registered in the running process (a
``CustomOp``), which TVM cannot lower; the artifact keeps the node and the
loading process must register the same ``op_type``.
"""

from __future__ import annotations

from ..converter import register_host_only

register_host_only("Custom", reason="a Python custom operator (op_type) runs its own forward "
                                    "on the host; register the op_type before loading")
