"""Custom partitioners: MXNet's ``REGISTER_PARTITIONER`` in Python.

A partitioner is a named backend made of one or more *strategies*, run in
order (each over the graph the previous one produced).  A strategy names the
subgraph operator its regions become and says which nodes go together,
either with ``supported_ops`` or with ``create_selector``; an optional
``review_subgraph`` accepts or rejects each region and may attach
attributes to it::

    from mxc.compiler.partition import register_partitioner, ANY_SUBGRAPH

    def supported_ops(graph, ids, options):
        for i, node in enumerate(graph.nodes):          # topological order
            if node.op in ("exp", "log"):
                ids[i] = ANY_SUBGRAPH                   # may join any region

    def review_subgraph(subgraph, subgraph_id, options):
        if options.get("reject") == "True":
            return False                                # keep the nodes as they were
        subgraph.attrs["myKey"] = "myVal"               # lands on the subgraph node
        return True

    (register_partitioner("myProp")
        .add_strategy("strategy1", "_custom_subgraph_op")
        .set_supported_ops("strategy1", supported_ops)
        .set_review_subgraph("strategy1", review_subgraph))

    part = optimize_graph(graph, "myProp", options={"reject": "False"})

The C++ names map one to one: ``addStrategy(name, op)`` ->
:meth:`Partitioner.add_strategy`, ``setSupportedOps`` ->
:meth:`Partitioner.set_supported_ops`, ``setCreateSelector`` ->
:meth:`Partitioner.set_create_selector`, ``setReviewSubgraph`` ->
:meth:`Partitioner.set_review_subgraph` (each also a keyword argument of
``add_strategy``).  Return values replace ``MXReturnValue``: a callback
fails by raising (reported as a :class:`~mxc.errors.PartitionError` naming
the partitioner, strategy and nodes) or by returning ``False`` from
``supported_ops``.

**supported_ops(graph, ids, options)**: *graph* is a copy of the graph
being partitioned whose ``graph.nodes`` are in topological order (variables
included); ``ids[i]`` belongs to ``graph.nodes[i]`` and starts as
:data:`UNSUPPORTED` (-2, MXNet's initial value).  Set :data:`ANY_SUBGRAPH`
(-1) for a node that may join any region, or ``k >= 0`` to confine it to
regions of nodes marked ``k`` (a node joins a region grown from node *n*
when its id equals *n*'s or is -1).  Variables never join a region.

**create_selector(graph, options)**: returns an object with
``select(id)``, ``select_input(id, input_id)``, ``select_output(id,
output_id)`` and optionally ``filter(candidate_ids) -> kept_ids`` (a subset)
and ``reset()``; ids index ``graph.nodes`` as above.  One selector serves
the whole strategy, as MXNet's ``CustomOpSelector``.

**review_subgraph(subgraph, subgraph_id, options)**: *subgraph* is a copy
of the region's nested graph (its variables carry ``isArg``/``argName``/
``isAux``); return ``True``/``None`` to accept, ``False`` to reject, or
``(accept, {key: value})``.  Attributes set in ``subgraph.attrs`` or
returned are stored (as strings) on the subgraph node and reach the
subgraph operator at run time (``node.attrs``).

*options* are the user's options, every value a string.  When shapes and
dtypes are known (``optimize_graph(..., shapes=...)``) every node carries
``__ext_shape__`` (``"[[2,3]]"``: one shape per output, ``[None]`` unknown)
and ``__ext_dtype__`` (``"[0]"``: MXNet type flags, ``-1`` unknown), as MXNet
sets ``MX_STR_SHAPE``/``MX_STR_DTYPE``; the nested inputs get their entry's
``[shape]``/``[dtype]`` and the subgraph node one per output
(:func:`parse_ext_shapes` / :func:`parse_ext_dtypes` read them back).

A region becomes a node of the strategy's operator named ``_op<subgraph
id>``.  The operator must be a subgraph operator
(:func:`mxc.compiler.ops.subgraph.register_subgraph_op`, with your own
forward); if no operator of that name exists, one that runs the nested graph
is registered on first use.  Extra inputs (``__ext_extra_inputs__``, added by
a later graph pass) are supported by every subgraph operator.
"""

