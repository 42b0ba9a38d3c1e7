"""``cse``: common subexpression elimination."""

from __future__ import annotations

from ....errors import MxcError
from ...ir import Entry
from ...ir.node import is_hidden_attr
from ..registry import register_pass
from ._common import is_deterministic


@register_pass("cse", extra_options=False)
def cse(graph, ctx):
    """Merge nodes with the same op, attributes and inputs into the first of them.

    Attributes are compared as the op parses them (``(3,3)`` equals
    ``(3, 3)``); MXNet's hidden attributes are ignored.  Variables, random
    ops, nodes with control dependencies or nested graphs are never merged.
    """
    seen = {}
    for node in graph.topo_order():
        if node.op is None or node.control_deps or not is_deterministic(node):
            continue
        key = (node.opdef.name, _attrs_key(node), tuple(e.key for e in node.inputs))
        first = seen.setdefault(key, node)
        if first is node:
            continue
        for i in range(node.num_outputs()):
            ctx.replace_all_uses(Entry(node, i), Entry(first, i))
        ctx.erase(node)
        ctx.stat("nodes merged")


def _attrs_key(node) -> tuple:
    try:
        return tuple(sorted((k, repr(v)) for k, v in node.params.items()))
    except MxcError:
        return tuple(sorted((k, v) for k, v in node.attrs.items() if not is_hidden_attr(k)))
