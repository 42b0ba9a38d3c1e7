"""Nodes and entries: the vertices and edges of mxc's graph IR.

The IR keeps MXNet's own vocabulary (like NNVM did): a node is either a
*variable* (``op is None``; MXNet writes ``"op": "null"``) or an operator call
whose ``op`` is the MXNet operator name.  An :class:`Entry` names one output of
a node, ``(node, index)``; the optional ``version`` is MXNet's variable
version, kept only so files round-trip.

Edges are bidirectional: assigning inputs through :attr:`Node.inputs`,
:meth:`Node.set_input` or :meth:`Node.replace_input` keeps every producer's
use count up to date, so passes never maintain ``users`` by hand (as in
torch.fx).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .watched import WatchedDict, WatchedList, watched_attribute

# "Graph" in annotations is .graph.Graph, named as a string and never imported: the
# graph module builds on this one (importing it back, even for type checkers, would
# be an import cycle)


#: ``Node.meta`` key: the node's position in the file it was read from (symbol JSON or
#: textual IR), stamped only on nodes whose name another node of that graph shares
SOURCE_INDEX = "source_index"


def is_hidden_attr(key: str) -> bool:
    """MXNet's hidden attributes (``__shape__``, ``__lr_mult__`` ...) are not op params."""
    return len(key) > 4 and key.startswith("__") and key.endswith("__")


@dataclass(frozen=True, slots=True)
class Entry:
    """One output of a node: ``(node, index)``.

    Equality and hashing use the node's identity, the output index and the
    version, so entries can key dicts and sets.
    """

    node: "Node"
    index: int = 0
    version: int = 0

    def __repr__(self) -> str:
        return f"Entry({self.node.ref}, {self.index})"

    @property
    def key(self) -> tuple["Node", int]:
        """Identity of the value, ignoring the version: ``(node, index)``.

        Inference results and every per-value table are keyed by it.  It holds the
        node itself (hashed by identity), not ``id(node)``: a key then keeps its node
        alive, so a number freed by a dropped node can never be mistaken for a new
        node's entry."""
        return (self.node, self.index)