from __future__ import annotations

from typing import Any, Callable

from ...errors import MxcError, PartitionError
from ...registry import Registry
from ..ir import Entry, Graph, Node, copy_graph
from ..ops.registry import DTYPE_FROM_FLAG, FLAG_FROM_DTYPE
from ._graphutil import post_order_fast
from .api import EXT_DTYPE_ATTR, EXT_SHAPE_ATTR
from .property import PartitionContext, SubgraphProperty
from .registry import register_subgraph_backend
from .selector import SubgraphSelector

__all__ = ["UNSUPPORTED", "ANY_SUBGRAPH", "Strategy", "Partitioner", "register_partitioner",
           "get_partitioner", "CustomSubgraphProperty", "shape_at", "dtype_at",
           "parse_ext_shapes", "parse_ext_dtypes", "annotate_ext_attrs"]

#: ``ids`` value of a node ``supported_ops`` did not mark (MXNet's -2).
UNSUPPORTED = -2
#: ``ids`` value of a node that may join any region (MXNet's -1).
ANY_SUBGRAPH = -1


class Strategy:
    """One partitioning pass of a :class:`Partitioner`."""

    def __init__(self, name: str, subgraph_op: str, supported_ops: Callable | None = None,
                 create_selector: Callable | None = None,
                 review_subgraph: Callable | None = None):
        self.name = name
        self.subgraph_op = subgraph_op
        self.supported_ops = supported_ops
        self.create_selector = create_selector
        self.review_subgraph = review_subgraph

    def __repr__(self) -> str:
        return f"<Strategy {self.name!r} -> {self.subgraph_op}>"


class Partitioner:
    """A named list of strategies (MXNet's ``CustomPartitioner``)."""

    def __init__(self, name: str):
        self.name = name
        self.strategies: list[Strategy] = []

    def __repr__(self) -> str:
        return f"<Partitioner {self.name!r}: {self.strategies}>"

    def add_strategy(self, name: str, subgraph_op: str, *,
                     supported_ops: Callable | None = None,
                     create_selector: Callable | None = None,
                     review_subgraph: Callable | None = None) -> "Partitioner":
        """Append strategy *name* creating *subgraph_op* nodes; returns self."""
        if any(s.name == name for s in self.strategies):
            raise PartitionError(f"partitioner {self.name!r} already has a strategy {name!r}")
        if not isinstance(subgraph_op, str) or not subgraph_op:
            raise PartitionError(f"partitioner {self.name!r} strategy {name!r}: the subgraph "
                                 f"operator name must be a non-empty string")
        self.strategies.append(Strategy(name, subgraph_op, supported_ops, create_selector,
                                        review_subgraph))
        return self

    def strategy(self, name: str) -> Strategy:
        for s in self.strategies:
            if s.name == name:
                return s
        known = ", ".join(repr(s.name) for s in self.strategies) or "none"
        raise PartitionError(f"partitioner {self.name!r} has no strategy {name!r} "
                             f"(strategies: {known}); add it with add_strategy first")

    def set_supported_ops(self, strategy: str, fn: Callable) -> "Partitioner":
        self.strategy(strategy).supported_ops = fn
        return self

    def set_create_selector(self, strategy: str, fn: Callable) -> "Partitioner":
        self.strategy(strategy).create_selector = fn
        return self

    def set_review_subgraph(self, strategy: str, fn: Callable) -> "Partitioner":
        self.strategy(strategy).review_subgraph = fn
        return self

    def create_properties(self) -> list["CustomSubgraphProperty"]:
        return [CustomSubgraphProperty(self, s) for s in self.strategies]

    # -- snapshots (mxc.registry.Revertible): strategies added later ------------------
    def registry_state(self) -> int:
        return len(self.strategies)

    def restore_registry_state(self, state: int) -> None:
        del self.strategies[state:]


