"""Entry points: :func:`partition_graph` and :func:`optimize_graph`.

Both return a new graph and leave their input untouched.

``partition_graph(graph, "default", op_names="exp,sin")`` is MXNet's
partitioning alone (``BuildSubgraph`` for each property of the backend).
``optimize_graph`` is what ``Symbol.optimize_for`` runs (MXNet's
``MXOptimizeForBackend`` plus Gluon's ``clear``): optional shape/dtype
inference first, then the subgraph backend's properties in order (graph
passes are dispatched earlier, by :mod:`mxc.compiler.optimize`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ...errors import PartitionError
from ..ir import Entry, Graph, Node
from ._graphutil import copy_reachable, gc_paused, post_order_fast
from .algorithm import build_subgraph
from .property import PartitionContext, SubgraphProperty
from .registry import get_subgraph_backend

__all__ = ["partition_graph", "optimize_graph", "option_string", "clear_partitions",
           "EXT_SHAPE_ATTR", "EXT_DTYPE_ATTR"]

#: MXNet's ``MX_STR_SHAPE`` / ``MX_STR_DTYPE``: per-output shapes/dtypes a
#: custom partitioner sees on (and leaves on) every node when shapes are known.
EXT_SHAPE_ATTR = "__ext_shape__"
EXT_DTYPE_ATTR = "__ext_dtype__"
_PARTITION_ATTRS = (EXT_SHAPE_ATTR, EXT_DTYPE_ATTR)


def option_string(value: Any) -> str:
    """An option value as the string MXNet's C API would pass.

    Strings stay; a list/tuple/set of strings becomes ``"a,b"``; booleans
    ``"True"``/``"False"``; anything else ``str()``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str)
                                                                 for v in value):
        return ",".join(value)
    return str(value)


def _properties(backend_or_property: Any) -> tuple[str, list[SubgraphProperty]]:
    """(name, fresh property instances) for a backend name, property or list."""
    if isinstance(backend_or_property, str):
        backend = get_subgraph_backend(backend_or_property)
        return backend.name, backend.create_properties()
    items = backend_or_property if isinstance(backend_or_property, (list, tuple)) \
        else [backend_or_property]
    props = []
    for item in items:
        if isinstance(item, type) and issubclass(item, SubgraphProperty):
            item = item()
        if not isinstance(item, SubgraphProperty):
            raise PartitionError(f"expected a backend name or SubgraphProperty, got {item!r}")
        props.append(item)
    name = props[0].name if len(props) == 1 else "+".join(p.name for p in props)
    return name, props


def partition_graph(graph: Graph, backend_or_property: Any, **options: Any) -> Graph:
    """Partition *graph* with a backend (by name) or property object(s).

    *options* are passed to the properties as strings (see
    :func:`option_string`): ``partition_graph(g, "default",
    op_names=["exp", "sin"])``.  Returns a new graph.
    """
    name, props = _properties(backend_or_property)
    opts = {k: option_string(v) for k, v in options.items()}
    with gc_paused():
        work = copy_reachable(graph)
        ordered = True
        for prop in props:
            if prop.disabled:
                continue
            build_subgraph(work, prop, PartitionContext(backend=name, options=dict(opts)),
                           dfs_ordered=ordered)
            ordered = _keeps_order(prop)
    return work


def _keeps_order(prop: SubgraphProperty) -> bool:
    """After a run ``graph.nodes`` is in DFS order, unless post_partition edited it."""
    return getattr(type(prop), "post_partition") is SubgraphProperty.post_partition


