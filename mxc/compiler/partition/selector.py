"""Subgraph selectors: which nodes a region starts from and grows through.

A selector is MXNet's ``SubgraphSelector``.  The partitioning algorithm
(:mod:`.algorithm`) asks it, for every node in topological order that no
region holds yet, whether the node may *start* a region (:meth:`select`);
from a start node it grows breadth-first through inputs
(:meth:`~SubgraphSelector.select_input`) and consumers
(:meth:`~SubgraphSelector.select_output`); :meth:`~SubgraphSelector.filter`
may then drop candidates, and :meth:`~SubgraphSelector.reset` is called
before a region is grown again after cycle breaking.  Variables are never
offered to a selector: no region ever contains one.

All methods receive :class:`~mxc.compiler.ir.Node` objects of the graph
being partitioned; do not modify them.
"""

from __future__ import annotations

from typing import Iterable

from ..ir import Node
from ..ops.registry import get_op, has_op

__all__ = ["SubgraphSelector", "OpNameSelector", "canonical_op_name", "parse_op_names"]


class SubgraphSelector:
    """Base selector: selects nothing.  Subclass and override.

    ``node_determined``: set True when the selector keeps no state and
    ``select_input(n, m)`` and ``select_output(n, m)`` always equal
    ``select(m)`` (as for selection by operator name).  The algorithm then
    asks :meth:`select` once per node and grows regions without further
    calls -- much faster on large graphs.  Return the same selector object
    from every :meth:`SubgraphProperty.create_selector` call to benefit.
    """

    node_determined: bool = False

    def select(self, node: Node) -> bool:
        """May *node* start a new region?"""
        return False

    def select_input(self, node: Node, input_node: Node) -> bool:
        """Grow from region node *node* to *input_node*, which produces one of its inputs?"""
        return False

    def select_output(self, node: Node, output_node: Node) -> bool:
        """Grow from region node *node* to *output_node*, which consumes one of its outputs?"""
        return False

    def filter(self, candidates: list[Node]) -> list[Node]:
        """The candidates to keep (a subset; default: all of them).

        *candidates* are in topological order.  Returning a node that is
        not a candidate is an error (:class:`~mxc.errors.PartitionError`).
        """
        return list(candidates)

    def reset(self) -> None:
        """Forget per-region state before a region is grown again."""


def canonical_op_name(op: str) -> str:
    """The registered (canonical) name of *op*: ``_plus`` -> ``elemwise_add``.

    MXNet compares an operator's own name, never an alias; ops mxc does not
    know keep the name they have.
    """
    try:
        return get_op(op).name if has_op(op) else op
    except Exception:  # noqa: BLE001 - an unknown op simply keeps its name
        return op


def parse_op_names(value: str | Iterable[str] | None) -> frozenset[str]:
    """``op_names`` as a set: a list/set, or one comma-separated string.

    Options arrive as strings, so ``"exp,sin, cos"`` and ``["exp", "sin",
    "cos"]`` mean the same; empty items are ignored.
    """
    if value is None:
        return frozenset()
    if isinstance(value, str):
        items = value.split(",")
    else:
        items = list(value)
    return frozenset(s.strip() for s in items if s and s.strip())


class OpNameSelector(SubgraphSelector):
    """Selects operators whose (canonical) name is in *op_names*.

    MXNet's ``ContainOpSelector``/``ContainOpSelectorV2``: a node is taken
    when it is an operator in the set, whichever region node it is reached
    from, both through inputs and through consumers.
    """

    node_determined = True

    def __init__(self, op_names: Iterable[str]):
        self.op_names = frozenset(op_names)
        self._cache: dict[str, bool] = {}

    def _ok(self, node: Node) -> bool:
        op = node.op
        if op is None:
            return False
        hit = self._cache.get(op)
        if hit is None:
            hit = self._cache[op] = canonical_op_name(op) in self.op_names
        return hit

    def select(self, node: Node) -> bool:
        return self._ok(node)

    def select_input(self, node: Node, input_node: Node) -> bool:
        return self._ok(input_node)

    def select_output(self, node: Node, output_node: Node) -> bool:
        return self._ok(output_node)
