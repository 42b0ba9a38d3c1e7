"""Helpers shared by the built-in passes."""

from __future__ import annotations

from ....errors import MxcError
from ...ir import Entry, Graph, Node

#: Operator name prefixes of ops whose outputs are not a function of their inputs.
NONDETERMINISTIC_PREFIXES = ("_random", "random_", "_sample", "sample_", "_npi_random",
                             "_shuffle", "_contrib_quantize", "Custom")


def is_deterministic(node: Node) -> bool:
    """True if *node*'s outputs depend only on its inputs and attributes.

    Random and sampling ops, ``Dropout(mode='always')``, custom ops and
    nodes with nested graphs (whose operator may be backend code) are not.
    """
    op = node.op
    if op is None or node.subgraphs or op.startswith(NONDETERMINISTIC_PREFIXES):
        return False
    try:
        opdef = node.opdef
        if getattr(opdef, "is_random", False):
            return False
        if opdef.name == "Dropout":
            p = node.params
            return p.mode == "training" or p.p == 0
        return not getattr(opdef, "is_subgraph_op", False)
    except MxcError:
        return False


def entry_uses(graph: Graph, entry: Entry) -> int:
    """How many input slots and graph outputs read *entry*."""
    n = sum(1 for u in entry.node.users for e in u.inputs if e.key == entry.key)
    return n + sum(1 for e in graph.outputs if e.key == entry.key)