def optimize_graph(graph: Graph, backend: str, *, options: Mapping[str, str] | None = None,
                   shapes: Mapping[str, Iterable[int]] | None = None,
                   dtypes: Mapping[str, Any] | None = None, clear: bool = True,
                   params: Mapping[str, Any] | None = None) -> Graph:
    """What ``Symbol.optimize_for(backend, ...)`` does to the symbol's graph.

    options:
        Backend options, strings (non-strings are converted with
        :func:`option_string`).
    shapes, dtypes:
        Input name -> shape / dtype.  When given, shapes and dtypes of every
        entry are inferred before each property runs and exposed to it
        (:class:`PartitionContext`); custom partitioners also see them as
        ``__ext_shape__``/``__ext_dtype__`` node attributes, as in MXNet.
    clear:
        True (MXNet Gluon's default): start from the unpartitioned graph --
        existing subgraph nodes are inlined back and the ``__ext_shape__``/
        ``__ext_dtype__`` attributes of earlier partitioning removed.  False:
        keep earlier regions; existing subgraph nodes are left as they are
        and never join a new region (their nested nodes are not touched).

    params:
        The arrays given to ``optimize_for``, ``{"args": {name: array}, "aux":
        {...}}``, handed to partitioners that review subgraphs with the
        parameter tensors (MXNet's ``reviewSubgraph``).

    Returns a new graph; raises :class:`~mxc.errors.PartitionError` for an
    unknown backend (listing the registered ones).
    """
    opts = {k: option_string(v) for k, v in (options or {}).items()}
    get_subgraph_backend(backend)  # raises early, listing the registered backends
    with gc_paused():
        return _optimize(graph, backend, opts, shapes, dtypes, clear, dict(params or {}))


def _optimize(graph, backend, opts, shapes, dtypes, clear, params=None) -> Graph:
    work = copy_reachable(graph)
    if clear:
        clear_partitions(work)
    frozen = set() if clear else {id(n) for n in work.nodes if _is_subgraph_node(n)}
    name, props = _properties(backend)
    ordered = True
    for prop in props:
        if prop.disabled:
            continue
        ctx = PartitionContext(backend=name, options=dict(opts), frozen=frozen,
                               params=dict(params or {}))
        if shapes is not None or dtypes is not None:
            given = {k: tuple(v) for k, v in (shapes or {}).items()}
            ctx.shapes = work.inferred_shapes(given)   # a copy: it starts with the
            ctx.dtypes = work.inferred_dtypes(dtypes)   # original's types, until edited
        build_subgraph(work, prop, ctx, dfs_ordered=ordered)
        ordered = _keeps_order(prop)
    return work


def _is_subgraph_node(node: Node) -> bool:
    if node.op is None or not node.subgraphs:
        return False
    try:
        return bool(node.opdef.is_subgraph_op) and getattr(node.opdef, "is_region", True)
    except Exception:  # noqa: BLE001 - an unknown op with a nested graph
        return False


def clear_partitions(graph: Graph) -> Graph:
    """Undo partitioning in place: inline subgraph nodes, drop ``__ext_*`` attributes.

    Every node of a registered subgraph operator carrying a nested graph is
    replaced by the nested graph's nodes (recursively), its nested inputs
    wired to the node's inputs (extra inputs are dropped).  Returns *graph*.
    """
    repl: dict[tuple[int, int], Entry] = {}

    def remap(e: Entry) -> Entry:
        r = repl.get(e.key)
        return e if r is None else r

    changed = False
    for node in post_order_fast(e.node for e in graph.outputs):
        if repl and any(e.key in repl for e in node.inputs):
            node.inputs = [remap(e) for e in node.inputs]
        for k in _PARTITION_ATTRS:
            node.attrs.pop(k, None)
        if not _is_subgraph_node(node):
            continue
        changed = True
        nested = node.subgraphs[0]
        clear_partitions(nested)
        feeds = {id(v): e for v, e in zip(nested.input_nodes(), node.inputs)}
        for inner in nested.topo_order():
            if inner.op is None:
                continue
            if any(id(e.node) in feeds for e in inner.inputs):
                inner.inputs = [_rewire(e, feeds) for e in inner.inputs]
        for i, head in enumerate(nested.outputs):
            repl[(node, i)] = _rewire(head, feeds)
    if changed:
        graph.outputs = [remap(e) for e in graph.outputs]
        graph.nodes = post_order_fast(e.node for e in graph.outputs)
    return graph


def _rewire(e: Entry, feeds: dict[int, Entry]) -> Entry:
    outer = feeds.get(id(e.node))
    if outer is None:
        return e
    return Entry(outer.node, outer.index, outer.version)
