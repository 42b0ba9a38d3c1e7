"""Subgraph properties: what to select and what to replace a region with.

A :class:`SubgraphProperty` is MXNet's ``SubgraphProperty``.  A backend (see
:mod:`.registry`) is an ordered list of properties; partitioning runs them
one after the other, each over the graph the previous one produced.  For one
property the algorithm (:mod:`.algorithm`) calls, in order:

1. :meth:`SubgraphProperty.pre_partition` once, with the graph and a
   :class:`PartitionContext` (options, inferred shapes/dtypes);
2. :meth:`SubgraphProperty.create_selector` for every node that may start a
   region, finding all regions on the unmodified graph;
3. for each region, in the order found (the region's index is its
   *subgraph id*): :meth:`SubgraphProperty.init_subgraph_inputs` on the
   variables that replace the region's external inputs, then
   :meth:`SubgraphProperty.create_subgraph_node` (return ``None`` to reject
   the region and leave the graph as it was) -- or, for an ``"adjust"``
   property, :meth:`SubgraphProperty.adjust_subgraph_node`;
4. :meth:`SubgraphProperty.post_partition` once, with the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import Entry, Graph, Node
from .selector import SubgraphSelector

__all__ = ["SubgraphProperty", "PartitionContext"]


@dataclass
class PartitionContext:
    """What one partitioning run knows besides the graph.

    Attributes
    ----------
    backend:
        The backend name (``"default"``), or the property's name when a
        property object was passed directly.
    options:
        User options, every value a string (as MXNet's C API passes them).
    shapes, dtypes:
        Inferred output shapes / dtypes of the graph being partitioned,
        keyed by :attr:`Entry.key <mxc.compiler.ir.Entry.key>`, or ``None``
        when no input shapes/dtypes were given.  Shapes are tuples (``None``
        for an unknown dimension), dtypes numpy names.
    frozen:
        ``id()`` of nodes that must not join any region (existing subgraph
        nodes when earlier partitioning is kept: ``clear=False``).
    params:
        The arrays given to ``optimize_for``: ``{"args": {name: array}, "aux": {...}}``.
    """

    backend: str = ""
    options: dict[str, str] = field(default_factory=dict)
    shapes: dict[tuple[int, int], Any] | None = None
    dtypes: dict[tuple[int, int], Any] | None = None
    frozen: set[int] = field(default_factory=set)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def dedup_subgraph(self) -> bool:
        """MXNet's ``dedup_subgraph`` option: one nested input per distinct entry."""
        return self.options.get("dedup_subgraph", "") == "True"

    def shape(self, entry: Entry):
        return None if self.shapes is None else self.shapes.get(entry.key)

    def dtype(self, entry: Entry):
        return None if self.dtypes is None else self.dtypes.get(entry.key)


class SubgraphProperty:
    """Base class of subgraph properties; subclass and override.

    Keyword arguments become :attr:`attrs`, MXNet's property attributes
    (``SetAttr``/``GetAttr``): ``property_name`` names the property in
    messages, a true ``disable`` skips it.

    Class attributes
    ----------------
    property_type:
        ``"create"`` (regions become subgraph nodes) or ``"adjust"`` (the
        property only edits the region's nodes in place).
    split_components:
        After the selector's :meth:`~.SubgraphSelector.filter`, split the
        kept nodes into connected components, each its own region (MXNet up
        to 1.5 did; 1.6-1.9 keep a filtered set as one region, the
        default).  Either way a filtered region that would form a cycle with
        the rest of the graph is rejected with a
        :class:`~mxc.errors.PartitionError`.
    """

    property_type: str = "create"
    split_components: bool = False

    def __init__(self, **attrs: Any):
        self.attrs: dict[str, Any] = dict(attrs)

    # -- MXNet's attribute map ----------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def get_attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def set_attr(self, name: str, value: Any) -> "SubgraphProperty":
        self.attrs[name] = value
        return self

    @property
    def name(self) -> str:
        return str(self.attrs.get("property_name") or type(self).__name__)

    @property
    def disabled(self) -> bool:
        v = self.attrs.get("disable", False)
        return v is True or (isinstance(v, str) and v.strip().lower() in ("true", "1"))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- hooks --------------------------------------------------------------------
    def pre_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        """Called once before regions are searched (validate options here).

        May annotate nodes (attributes) but must not change the graph's
        structure (MXNet passes a const graph).
        """

    def create_selector(self) -> SubgraphSelector:
        """A selector for one region search (called once per start node)."""
        raise NotImplementedError(f"{type(self).__name__} must implement create_selector()")

    def init_subgraph_inputs(self, inputs: list[Node], orig_entries: list[Entry]) -> None:
        """Annotate the nested graph's new input variables (MXNet ``InitSubgraphInputs``).

        ``inputs[i]`` is the variable that replaces external entry
        ``orig_entries[i]`` (an entry of the outer graph).
        """

    def create_subgraph_node(self, subgraph: Graph, subgraph_id: int,
                             selector: SubgraphSelector | None = None) -> Node | None:
        """The node replacing a region, with *subgraph* in ``node.subgraphs[0]``.

        *subgraph*'s variables are the region's inputs and its outputs the
        entries used outside.  Set the node's op, name and attributes; the
        algorithm connects its inputs and outputs (and puts *subgraph* in
        ``node.subgraphs`` if you did not).  Return ``None`` to reject the
        region.  *selector* (MXNet V2's third argument) is the selector that
        grew the region; overrides may leave it out of their signature.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement "
                                  f"create_subgraph_node()")

    def adjust_subgraph_node(self, nodes: list[Node], subgraph_id: int,
                             selector: SubgraphSelector | None = None) -> None:
        """For ``property_type = "adjust"``: edit the region's nodes in place."""
        raise NotImplementedError(f"{type(self).__name__} must implement "
                                  f"adjust_subgraph_node()")

    def post_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        """Called once with the partitioned graph."""