class Node:
    """A vertex of the graph: a variable or an operator application.

    Attributes
    ----------
    op:
        MXNet operator name, or ``None`` for a variable.
    name:
        The node name, as MXNet names it.  Operator nodes may share a name (a
        Gluon block called twice exports two ``<prefix>fwd`` nodes; MXNet tells
        nodes apart by position), so messages name nodes by :attr:`ref`.
    attrs:
        Every attribute as the *string* MXNet stores, hidden ones included.
        Typed op parameters are derived from it on demand (:attr:`params`).
    subgraphs:
        Nested graphs (subgraph operators such as ``_CachedOp``).
    control_deps:
        Nodes that must run before this one (MXNet ``control_deps``).
    meta:
        Free-form per-node data for passes; never serialized.
    """

    __slots__ = ("_op", "_name", "_attrs", "_inputs", "_uses", "_subgraphs", "_control_deps",
                 "meta", "_params_cache", "__weakref__",
                 # the links of the one NodeList that owns this node (see nodelist.py)
                 "_owner", "_prev", "_next")

    def __init__(self, op: str | None, name: str, attrs: dict[str, str] | None = None,
                 inputs: Iterable[Entry] = (), subgraphs: Iterable["Graph"] = (),
                 control_deps: Iterable["Node"] = ()):
        self._op = op
        self._owner = None
        self._name = name
        self._attrs = WatchedDict(self, attrs or ())
        self._inputs: list[Entry] = []
        self._uses: dict[Node, int] = {}
        self._subgraphs = WatchedList(self, subgraphs)
        self._control_deps = WatchedList(self, control_deps)
        self.meta: dict[str, Any] = {}
        self._params_cache: tuple[dict, Any, str | None] | None = None
        self.inputs = list(inputs)

    #: renames of any node so far; name indexes (:class:`~.nodelist.NodeList`) compare it
    #: with the value they were built at, so ``node.name = ...`` never leaves one stale
    renames = 0
    #: edits of any node so far (op, name, attributes, inputs, subgraphs, control
    #: dependencies); the type cache of a graph whose nodes it cannot track one by one
    #: (see :mod:`.types`) compares it
    edits = 0

    def _edited(self) -> None:
        """Record an edit of this node: its own list's version moves, so the types
        cached on that graph (:meth:`Graph.types`) are recomputed on the next ask."""
        Node.edits += 1
        owner = getattr(self, "_owner", None)  # unset while a copy is being rebuilt
        if owner is not None:
            owner.version += 1

    # -- identity -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if value != self._name:
            self._name = value
            Node.renames += 1
            self._edited()

    @property
    def op(self) -> str | None:
        """MXNet operator name, or ``None`` for a variable."""
        return self._op

    @op.setter
    def op(self, value: str | None) -> None:
        if value != self._op:
            self._op = value
            self._edited()

    attrs = watched_attribute(
        WatchedDict, "Every attribute as MXNet's string; edits in place are seen "
                     "(:mod:`.watched`).")
    subgraphs = watched_attribute(
        WatchedList, "Nested graphs; edits in place are seen (:mod:`.watched`).")
    control_deps = watched_attribute(
        WatchedList, "Nodes that must run first; edits in place are seen (:mod:`.watched`).")

    @property
    def label(self) -> str:
        """The name, plus ``at index i`` when other nodes share it (see :attr:`ref`).

        Keys reports such as ``{host node: reason}`` so same-named nodes stay apart.
        """
        i = self.meta.get(SOURCE_INDEX) if self.meta else None
        return self._name if i is None else f"{self._name} at index {i}"

    @property
    def ref(self) -> str:
        """How messages name this node: ``'name'``, or ``'name' at index i``.

        The index (the node's position in the symbol JSON or textual IR it was
        read from) is added only when that graph gives other nodes the same
        name, so a message about one of Xception's two ``relu0_fwd`` nodes says
        which one; every other message keeps the plain quoted name.
        """
        i = self.meta.get(SOURCE_INDEX) if self.meta else None
        return repr(self._name) if i is None else f"{self._name!r} at index {i}"

    def __repr__(self) -> str:
        return f"<Node {self.ref} op={self.op or 'null'}>"

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def __getitem__(self, index: int) -> Entry:
        """``node[i]`` is the entry of output *i*."""
        return Entry(self, index)

    @property
    def out(self) -> Entry:
        """The entry of output 0."""
        return Entry(self, 0)

    # -- edges --------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Entry, ...]:
        return tuple(self._inputs)

    @inputs.setter
    def inputs(self, entries: Iterable[Entry]) -> None:
        for e in self._inputs:
            e.node._drop_use(self)
        new = list(entries)
        for e in new:
            if not isinstance(e, Entry):
                raise TypeError(f"node {self.name!r}: inputs must be Entry objects, got {e!r}")
            e.node._add_use(self)
        self._inputs = new
        self._edited()

    def set_input(self, i: int, entry: Entry) -> None:
        """Replace input *i* with *entry*, keeping use counts exact."""
        old = self._inputs[i]
        old.node._drop_use(self)
        entry.node._add_use(self)
        self._inputs[i] = entry
        self._edited()

    def replace_input(self, old: Entry, new: Entry) -> int:
        """Replace every use of *old* among this node's inputs; returns the count."""
        n = 0
        for i, e in enumerate(self._inputs):
            if e.key == old.key:
                self.set_input(i, Entry(new.node, new.index, new.version))
                n += 1
        return n

    def _add_use(self, user: "Node") -> None:
        self._uses[user] = self._uses.get(user, 0) + 1

    def _drop_use(self, user: "Node") -> None:
        n = self._uses.get(user, 0) - 1
        if n > 0:
            self._uses[user] = n
        else:
            self._uses.pop(user, None)

    @property
    def users(self) -> list["Node"]:
        """Nodes that consume any output of this node, in first-use order."""
        return list(self._uses)

    def num_uses(self, user: "Node | None" = None) -> int:
        """How many input slots (of *user*, or of all users) read this node."""
        if user is not None:
            return self._uses.get(user, 0)
        return sum(self._uses.values())

    def input_nodes(self) -> Iterator["Node"]:
        seen: set[int] = set()
        for e in self._inputs:
            if id(e.node) not in seen:
                seen.add(id(e.node))
                yield e.node

    def detach(self) -> None:
        """Drop this node's own input edges (used before erasing it)."""
        self.inputs = []
        self.control_deps = []

    # -- attributes ---------------------------------------------------------------
    @property
    def opdef(self):
        """The registered :class:`~mxc.compiler.ops.registry.OpDef` (None for variables)."""
        if self.op is None:
            return None
        from ..ops.registry import get_op
        return get_op(self.op, node=self)

    @property
    def params(self):
        """Typed operator parameters parsed from :attr:`attrs` by the op's schema (cached)."""
        cache = self._params_cache
        if cache is not None and cache[2] == self.op and cache[0] == self.attrs:
            return cache[1]  # one C-level dict comparison, no parsing
        visible = {k: v for k, v in self.attrs.items() if not is_hidden_attr(k)}
        opdef = self.opdef
        if opdef is None:
            from ..ops.registry import Params
            parsed = Params({}, node=self)
        else:
            parsed = opdef.parse_attrs(visible, node=self)
        self._params_cache = (dict(self.attrs), parsed, self.op)
        return parsed

    def hidden_attrs(self) -> dict[str, str]:
        return {k: v for k, v in self.attrs.items() if is_hidden_attr(k)}

    # -- arity (from the op definition) ------------------------------------------
    def num_outputs(self) -> int:
        """All outputs, including ones MXNet hides from ``list_outputs``."""
        if self.op is None:
            return 1
        return self.opdef.num_outputs(self.params)

    def num_visible_outputs(self) -> int:
        if self.op is None:
            return 1
        return self.opdef.num_visible_outputs(self.params)


def mark_repeated_names(nodes: list[Node]) -> int:
    """Stamp :data:`SOURCE_INDEX` on every node of *nodes* (one file's list, in its
    order) whose name another of them shares; returns how many were stamped.

    Readers call it once per graph read, so :attr:`Node.ref` can tell the
    nodes apart in messages while their names stay exactly as written.
    """
    seen: dict[str, int] = {}
    repeated: set[str] = set()
    for n in nodes:
        if n.name in seen:
            repeated.add(n.name)
        else:
            seen[n.name] = 1
    if not repeated:
        return 0
    count = 0
    for i, n in enumerate(nodes):
        if n.name in repeated:
            n.meta[SOURCE_INDEX] = i
            count += 1
    return count