#: every partitioner by name (each is also the subgraph backend of that name)
PARTITIONERS: Registry[Partitioner] = Registry(
    "partitioners", noun="partitioner", error=PartitionError,
    unknown=lambda name: PartitionError(
        f"unknown partitioner {name!r}{PARTITIONERS.did_you_mean(name)}; registered: "
        f"{', '.join(sorted(PARTITIONERS.names())) or 'none'}"))
_PARTITIONERS = PARTITIONERS  # the former private dict's name


def register_partitioner(name: str, partitioner: Partitioner | None = None) -> Partitioner:
    """Register (or return the existing) partitioner *name* as a subgraph backend.

    Strategies added later are picked up at the next partitioning run.
    """
    part = partitioner or PARTITIONERS.get(name) or Partitioner(name)
    if part.name != name:
        raise PartitionError(f"register_partitioner({name!r}) got a Partitioner named "
                             f"{part.name!r}")
    PARTITIONERS.register(name, part, override=True)
    register_subgraph_backend(name).partitioner = part
    return part


def get_partitioner(name: str) -> Partitioner:
    return PARTITIONERS.lookup(name)


# ---------------------------------------------------------------------------
# the property running one strategy
# ---------------------------------------------------------------------------
class CustomSubgraphProperty(SubgraphProperty):
    """Runs one :class:`Strategy` (MXNet's ``CustomSubgraphProperty``)."""

    def __init__(self, partitioner: Partitioner, strategy: Strategy):
        super().__init__(property_name=f"{partitioner.name}:{strategy.name}")
        self.partitioner = partitioner
        self.strategy = strategy
        self.options: dict[str, str] = {}
        self.params: dict[str, Any] = {}
        self._selector: SubgraphSelector | None = None

    @property
    def where(self) -> str:
        """Names the extension (when the callbacks come from one), partitioner and strategy."""
        from ..extension_guard import extension_of
        s = self.strategy
        fn = s.supported_ops or s.create_selector or s.review_subgraph
        ext = extension_of(fn) if fn is not None else None
        origin = f"extension {ext!r}: " if ext and not ext.startswith("mxc.") else ""
        return f"{origin}partitioner {self.partitioner.name!r} strategy {s.name!r}"

    def pre_partition(self, graph: Graph, ctx: PartitionContext) -> None:
        from ..ops.subgraph import ensure_subgraph_op
        s = self.strategy
        try:
            ensure_subgraph_op(s.subgraph_op)
        except MxcError as exc:
            raise PartitionError(f"{self.where}: {exc}") from None
        self.options = dict(ctx.options)
        self.params = dict(ctx.params)
        order = post_order_fast(e.node for e in graph.outputs)
        annotate_ext_attrs(order, ctx.shapes, ctx.dtypes)
        view, _ = copy_graph(Graph(order, graph.outputs, graph.attrs))
        node2id = {id(n): i for i, n in enumerate(order)}
        if s.supported_ops is not None:
            ids = [UNSUPPORTED] * len(order)
            try:
                ok = s.supported_ops(view, ids, dict(self.options))
            except MxcError:
                raise
            except Exception as exc:
                raise PartitionError(f"{self.where}: supported_ops raised "
                                     f"{type(exc).__name__}: {exc}") from exc
            if ok is False:
                raise PartitionError(f"{self.where}: supported_ops reported failure "
                                     f"(returned False)")
            if len(ids) != len(order):
                raise PartitionError(f"{self.where}: supported_ops changed the length of ids "
                                     f"from {len(order)} to {len(ids)}; set ids[i] in place")
            supported: dict[int, int] = {}
            for i, value in enumerate(ids):
                if isinstance(value, bool) or not isinstance(value, int) or value < UNSUPPORTED:
                    raise PartitionError(
                        f"{self.where}: supported_ops set ids[{i}] (node "
                        f"{order[i].ref}) to {value!r}; use UNSUPPORTED (-2), ANY_SUBGRAPH "
                        f"(-1) or a subgraph id >= 0")
                if value != UNSUPPORTED:
                    supported[id(order[i])] = value
            self._selector = _SupportedIdsSelector(supported)
        elif s.create_selector is not None:
            try:
                user = s.create_selector(view, dict(self.options))
            except MxcError:
                raise
            except Exception as exc:
                raise PartitionError(f"{self.where}: create_selector raised "
                                     f"{type(exc).__name__}: {exc}") from exc
            for method in ("select", "select_input", "select_output"):
                if not callable(getattr(user, method, None)):
                    raise PartitionError(f"{self.where}: the object create_selector returned "
                                         f"({type(user).__name__}) has no {method}() method")
            self._selector = _UserSelector(user, node2id, order, self.where)
        else:
            raise PartitionError(f"{self.where}: neither supported_ops nor create_selector is "
                                 f"set; register one with set_supported_ops or "
                                 f"set_create_selector")

    def create_selector(self) -> SubgraphSelector:
        if self._selector is None:
            raise PartitionError(f"{self.where}: create_selector called before pre_partition")
        return self._selector

    def init_subgraph_inputs(self, inputs: list[Node], orig_entries: list[Entry]) -> None:
        for var, orig in zip(inputs, orig_entries):
            src = orig.node
            if src.op is None:
                var.attrs["isArg"] = "True"
                var.attrs["argName"] = src.name
            else:
                var.attrs["isArg"] = "False"
            dtype = src.attrs.get(EXT_DTYPE_ATTR)
            if dtype is not None:
                var.attrs[EXT_DTYPE_ATTR] = "[" + dtype_at(dtype, orig.index) + "]"
            shape = src.attrs.get(EXT_SHAPE_ATTR)
            if shape is not None:
                var.attrs[EXT_SHAPE_ATTR] = "[" + shape_at(shape, orig.index) + "]"

    def create_subgraph_node(self, subgraph: Graph, subgraph_id: int,
                             selector: SubgraphSelector | None = None) -> Node | None:
        user_attrs: dict[str, str] = {}
        review = self.strategy.review_subgraph
        if review is not None:
            aux = {id(n) for n in subgraph.aux_nodes()}
            for v in subgraph.input_nodes():
                v.attrs["isAux"] = "True" if id(v) in aux else "False"
            view = subgraph.copy()
            before = dict(view.attrs)
            names = ", ".join(repr(n.name) for n in subgraph.topo_order() if n.op is not None)
            extra = {"params": _subgraph_params(subgraph, self.params)} \
                if getattr(review, "wants_params", False) else {}
            try:
                result = review(view, subgraph_id, dict(self.options), **extra)
            except MxcError:
                raise
            except Exception as exc:
                raise PartitionError(f"{self.where}: review_subgraph of subgraph {subgraph_id} "
                                     f"(nodes {names}) raised {type(exc).__name__}: "
                                     f"{exc}") from exc
            accept, returned = _review_result(result, self.where, subgraph_id)
            for k, v in view.attrs.items():
                if k not in before or before[k] != v:
                    user_attrs[str(k)] = v if isinstance(v, str) else str(v)
            for k, v in returned.items():
                user_attrs[str(k)] = v if isinstance(v, str) else str(v)
            if not accept:
                return None
        node = Node(self.strategy.subgraph_op, f"_op{subgraph_id}", subgraphs=[subgraph])
        heads = subgraph.outputs
        node.attrs[EXT_SHAPE_ATTR] = "[" + ",".join(
            shape_at(e.node.attrs[EXT_SHAPE_ATTR], e.index)
            if EXT_SHAPE_ATTR in e.node.attrs else "" for e in heads) + "]"
        node.attrs[EXT_DTYPE_ATTR] = "[" + ",".join(
            dtype_at(e.node.attrs[EXT_DTYPE_ATTR], e.index)
            if EXT_DTYPE_ATTR in e.node.attrs else "" for e in heads) + "]"
        node.attrs.update(user_attrs)
        return node


