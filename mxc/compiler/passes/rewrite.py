"""Pattern rewrites applied greedily to a fixpoint (MLIR's greedy driver, DPL's rewriter).

::

    def fold_double_negation(m):
        return m["x"]                       # the replacement value

    rewrite(graph, parse_pattern("negative(negative(%x))"), fold_double_negation)

The callback receives a :class:`~.pattern.Match` and returns

* an :class:`~mxc.compiler.ir.Entry` (or a node, meaning its output 0):
  it replaces the matched root value everywhere;
* a list of entries: they replace outputs 0, 1, ... of the root node;
* ``None``: it declines, and the next pattern (or node) is tried.  A
  callback that declines must not have changed the graph.

Returning the root itself means "updated in place" (attributes changed):
the rewrite counts, so the pattern must stop matching afterwards.

New nodes made with ``match.ctx.add_node`` go just before the root, and
nodes the rewrite made dead (the old root, its operands, now-unused
parameters) are erased right away.  Each round visits every live node in
topological order and tries the patterns, highest benefit first (by
default a pattern's size, so bigger matches win); rounds repeat until
nothing changes, at most ``max_rounds`` times.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ...errors import PassError
from ..ir import Entry, Graph, Node
from .context import PassContext, restore_order
from .pattern import Match, Pattern

__all__ = ["RewritePattern", "rewrite"]

Replacement = Entry | Node | Sequence[Entry] | None


class RewritePattern:
    """A pattern and its replacement.

    Either pass ``fn(match) -> replacement`` or subclass and override
    :meth:`rewrite` (with a class-level ``pattern``).  ``benefit`` orders
    patterns tried on the same node (higher first); it defaults to the
    pattern's size.
    """

    pattern: Pattern | None = None
    benefit: int | None = None

    def __init__(self, pattern: Pattern | None = None,
                 fn: Callable[[Match], Replacement] | None = None, *,
                 benefit: int | None = None, name: str | None = None):
        if pattern is not None:
            self.pattern = pattern
        if self.pattern is None:
            raise PassError(f"{type(self).__name__} has no pattern")
        self.fn = fn
        if benefit is not None:
            self.benefit = benefit
        self.name = name or getattr(fn, "__name__", None) or type(self).__name__

    def __repr__(self) -> str:
        return f"<RewritePattern {self.name} benefit={self.effective_benefit}>"

    @property
    def effective_benefit(self) -> int:
        return self.benefit if self.benefit is not None else self.pattern.size()

    def rewrite(self, match: Match) -> Replacement:
        """The replacement for *match* (see the module docstring)."""
        if self.fn is None:
            raise PassError(f"{self.name}: give fn= or override rewrite()")
        return self.fn(match)


def rewrite(graph: Graph | PassContext, patterns: Pattern | RewritePattern |
            Iterable[Pattern | RewritePattern],
            fn: Callable[[Match], Replacement] | None = None, *,
            ctx: PassContext | None = None, max_rounds: int = 64) -> int:
    """Apply *patterns* to *graph* until none matches; returns the number of rewrites.

    graph:
        The graph, or a :class:`~.context.PassContext` (inside a pass: then
        parameters allocated by callbacks reach the pipeline's dicts).
    patterns, fn:
        A pattern and its callback, or :class:`RewritePattern` objects (a
        list may mix both kinds only if every bare pattern shares *fn*).
    max_rounds:
        Raise :class:`~mxc.errors.PassError` if the graph still changes
        after this many rounds (a rewrite that keeps matching its result).
    """
    if isinstance(graph, PassContext):
        ctx, graph = graph, graph.graph
    if ctx is None:
        ctx = PassContext(graph)
    rules = _rules(patterns, fn)
    count = 0
    for _ in range(max_rounds):
        changed = False
        for node in graph.topo_order():
            if ctx.is_erased(node):
                continue
            for rule in rules:
                if _try(rule, node, graph, ctx):
                    count += 1
                    changed = True
                    break
        if not changed:
            restore_order(graph)
            return count
    names = ", ".join(r.name for r in rules)
    raise PassError(f"rewrite ({names}) still changing the graph after {max_rounds} rounds; "
                    f"does a replacement match its own pattern again?")


def _rules(patterns, fn) -> list[RewritePattern]:
    items = [patterns] if isinstance(patterns, (Pattern, RewritePattern)) else list(patterns)
    rules = []
    for p in items:
        if isinstance(p, RewritePattern):
            rules.append(p)
        elif isinstance(p, Pattern):
            if fn is None:
                raise PassError("rewrite(graph, pattern, fn): a bare pattern needs a callback")
            rules.append(RewritePattern(p, fn))
        else:
            raise PassError(f"rewrite expects patterns or RewritePatterns, got {p!r}")
    return sorted(rules, key=lambda r: -r.effective_benefit)


def _try(rule: RewritePattern, node: Node, graph: Graph, ctx: PassContext) -> bool:
    m = rule.pattern.match_node(node, graph)
    if m is None:
        return False
    m.ctx = ctx
    with ctx.inserting_before(node), ctx.tracking_new_nodes() as created:
        result = rule.rewrite(m)
    if result is None:
        return False
    root = m.root
    if isinstance(result, (Entry, Node)):
        pairs = [(root, result.out if isinstance(result, Node) else result)]
    else:
        result = list(result)
        if len(result) > root.node.num_outputs():
            raise PassError(f"{rule.name}: {len(result)} replacements for node "
                            f"{root.node.ref}, which has {root.node.num_outputs()} outputs")
        pairs = [(Entry(root.node, i), r.out if isinstance(r, Node) else r)
                 for i, r in enumerate(result)]
    for old, new in pairs:
        if old.key != new.key:
            ctx.replace_all_uses(old, new, exclude=created)
    operands = [e.node for e in m.values]
    ctx.prune(root.node, *m.nodes, *operands)
    return True
