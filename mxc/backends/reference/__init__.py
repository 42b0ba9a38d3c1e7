"""The numpy reference backend: mxc's semantic oracle and host fallback."""

from .executor import Executor, run_graph

__all__ = ["Executor", "run_graph"]
