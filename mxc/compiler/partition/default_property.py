"""MXNet's ``default`` (and ``default_v2``) backend: partition by operator names.

Regions are maximal connected sets of operators whose names are in the
``op_names`` option (a list, or one comma-separated string since options
arrive as strings; aliases are matched by the operator's own name, as MXNet
does: ``elemwise_add`` matches nodes written as ``_plus``).  Each region
becomes a ``_CachedOp`` node named ``_CachedOp<subgraph id>`` with no
attributes and the region in ``node.subgraphs[0]``.

In MXNet the names are set with ``MXSetSubgraphPropertyOpNamesV2`` before
``optimize_for``; here they are the ``op_names`` option (or the property's
``op_names`` attribute).  Without either, partitioning fails as MXNet's does
("Cannot find attribute op_names").  ``default_v2`` is registered with
identical behaviour (MXNet 1.9.1 produces identical JSON for both).
"""

from __future__ import annotations

from typing import Any, Iterable

from ...errors import PartitionError
from ..ir import Graph, Node
from .property import PartitionContext, SubgraphProperty
from .registry import register_subgraph_property
from .selector import OpNameSelector, SubgraphSelector, parse_op_names

__all__ = ["DefaultSubgraphProperty"]


class DefaultSubgraphProperty(SubgraphProperty):
    """Group operators named in ``op_names`` into ``_CachedOp`` nodes."""

    subgraph_op = "_CachedOp"

    def __init__(self, op_names: str | Iterable[str] | None = None, **attrs: Any):
        super().__init__(**attrs)
        if op_names is not None:
            self.attrs["op_names"] = op_names
        self.op_names: frozenset[str] | None = None
        self._selector: OpNameSelector | None = None

    def pre_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        raw = ctx.options.get("op_names", self.attrs.get("op_names"))
        if raw is None:
            raise PartitionError(
                f"backend {ctx.backend or 'default'!r}: cannot find attribute op_names; pass the "
                f"operator names to partition by, e.g. op_names='exp,sin' or "
                f"op_names=['Convolution', 'Activation']")
        self.op_names = parse_op_names(raw)
        _check_op_names(self.op_names, ctx.backend or "default")
        self._selector = OpNameSelector(self.op_names)

    def create_selector(self) -> SubgraphSelector:
        if self._selector is None:  # used without pre_partition
            self._selector = OpNameSelector(parse_op_names(self.attrs.get("op_names")))
        return self._selector

    def create_subgraph_node(self, subgraph: Graph, subgraph_id: int,
                             selector: SubgraphSelector | None = None) -> Node | None:
        return Node(self.subgraph_op, f"{self.subgraph_op}{subgraph_id}", subgraphs=[subgraph])


def _check_op_names(names, backend: str) -> None:
    """A name in ``op_names`` that no operator has would silently make 0 regions:
    refuse it, suggesting the registered name closest to it."""
    import difflib

    from ..ops.registry import has_op, registered_ops
    unknown = sorted(n for n in names if n != "null" and not has_op(n))   # null: variables
    if not unknown:
        return
    known = list(registered_ops())
    parts = []
    for name in unknown:
        lower = {k.lower(): k for k in known}
        close = [lower[name.lower()]] if name.lower() in lower else \
            difflib.get_close_matches(name, known, n=1, cutoff=0.7)
        parts.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise PartitionError(f"backend {backend!r}: op_names has {', '.join(parts)}, which no "
                         f"registered operator is called")


register_subgraph_property("default", DefaultSubgraphProperty)
register_subgraph_property("default_v2", DefaultSubgraphProperty)
