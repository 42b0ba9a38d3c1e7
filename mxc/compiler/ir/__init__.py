"""mxc's graph IR: :class:`Graph`, :class:`Node`, :class:`Entry`."""

from .graph import Graph, copy_graph, post_order
from .node import Entry, Node, is_hidden_attr

__all__ = ["Graph", "Node", "Entry", "copy_graph", "post_order", "is_hidden_attr"]
