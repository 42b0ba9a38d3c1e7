"""The graph: nodes, output entries, and the queries MXNet users rely on.

A :class:`Graph` owns its nodes (a :class:`~.nodelist.NodeList`: reads like a
list, but inserting, erasing, membership, name lookup and fresh names are
O(1), as in torch.fx) and the list of output entries (MXNet's ``heads``).  The
node list is kept in a valid topological order by the frontend and by the
mutation helpers; :meth:`Graph.topo_order` recomputes MXNet's own
order (post-order DFS from the heads, inputs before control dependencies),
which is the order MXNet uses for ``list_arguments`` and when it writes JSON.

All traversals are iterative so 100k-node graphs do not hit Python's
recursion limit.

This module is the floor of the IR: the text form, the verifier and inference
(which needs the operator registry) are built on it, so it never imports them.
The convenience methods that reach them -- ``str(graph)``, :meth:`Graph.verify`,
:meth:`Graph.types` -- call what :func:`connect_layers` was given; the
``mxc.compiler`` package connects them when it is imported, which Python does
before any module under it, hence before any graph exists.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ...errors import GraphError
from .node import Entry, Node
from .nodelist import NodeList
from .types import GraphTypes, Key, TypeCache


#: the functions of the layers built on this module (see the module docs), by name
_LAYERS: dict[str, Callable[..., Any]] = {}


def connect_layers(*, print_graph: Callable[..., str], verify_graph: Callable[..., None],
                   question: Callable[..., tuple], infer: Callable[..., dict]) -> None:
    """Give :class:`Graph`'s convenience methods the layers built on this module:
    the text printer (``str(graph)``), the verifier (:meth:`Graph.verify`), and
    inference's question normaliser and whole-graph inference (:meth:`Graph.types`).
    Called by ``mxc/compiler/__init__.py``."""
    _LAYERS.update(print_graph=print_graph, verify_graph=verify_graph, question=question,
                   infer=infer)


def _layer(name: str) -> Callable[..., Any]:
    fn = _LAYERS.get(name)
    if fn is None:  # only while mxc.compiler itself is still being imported
        raise GraphError(f"Graph needs {name}, which mxc.compiler connects once it is "
                         f"imported (see mxc.compiler.ir.graph)")
    return fn


class Graph:
    """A dataflow graph of MXNet operators.

    Parameters
    ----------
    nodes:
        The nodes, in topological order.
    outputs:
        The graph's output entries (MXNet ``heads``).
    attrs:
        Graph-level attributes (``mxnet_version`` ...), kept for round trips.
    """

    def __init__(self, nodes: Iterable[Node] = (), outputs: Iterable[Entry] = (),
                 attrs: dict | None = None):
        self._nodes = NodeList(nodes)
        self.outputs: list[Entry] = list(outputs)
        self.attrs: dict = dict(attrs or {})
        #: where :meth:`add_node` puts a node given no position: None (the end) or
        #: ("before" | "after", anchor), set by :meth:`inserting_before`/:meth:`inserting_after`
        self._insert_point: tuple[str, Node] | None = None
        #: inferred types, per question, valid while the graph is unchanged (:meth:`types`)
        self._types = TypeCache()

    @property
    def nodes(self) -> NodeList:
        """The nodes in order; assigning any iterable of nodes replaces them."""
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: Iterable[Node]) -> None:
        held = list(self._types.current(self)) if len(self._types) else []
        self._nodes = NodeList(nodes)
        if held:  # a new order edits no node: what was inferred still holds
            self._types.relisted(self, held)

    def __repr__(self) -> str:
        return f"<Graph {len(self.nodes)} nodes, {len(self.outputs)} outputs>"

    def __str__(self) -> str:
        return _layer("print_graph")(self)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: Node) -> bool:
        return node in self._nodes

    # -- lookup -------------------------------------------------------------------
    def node(self, name: str) -> Node:
        """The node called *name* (first match); raises :class:`GraphError`."""
        found = self._nodes.find(name)
        if found is None:
            raise GraphError(f"graph has no node named {name!r}")
        return found

    def find(self, name: str) -> Node | None:
        """The node called *name* (first match), or None; O(1)."""
        return self._nodes.find(name)

    @property
    def is_np_shape(self) -> bool:
        """True for a graph written under NumPy shape semantics (``npx.set_np()``).

        MXNet records it as the graph attribute ``is_np_shape`` (``["int", 1]``):
        shapes in its hidden ``__shape__`` attributes then use -1 for an
        unknown extent, 0 is a real (empty) extent and ``()`` a 0-d array.
        """
        v = self.attrs.get("is_np_shape")
        if isinstance(v, (list, tuple)) and len(v) == 2:
            v = v[1]
        try:
            return int(v) != 0
        except (TypeError, ValueError):
            return False

    def op_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.op is not None]

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            if n.op is not None:
                counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    # -- inferred types ------------------------------------------------------------
    def types(self, shapes: Mapping[str, Sequence[int | None]] | None = None,
              dtypes: Mapping[str, Any] | None = None) -> GraphTypes:
        """Shapes and dtypes of every entry reachable from the outputs.

        *shapes*/*dtypes* give inputs' values by name (others come from their
        ``__shape__``/``__dtype__`` attributes); dtypes are numpy names or
        MXNet type flags.  Inferred once per graph state and question, then
        kept here until a node, the outputs or the registered operators change
        (:mod:`.types`).  Raises :class:`~mxc.errors.ShapeError` /
        :class:`~mxc.errors.DTypeError` where the graph is inconsistent.
        """
        return GraphTypes(self.inferred_shapes(shapes), self.inferred_dtypes(dtypes))

    def inferred_shapes(self, given: Mapping[str, Sequence[int | None]] | None = None
                        ) -> Mapping[Key, tuple | None]:
        """Shapes only (see :meth:`types`): ``{Entry.key: shape or None}``, read-only."""
        return self._types.answer(self, _layer("question")("shape", given), _layer("infer"))

    def inferred_dtypes(self, given: Mapping[str, Any] | None = None
                        ) -> Mapping[Key, str | None]:
        """Dtypes only (see :meth:`types`): ``{Entry.key: numpy name or None}``, read-only."""
        return self._types.answer(self, _layer("question")("dtype", given), _layer("infer"))

    # -- traversal ----------------------------------------------------------------
    def topo_order(self, heads: Iterable[Entry] | None = None) -> list[Node]:
        """MXNet's post-order DFS from *heads* (default: the outputs).

        Children are visited inputs first, then control dependencies; each node
        appears once.  Nodes unreachable from the heads are not listed.
        """
        return post_order(n.node for n in (self.outputs if heads is None else heads))

    def reachable(self) -> list[Node]:
        return self.topo_order()

    def input_nodes(self) -> list[Node]:
        """Variables in MXNet's ``list_inputs`` order."""
        return [n for n in self.topo_order() if n.op is None]

    def mutable_input_nodes(self) -> set[int]:
        """ids of variables some op mutates (MXNet's auxiliary states)."""
        mutable: set[int] = set()
        for n in self.topo_order():
            if n.op is None:
                continue
            for i in n.opdef.mutable_inputs(n.params):
                if i < len(n.inputs):
                    mutable.add(id(n.inputs[i].node))
        return mutable

    def argument_nodes(self) -> list[Node]:
        mutable = self.mutable_input_nodes()
        return [n for n in self.input_nodes() if id(n) not in mutable]

    def aux_nodes(self) -> list[Node]:
        mutable = self.mutable_input_nodes()
        return [n for n in self.input_nodes() if id(n) in mutable]

    def unused_inputs(self) -> set[str]:
        """Names of inputs that only feed slots inference never reads (labels).

        Asked of each op's :meth:`~mxc.compiler.ops.registry.OpDef.unused_inputs`;
        an input that is also a graph output counts as used.
        """
        used: set[str] = set()
        ignored: set[str] = set()
        for node in self.topo_order():
            if node.op is None:
                continue
            skip = set(node.opdef.unused_inputs(node.params))
            for i, e in enumerate(node.inputs):
                if e.node.op is None:
                    (ignored if i in skip else used).add(e.node.name)
        return ignored - used - {e.node.name for e in self.outputs}

    def list_inputs(self) -> list[str]:
        return [n.name for n in self.input_nodes()]

    def list_arguments(self) -> list[str]:
        return [n.name for n in self.argument_nodes()]

    def list_auxiliary_states(self) -> list[str]:
        return [n.name for n in self.aux_nodes()]

    def output_name(self, entry: Entry) -> str:
        """The name MXNet's ``list_outputs`` gives an entry."""
        node = entry.node
        if node.op is None:
            return node.name
        names = node.opdef.output_names(node.params)
        suffix = names[entry.index] if entry.index < len(names) else f"output{entry.index}"
        return f"{node.name}_{suffix}"

    def list_outputs(self) -> list[str]:
        return [self.output_name(e) for e in self.outputs]

    # -- mutation -----------------------------------------------------------------
    def add_node(self, node: Node, *, before: Node | None = None,
                 after: Node | None = None) -> Node:
        """Insert *node* (O(1)): before/after a given node, else at the insertion point.

        The insertion point is the end of the graph (valid if the node's inputs
        exist) unless an :meth:`inserting_before`/:meth:`inserting_after` block
        moved it.
        """
        if before is not None:
            return self._nodes.insert_before(before, node)
        if after is not None:
            return self._nodes.insert_after(after, node)
        point = self._insert_point
        if point is None:
            self._nodes.append(node)
        elif point[0] == "before":
            self._nodes.insert_before(point[1], node)
        else:
            self._nodes.insert_after(point[1], node)
            self._insert_point = ("after", node)  # the next one follows this one
        return node

    def inserting_before(self, node: Node | None):
        """``with graph.inserting_before(n):`` nodes added without a position go before *n*.

        ``None`` restores the default (the end of the graph).
        """
        return self._inserting(None if node is None else ("before", node))

    def inserting_after(self, node: Node | None):
        """``with graph.inserting_after(n):`` nodes added without a position follow *n*.

        They keep the order they are added in (unlike torch.fx, each new node
        goes after the previous one); ``None`` means the end of the graph.
        """
        return self._inserting(None if node is None else ("after", node))

    @contextlib.contextmanager
    def _inserting(self, point: tuple[str, Node] | None):
        old, self._insert_point = self._insert_point, point
        try:
            yield
        finally:
            self._insert_point = old

    def create_node(self, op: str | None, name: str, inputs: Iterable[Entry] = (),
                    attrs: dict[str, str] | None = None, **where) -> Node:
        """Create and insert a node in one step; returns it."""
        return self.add_node(Node(op, name, attrs, inputs), **where)

    def erase_node(self, node: Node) -> None:
        """Remove *node* (O(1) plus its outputs); refuses while anything still uses it."""
        if node.users:
            users = ", ".join(repr(u.name) for u in node.users)
            raise GraphError(f"cannot erase node {node.ref}: still used by {users}")
        if any(e.node is node for e in self.outputs):
            raise GraphError(f"cannot erase node {node.ref}: it is a graph output")
        node.detach()
        self._nodes.remove(node)

    def replace_all_uses_with(self, old: Entry | Node, new: Entry | Node, *,
                              exclude: Iterable[Node] = ()) -> int:
        """Point every use of *old* (node inputs and graph outputs) at *new*; returns the count.

        Uses by the *exclude* nodes are kept (pass *new*'s own node when the
        replacement is built on top of *old*, so it does not end up reading
        itself).  O(uses of *old* + outputs).
        """
        old, new = as_entry(old), as_entry(new)
        skip = {id(n) for n in exclude}
        count = 0
        for user in old.node.users:
            if id(user) not in skip:
                count += user.replace_input(old, new)
        for i, e in enumerate(self.outputs):
            if e.key == old.key:
                self.outputs[i] = Entry(new.node, new.index, new.version)
                count += 1
        return count

    def eliminate_dead_code(self, keep: Callable[[Node], bool] | None = None) -> list[Node]:
        """Remove nodes no output depends on; returns the removed nodes."""
        live = {id(n) for n in self.topo_order()}
        dead = [n for n in self.nodes if id(n) not in live and not (keep and keep(n))]
        for n in dead:
            n.detach()
            self._nodes.remove(n)
        return dead

    def sort(self) -> None:
        """Reorder :attr:`nodes` topologically (MXNet order first, then the rest)."""
        order = self.topo_order()
        seen = {id(n) for n in order}
        rest = [n for n in self.nodes if id(n) not in seen]
        self.nodes = order + post_order(rest) if rest else order

    def fresh_name(self, base: str) -> str:
        """A node name not yet used in this graph (O(1) amortized: a counter per base)."""
        return self._nodes.fresh_name(base)

    # -- copies and checks --------------------------------------------------------
    def copy(self) -> "Graph":
        """A deep copy: new nodes, attrs, nested subgraphs; meta copied shallowly."""
        return copy_graph(self)[0]

    def verify(self, *, types: bool = True) -> None:
        """Check the invariants; raises :class:`~mxc.errors.VerificationError`.

        With *types*, also infer afresh every question whose answer is cached
        and current (:meth:`types`) and compare: an edit the cache missed
        shows up here.
        """
        _layer("verify_graph")(self, types=types)


def as_entry(value: Entry | Node) -> Entry:
    """*value* as an entry: a node stands for its output 0."""
    if isinstance(value, Node):
        return value.out
    if not isinstance(value, Entry):
        raise TypeError(f"expected an Entry or a Node, got {type(value).__name__}")
    return value


#: deepest nesting of subgraphs accepted (readers, the printer and verify() refuse more
#: with a typed error instead of recursing without bound; real models nest a few levels)
MAX_SUBGRAPH_DEPTH = 64


def subgraph_depth(graph: Graph, limit: int | None = None) -> int:
    """Levels of nested subgraphs in *graph* (1: none), computed without recursion.

    Stops counting once *limit* is exceeded (returns ``limit + 1``).
    """
    deepest = 1
    stack = [(graph, 1)]
    while stack:
        g, depth = stack.pop()
        deepest = max(deepest, depth)
        if limit is not None and deepest > limit:
            return limit + 1
        for node in g.nodes:
            for sub in node.subgraphs:
                stack.append((sub, depth + 1))
    return deepest


def check_subgraph_depth(graph: Graph, what: str = "graph") -> None:
    """Raise :class:`GraphError` when *graph* nests more than MAX_SUBGRAPH_DEPTH levels."""
    if subgraph_depth(graph, MAX_SUBGRAPH_DEPTH) > MAX_SUBGRAPH_DEPTH:
        raise GraphError(f"{what}: subgraphs nested more than {MAX_SUBGRAPH_DEPTH} levels "
                         f"deep; mxc refuses deeper nesting")


def post_order(roots: Iterable[Node]) -> list[Node]:
    """MXNet's DFS post-order (inputs, then control deps) from *roots*, each node once.

    Iterative, with explicit index stacks (no generators) because partitioning
    runs it on 100k-node graphs.  Raises :class:`GraphError` on a cycle.
    """
    order: list[Node] = []
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    append = order.append
    for root in roots:
        if id(root) in state:
            continue
        state[id(root)] = 1
        nodes = [root]
        kids_stack = [_children(root)]
        pos = [0]
        while nodes:
            kids = kids_stack[-1]
            i = pos[-1]
            n = len(kids)
            while i < n:
                child = kids[i]
                i += 1
                s = state.get(id(child))
                if s is None:
                    break
                if s == 1:
                    raise GraphError(f"graph has a cycle through node {child.name!r}")
            else:
                node = nodes.pop()
                kids_stack.pop()
                pos.pop()
                state[id(node)] = 2
                append(node)
                continue
            pos[-1] = i
            state[id(child)] = 1
            nodes.append(child)
            kids_stack.append(_children(child))
            pos.append(0)
    return order


def _children(node: Node) -> list[Node]:
    if node.control_deps:
        return [e.node for e in node.inputs] + list(node.control_deps)
    return [e.node for e in node.inputs]


def copy_graph(graph: Graph, *, reachable_only: bool = False) -> tuple[Graph, dict[int, Node]]:
    """Deep-copy *graph*; also returns ``{id(old node): new node}``.

    By default every listed node is copied and the list order kept; with
    *reachable_only* only what the outputs reach is copied, in DFS post-order
    (the cheaper copy partitioning makes of 100k-node graphs).  Node meta is
    copied shallowly, nested subgraphs deeply.
    """
    if reachable_only:
        order = post_order(e.node for e in graph.outputs)
        acyclic = True
    else:
        # producers first even if graph.nodes is unsorted; a cycle keeps the list order
        try:
            order, acyclic = post_order(graph.nodes), True
        except GraphError:
            order, acyclic = list(graph.nodes), False
    mapping: dict[int, Node] = {}
    for n in order:
        new = Node(n.op, n.name, dict(n.attrs),
                   [Entry(mapping[id(e.node)], e.index, e.version) for e in n.inputs]
                   if acyclic else (),
                   [g.copy() for g in n.subgraphs] if n.subgraphs else (),
                   [mapping[id(c)] for c in n.control_deps] if acyclic and n.control_deps
                   else ())
        if n.meta:
            new.meta = dict(n.meta)
        mapping[id(n)] = new
    if not acyclic:  # wire the edges once every copy exists
        for n in order:
            new = mapping[id(n)]
            new.inputs = [Entry(mapping[id(e.node)], e.index, e.version) for e in n.inputs]
            new.control_deps = [mapping[id(c)] for c in n.control_deps]
    listed = order if reachable_only else graph.nodes
    nodes = [mapping[id(n)] for n in listed if id(n) in mapping]
    outputs = [Entry(mapping[id(e.node)], e.index, e.version) for e in graph.outputs]
    copy = Graph(nodes, outputs, dict(graph.attrs))
    if acyclic and len(graph._types):  # the copy is the same graph: its types too
        graph._types.copied_to(copy, mapping, list(graph._types.current(graph)))
    return copy, mapping
