"""The graph: nodes, output entries, and the queries MXNet users rely on.

A :class:`Graph` owns a list of nodes and the list of output entries (MXNet's
``heads``).  The node list is kept in a valid topological order by the frontend
and by the mutation helpers; :meth:`Graph.topo_order` recomputes MXNet's own
order (post-order DFS from the heads, inputs before control dependencies),
which is the order MXNet uses for ``list_arguments`` and when it writes JSON.

All traversals are iterative so 100k-node graphs do not hit Python's
recursion limit.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from ...errors import GraphError
from .node import Entry, Node


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
        self.nodes: list[Node] = list(nodes)
        self.outputs: list[Entry] = list(outputs)
        self.attrs: dict = dict(attrs or {})

    def __repr__(self) -> str:
        return f"<Graph {len(self.nodes)} nodes, {len(self.outputs)} outputs>"

    def __str__(self) -> str:
        from .text import print_graph
        return print_graph(self)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    # -- lookup -------------------------------------------------------------------
    def node(self, name: str) -> Node:
        """The node called *name* (first match); raises :class:`GraphError`."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph has no node named {name!r}")

    def find(self, name: str) -> Node | None:
        for n in self.nodes:
            if n.name == name:
                return n
        return None

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
        """Insert *node*; by default at the end (valid if its inputs exist)."""
        if before is not None:
            self.nodes.insert(self.nodes.index(before), node)
        elif after is not None:
            self.nodes.insert(self.nodes.index(after) + 1, node)
        else:
            self.nodes.append(node)
        return node

    def create_node(self, op: str | None, name: str, inputs: Iterable[Entry] = (),
                    attrs: dict[str, str] | None = None, **where) -> Node:
        """Create and insert a node in one step; returns it."""
        return self.add_node(Node(op, name, attrs, inputs), **where)

    def erase_node(self, node: Node) -> None:
        """Remove *node*; refuses while anything still uses it."""
        if node.users:
            users = ", ".join(repr(u.name) for u in node.users)
            raise GraphError(f"cannot erase node {node.name!r}: still used by {users}")
        if any(e.node is node for e in self.outputs):
            raise GraphError(f"cannot erase node {node.name!r}: it is a graph output")
        node.detach()
        self.nodes.remove(node)

    def replace_all_uses_with(self, old: Entry, new: Entry) -> int:
        """Point every use of *old* (node inputs and graph outputs) at *new*."""
        count = 0
        for user in old.node.users:
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
        dead_ids = {id(n) for n in dead}
        self.nodes = [n for n in self.nodes if id(n) not in dead_ids]
        return dead

    def sort(self) -> None:
        """Reorder :attr:`nodes` topologically (MXNet order first, then the rest)."""
        order = self.topo_order()
        seen = {id(n) for n in order}
        rest = [n for n in self.nodes if id(n) not in seen]
        self.nodes = order + post_order(rest) if rest else order

    def fresh_name(self, base: str) -> str:
        """A node name not yet used in this graph."""
        names = {n.name for n in self.nodes}
        if base not in names:
            return base
        i = 0
        while f"{base}{i}" in names:
            i += 1
        return f"{base}{i}"

    # -- copies and checks --------------------------------------------------------
    def copy(self) -> "Graph":
        """A deep copy: new nodes, attrs, nested subgraphs; meta copied shallowly."""
        return copy_graph(self)[0]

    def verify(self) -> None:
        """Check the invariants; raises :class:`~mxc.errors.VerificationError`."""
        from .verify import verify_graph
        verify_graph(self)


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
    """Iterative post-order DFS (inputs, then control deps), each node once.

    Raises :class:`GraphError` on a cycle.
    """
    order: list[Node] = []
    state: dict[int, int] = {}  # 1 = on stack, 2 = done
    for root in roots:
        if state.get(id(root)) == 2:
            continue
        stack: list[tuple[Node, Iterator[Node]]] = [(root, _children(root))]
        state[id(root)] = 1
        while stack:
            node, it = stack[-1]
            for child in it:
                s = state.get(id(child))
                if s is None:
                    state[id(child)] = 1
                    stack.append((child, _children(child)))
                    break
                if s == 1:
                    raise GraphError(f"graph has a cycle through node {child.name!r}")
            else:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
    return order


def _children(node: Node) -> Iterator[Node]:
    for e in node.inputs:
        yield e.node
    yield from node.control_deps


def copy_graph(graph: Graph) -> tuple[Graph, dict[int, Node]]:
    """Deep-copy *graph*; also returns ``{id(old node): new node}``."""
    mapping: dict[int, Node] = {}
    new_nodes: list[Node] = []
    order = graph.nodes
    # copy in an order where producers come first even if graph.nodes is unsorted
    try:
        order = post_order(graph.nodes)
    except GraphError:
        pass
    for n in order:
        new = Node(n.op, n.name, dict(n.attrs),
                   subgraphs=[g.copy() for g in n.subgraphs])
        new.meta = dict(n.meta)
        mapping[id(n)] = new
        new_nodes.append(new)
    for n in order:
        new = mapping[id(n)]
        new.inputs = [Entry(mapping[id(e.node)], e.index, e.version) for e in n.inputs]
        new.control_deps = [mapping[id(c)] for c in n.control_deps]
    # keep the original list order
    ordered = [mapping[id(n)] for n in graph.nodes if id(n) in mapping]
    outputs = [Entry(mapping[id(e.node)], e.index, e.version) for e in graph.outputs]
    return Graph(ordered, outputs, dict(graph.attrs)), mapping