def _subgraph_params(subgraph: Graph, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"args": {...}, "aux": {...}}``: the parameter arrays given to ``optimize_for``.

    A review function that sets ``wants_params = True`` receives them; as in
    MXNet, every given array is handed over, not only those the region reads.
    *params* is ``{"args": ..., "aux": ...}`` (a flat dict counts as args).
    """
    if set(params) <= {"args", "aux"}:
        return {"args": dict(params.get("args", {})), "aux": dict(params.get("aux", {}))}
    return {"args": dict(params), "aux": {}}


def annotate_ext_attrs(nodes, shapes: dict | None, dtypes: dict | None) -> None:
    """Set MXNet's ``__ext_shape__``/``__ext_dtype__`` on *nodes* from inferred
    ``shapes``/``dtypes`` (keyed by ``(node, output)``; None: leave unset)."""
    if shapes is not None:
        for node in nodes:
            node.attrs[EXT_SHAPE_ATTR] = "[" + ",".join(
                _fmt_shape(shapes.get((node, i))) for i in range(_num_outputs(node))) + "]"
    if dtypes is not None:
        for node in nodes:
            node.attrs[EXT_DTYPE_ATTR] = "[" + ",".join(
                _fmt_dtype(dtypes.get((node, i))) for i in range(_num_outputs(node))) + "]"


def _review_result(result: Any, where: str, sid: int) -> tuple[bool, dict]:
    if result is None:
        return True, {}
    if isinstance(result, bool):
        return result, {}
    if isinstance(result, dict):
        return True, result
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool) \
            and isinstance(result[1], dict):
        return result
    raise PartitionError(f"{where}: review_subgraph of subgraph {sid} returned {result!r}; "
                         f"return True/False, None, a dict of attributes or (accept, attrs)")


class _SupportedIdsSelector(SubgraphSelector):
    """Selection from ``supported_ops`` ids (MXNet's ``CustomContainOpSelector``).

    MXNet looks nodes up by name, so where two nodes share a name (a Gluon
    block called twice) the id set last wins for both; here each node keeps
    its own id (looked up by identity), which is the same for unique names.
    """

    def __init__(self, supported: dict[int, int]):
        self.supported = supported

    def select(self, node: Node) -> bool:
        return id(node) in self.supported

    def _join(self, node: Node, new: Node) -> bool:
        sid = self.supported.get(id(new))
        if sid is None:
            return False
        return sid == ANY_SUBGRAPH or self.supported.get(node, 0) == sid

    def select_input(self, node: Node, input_node: Node) -> bool:
        return self._join(node, input_node)

    def select_output(self, node: Node, output_node: Node) -> bool:
        return self._join(node, output_node)


class _UserSelector(SubgraphSelector):
    """Adapts an id-based user selector to the node-based interface."""

    def __init__(self, user: Any, node2id: dict[int, int], order: list[Node], where: str):
        self.user = user
        self.node2id = node2id
        self.order = order
        self.where = where

    def _call(self, method: str, *nodes: Node):
        ids = [self.node2id[id(n)] for n in nodes]
        try:
            return getattr(self.user, method)(*ids)
        except MxcError:
            raise
        except Exception as exc:
            args = ", ".join(f"{i} ({n.name!r})" for i, n in zip(ids, nodes))
            raise PartitionError(f"{self.where}: selector {method}({args}) raised "
                                 f"{type(exc).__name__}: {exc}") from exc

    def select(self, node: Node) -> bool:
        return bool(self._call("select", node))

    def select_input(self, node: Node, input_node: Node) -> bool:
        return bool(self._call("select_input", node, input_node))

    def select_output(self, node: Node, output_node: Node) -> bool:
        return bool(self._call("select_output", node, output_node))

    def filter(self, candidates: list[Node]) -> list[Node]:
        fn = getattr(self.user, "filter", None)
        if fn is None:
            return list(candidates)
        ids = [self.node2id[id(n)] for n in candidates]
        try:
            keep = fn(list(ids))
        except MxcError:
            raise
        except Exception as exc:
            raise PartitionError(f"{self.where}: selector filter({ids}) raised "
                                 f"{type(exc).__name__}: {exc}") from exc
        if keep is None:
            raise PartitionError(f"{self.where}: selector filter returned None; return the "
                                 f"list of candidate ids to keep")
        allowed = set(ids)
        out = []
        for i in keep:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.order):
                raise PartitionError(f"{self.where}: selector filter returned {i!r}, which is "
                                     f"not a node id (0..{len(self.order) - 1})")
            if i not in allowed:
                raise PartitionError(
                    f"{self.where}: selector filter returned id {i} (node "
                    f"{self.order[i].name!r}), which is not among the candidates {ids}; a "
                    f"filter may only drop candidates, never add nodes")
            out.append(self.order[i])
        return out

    def reset(self) -> None:
        fn = getattr(self.user, "reset", None)
        if fn is not None:
            try:
                fn()
            except MxcError:
                raise
            except Exception as exc:
                raise PartitionError(f"{self.where}: selector reset() raised "
                                     f"{type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------------------
# __ext_shape__ / __ext_dtype__ strings
# ---------------------------------------------------------------------------
def _num_outputs(node: Node) -> int:
    if node.op is None:
        return 1
    try:
        return node.num_outputs()
    except MxcError:
        return 1


def _fmt_shape(shape) -> str:
    if shape is None:
        return "[None]"
    return "[" + ",".join("-1" if d is None else str(int(d)) for d in shape) + "]"


def _fmt_dtype(dtype) -> str:
    if dtype is None:
        return "-1"
    return str(FLAG_FROM_DTYPE.get(str(dtype), -1))


def shape_at(text: str, index: int) -> str:
    """Output *index*'s shape in an ``__ext_shape__`` list: ``"[[2,3],[4]]", 1 -> "[4]"``.

    (MXNet ``lib_api.h``'s ``getShapeAt``.)
    """
    idx = 1
    for _ in range(index):
        idx = text.find("[", idx + 1)
        if idx < 0:
            raise PartitionError(f"shape list {text!r} has no output {index}")
    stop = text.find("]", idx)
    return text[idx:stop + 1]


def dtype_at(text: str, index: int) -> str:
    """Output *index*'s type flag in an ``__ext_dtype__`` list: ``"[0,6]", 1 -> "6"``.

    (MXNet ``lib_api.h``'s ``getDtypeAt``.)
    """
    idx = 0
    for _ in range(index):
        idx = text.find(",", idx + 1)
        if idx < 0:
            raise PartitionError(f"dtype list {text!r} has no output {index}")
    stop = text.find(",", idx + 1)
    if stop < 0:
        stop = text.find("]", idx + 1)
    return text[idx + 1:stop]


def parse_ext_shapes(text: str) -> list[tuple | None]:
    """``"[[2,3],[None],[-1,4]]"`` -> ``[(2, 3), None, (None, 4)]``."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise PartitionError(f"not a shape list: {text!r}")
    out: list[tuple | None] = []
    i = 1
    while True:
        start = body.find("[", i)
        if start < 0:
            break
        stop = body.find("]", start)
        inner = body[start + 1:stop].strip()
        if inner == "None":
            out.append(None)
        else:
            dims = [d.strip() for d in inner.split(",") if d.strip()]
            out.append(tuple(None if int(d) < 0 else int(d) for d in dims))
        i = stop + 1
    return out


def parse_ext_dtypes(text: str) -> list[str | None]:
    """``"[0,-1,6]"`` -> ``["float32", None, "int64"]``."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise PartitionError(f"not a dtype list: {text!r}")
    out: list[str | None] = []
    for item in body[1:-1].split(","):
        item = item.strip()
        if not item:
            out.append(None)
            continue
        flag = int(item)
        out.append(DTYPE_FROM_FLAG.get(flag) if flag >= 0 else None)
    return out
