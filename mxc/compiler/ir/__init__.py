"""mxc's graph IR: :class:`Graph`, :class:`Node`, :class:`Entry`, and its text form."""

from .graph import Graph, copy_graph, post_order
from .node import Entry, Node, is_hidden_attr, mark_repeated_names
from .text import parse_graph, print_graph
from .types import GraphTypes

__all__ = ["Graph", "Node", "Entry", "GraphTypes", "copy_graph", "post_order", "is_hidden_attr",
           "mark_repeated_names", "parse_graph", "print_graph"]
