"""``remove-dropout``: Dropout is the identity in inference; remove it."""

from __future__ import annotations

from ..pattern import is_op
from ..registry import Option, register_pass
from ..rewrite import rewrite
from ._common import entry_uses


@register_pass("remove-dropout", options={
    "always": Option(bool, False, "also remove mode='always' Dropout (random in inference)"),
})
def remove_dropout(graph, ctx):
    """Remove inference-mode Dropout nodes (their hidden mask output must be unused)."""
    remove_always = ctx["always"]
    dropout = (is_op("Dropout")
               .has_attr(lambda p: p.mode == "training" or p.p == 0 or remove_always)
               .where(lambda node: entry_uses(graph, node[1]) == 0))  # nobody reads the mask
    removed = rewrite(ctx, dropout, lambda m: m.root.node.inputs[0])
    if removed:
        ctx.stat("dropouts removed", removed)
    kept = sum(1 for n in graph.topo_order() if n.op is not None and n.opdef.name == "Dropout")
    if kept:
        ctx.stat("dropouts kept", kept)
