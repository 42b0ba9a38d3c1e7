"""``fold-constants``: evaluate parameter-only subexpressions once.

A value is *constant* when it is a parameter (a variable with a known array
that is not a declared data input) or an output of a deterministic operator
whose inputs are all constant.  Each constant value read by a non-constant
node is computed with the reference backend and becomes a new parameter
(``alloc_arg``); the subexpression and the parameters only it used are
removed.  Data inputs are never folded, nor are bare constant generators
(``_zeros`` read directly: folding would only grow the parameters), graph
outputs (the node stays to produce them), or values whose shape depends on
the data (the subexpression must run on its own).
"""

from __future__ import annotations

import numpy as np

from ....errors import MxcError
from ...ir import Entry, Graph, post_order
from ..registry import Option, Pass, register_pass
from ._common import is_deterministic


@register_pass("fold-constants")
class FoldConstants(Pass):
    """Compute parameter-only subexpressions once; the results become parameters."""

    max_elements = Option(int, 0, "do not fold a value with more elements (0: no limit)")
    keep = Option(list[str], [], "variables never treated as constants (data inputs)")

    def run(self, graph, ctx):
        constant = self._constant_nodes(graph, ctx)
        frontier = self._frontier(graph, constant)
        if not frontier:
            return
        values = _evaluate(frontier, ctx)
        for entry in frontier:
            value = values.get(entry.key)
            if value is None:
                ctx.stat("skipped (cannot evaluate alone)")
                continue
            if self.max_elements and value.size > self.max_elements:
                ctx.stat("skipped (larger than max_elements)")
                continue
            node = entry.node
            base = f"{node.name}_folded" if entry.index == 0 else \
                f"{node.name}_folded{entry.index}"
            param = ctx.alloc_arg(graph.fresh_name(base), value=value)
            for user in node.users:  # a graph output keeps its own node (and name)
                user.replace_input(entry, param.out)
            ctx.prune(node)
            ctx.stat("values folded")

    def _constant_nodes(self, graph: Graph, ctx) -> set[int]:
        keep = set(self.keep)
        constant: set[int] = set()
        for node in graph.topo_order():
            if node.op is None:
                if ctx.is_param(node) and node.name not in keep:
                    constant.add(id(node))
            elif not node.control_deps and is_deterministic(node) and \
                    all(id(e.node) in constant for e in node.inputs):
                constant.add(id(node))
        return constant

    def _frontier(self, graph: Graph, constant: set[int]) -> list[Entry]:
        """Constant op outputs read by non-constant nodes (each once, in order)."""
        seen: set[tuple[int, int]] = set()
        frontier: list[Entry] = []
        for node in graph.topo_order():
            if node.op is None or id(node) in constant:
                continue
            for e in node.inputs:
                producer = e.node
                if id(producer) in constant and producer.op is not None and \
                        producer.inputs and e.key not in seen:
                    seen.add(e.key)
                    frontier.append(Entry(producer, e.index))
        return frontier


def _evaluate(frontier: list[Entry], ctx) -> dict[tuple[int, int], np.ndarray]:
    """Values of the frontier entries: all at once, else one by one (skipping failures)."""
    from ...interpret import run_graph

    def run(entries: list[Entry]) -> list[np.ndarray]:
        sub = Graph(post_order(e.node for e in entries), entries)
        feeds = {n.name: ctx.param(n) for n in sub.nodes if n.op is None}
        return run_graph(sub, feeds)

    try:
        return {e.key: v for e, v in zip(frontier, run(frontier))}
    except MxcError:
        values = {}
        for e in frontier:
            try:
                values[e.key] = run([e])[0]
            except MxcError:
                pass
        return values
