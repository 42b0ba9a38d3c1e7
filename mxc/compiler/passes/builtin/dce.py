"""``dce``: dead-code elimination."""

from __future__ import annotations

from ..registry import register_pass


@register_pass("dce", extra_options=False)
def dce(graph, ctx):
    """Remove nodes no graph output depends on (parameters only they used go too)."""
    removed = ctx.remove_dead_code()
    if removed:
        ctx.stat("nodes removed", len(removed))
