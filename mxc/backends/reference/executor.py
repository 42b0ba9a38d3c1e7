"""The numpy reference backend's executor (re-export).

The interpreter moved to :mod:`mxc.compiler.interpret` so compiler code can
evaluate graphs without importing a backend; this path keeps working.
"""

from ...compiler.interpret import Executor, run_graph, unused_inputs

__all__ = ["Executor", "run_graph", "unused_inputs"]
