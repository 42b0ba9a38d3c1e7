"""Subgraph operators: nodes that carry a nested graph (``node.subgraphs[0]``).

Partitioning (:mod:`mxc.compiler.partition`) replaces each region it finds
with one such node.  MXNet's default backend uses ``_CachedOp``; custom
partitioners name their own op (``_custom_subgraph_op`` in MXNet's
``lib_subgraph`` example), registered with :func:`register_subgraph_op`.

Everything about a subgraph op follows from its nested graph:

* inputs: the nested graph's ``list_inputs()`` in order (its variables,
  auxiliary states included), then ``__ext_extra_inputs__`` extra inputs
  (MXNet's ``MX_STR_EXTRA_INPUTS``: inputs a graph pass appended that no
  nested operator reads; inference ignores them);
* outputs: the nested graph's heads, one output per head (repeated heads
  included);
* auxiliary states: an input is mutable when its nested variable is an
  auxiliary state inside, so ``list_auxiliary_states`` of a partitioned
  graph is that of the original;
* shape/dtype inference runs the nested graph's inference from the given
  input values *and* the given output values (both directions);
* the reference forward runs the nested graph (custom ops may supply their
  own forward instead).

``_CachedOp`` names its outputs as MXNet 1.9.1 does: the names of the
CachedOp's forward graph, in which repeated heads become ``_copy`` nodes
(``exp0_copy0``) and MXNet's common-subexpression pass then merges identical
copies and re-copies repeated outputs (``exp0_copy0_0_copy``); the outer
names are ``<node name>_<forward output name>``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import DTypeError, ExecutionError, MxcError, OpError, ShapeError
from ..ir.types import Key
from .registry import OpDef, Params, get_op, has_op, register_op, unregister_op

__all__ = ["EXTRA_INPUTS_ATTR", "SubgraphOp", "CachedOp", "register_subgraph_op",
           "cached_op_output_names", "ensure_subgraph_op"]

#: MXNet's ``MX_STR_EXTRA_INPUTS``: how many trailing inputs no nested op reads.
EXTRA_INPUTS_ATTR = "__ext_extra_inputs__"


class SubgraphOp(OpDef):
    """Base class of operators whose semantics is their nested graph.

    Attributes are kept as strings and never rejected: partitioners attach
    arbitrary ones (a custom ``review_subgraph`` may add ``myKey=myVal``),
    and they are available to the op at run time through ``p.node.attrs``.
    """

    is_subgraph_op = True
    arguments = ()
    #: False for ops whose nested graph records a fused pattern (oneDNN's
    #: ``_sg_mkldnn_*``) rather than a partitioned region: partitioning never
    #: inlines (clears) or freezes them, and a backend may take them whole
    is_region = True

    # -- attributes ---------------------------------------------------------------
    def parse_attrs(self, raw: Mapping[str, str], node=None) -> Params:
        values: dict[str, Any] = {}
        for key, spec in self.attrs.items():
            if key in raw:
                try:
                    values[key] = spec.convert(raw[key])
                except (ValueError, TypeError):
                    values[key] = raw[key]
            else:
                values[key] = spec.default
        for key, text in raw.items():
            values.setdefault(key, text)
        return Params(values, node)

    # -- the nested graph ---------------------------------------------------------
    def nested(self, p: Params):
        """The nested graph of the node *p* belongs to."""
        node = p.node
        if node is None or not node.subgraphs:
            raise OpError(f"subgraph operator {self.name} (node {p.node_ref}) has no nested "
                          f"graph (node.subgraphs is empty)")
        return node.subgraphs[0]

    def extra_inputs(self, p: Params) -> int:
        """The ``__ext_extra_inputs__`` count (0 when absent)."""
        node = p.node
        text = None if node is None else node.attrs.get(EXTRA_INPUTS_ATTR)
        if text is None:
            return 0
        try:
            n = int(str(text).strip())
        except ValueError:
            n = -1
        if n < 0:
            raise OpError(f"subgraph operator {self.name} (node {p.node_ref}): attribute "
                          f"{EXTRA_INPUTS_ATTR}={text!r} must be a non-negative integer")
        return n

    # -- arity --------------------------------------------------------------------
    def input_names(self, p: Params) -> list[str]:
        names = self.nested(p).list_inputs()
        return names + [f"extra_input{i}" for i in range(self.extra_inputs(p))]

    def num_inputs(self, p: Params) -> int:
        return len(self.nested(p).input_nodes()) + self.extra_inputs(p)

    def mutable_inputs(self, p: Params) -> list[int]:
        g = self.nested(p)
        mutable = g.mutable_input_nodes()
        return [i for i, n in enumerate(g.input_nodes()) if id(n) in mutable]

    def unused_inputs(self, p: Params) -> list[int]:
        g = self.nested(p)
        unused = g.unused_inputs()
        return [i for i, n in enumerate(g.input_nodes()) if n.name in unused]

    def num_outputs(self, p: Params) -> int:
        return len(self.nested(p).outputs)

    # -- inference ----------------------------------------------------------------
    def infer_shape(self, p, in_shapes, out_shapes):
        return self._infer(p, "shape", in_shapes, out_shapes)

    def infer_type(self, p, in_types, out_types):
        return self._infer(p, "dtype", in_types, out_types)

    def _infer(self, p, kind, ins, outs):
        g = self.nested(p)
        extra = self.extra_inputs(p)
        n_in = len(ins) - extra
        try:
            new_ins, new_outs = infer_nested(g, kind, list(ins[:n_in]), list(outs))
        except (ShapeError, DTypeError) as exc:
            cls = type(exc)
            raise cls(f"subgraph operator {self.name} (node {p.node_ref}): {exc}") from None
        return new_ins + list(ins[n_in:]), new_outs

    # -- semantics ----------------------------------------------------------------
    def forward(self, p, inputs, ctx):
        g = self.nested(p)
        ins = list(inputs[:len(inputs) - self.extra_inputs(p)])
        if _needs_outer_shapes(g, ins):
            # shapes only the outer graph knows (a ``_zeros`` with shape
            # (0, 32) whose batch size comes from outside the region)
            return run_nested_seeded(g, ins, list(ctx.out_shapes), list(ctx.out_dtypes))
        return run_nested(g, ins)


@register_op("_CachedOp")
class CachedOp(SubgraphOp):
    """MXNet's ``_CachedOp``: the default backend's subgraph operator.

    A partitioned graph's ``_CachedOp`` nodes have no attributes; the
    ``CachedOpConfig`` flags a hybridized block may carry are accepted as
    strings and ignored (they tune MXNet's executor, not the semantics).
    """

    def output_names(self, p):
        return cached_op_output_names(self.nested(p))


# ---------------------------------------------------------------------------
# running and inferring the nested graph
# ---------------------------------------------------------------------------
def run_nested(graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run *graph* on *inputs* given positionally in ``list_inputs()`` order."""
    from ..interpret import run_graph
    names = graph.list_inputs()
    if len(inputs) != len(names):
        raise ExecutionError(f"nested graph expects {len(names)} inputs ({', '.join(names)}), "
                             f"got {len(inputs)}")
    feeds: dict[str, np.ndarray] = {}
    for name, value in zip(names, inputs):
        if name in feeds and feeds[name] is not value:
            raise ExecutionError(f"nested graph has two inputs named {name!r}; cannot feed "
                                 f"them by name")
        feeds[name] = value
    return run_graph(graph, feeds)


def _needs_outer_shapes(graph, inputs) -> bool:
    _, outs = infer_nested(graph, "shape", [np.shape(x) for x in inputs],
                           [None] * len(graph.outputs))
    return any(s is None or None in s for s in outs)


def run_nested_seeded(graph, inputs: Sequence[np.ndarray], out_shapes: list,
                      out_dtypes: list) -> list[np.ndarray]:
    """Run *graph* with inference seeded by the outer node's output shapes/dtypes too."""
    inputs = [np.asarray(x) for x in inputs]
    shapes, dtypes = infer_nested_values(graph, inputs, out_shapes, out_dtypes)
    return evaluate_nested(graph, inputs, shapes, dtypes)


def infer_nested_values(graph, inputs: Sequence[np.ndarray], out_shapes: list | None = None,
                        out_dtypes: list | None = None) -> tuple[dict, dict]:
    """Every entry's shape and dtype in *graph* for *inputs* (and known output values)."""
    n_out = len(graph.outputs)
    shapes = infer_nested(graph, "shape", [np.shape(x) for x in inputs],
                          list(out_shapes or [None] * n_out), full=True)
    dtypes = infer_nested(graph, "dtype", [np.asarray(x).dtype.name for x in inputs],
                          list(out_dtypes or [None] * n_out), full=True)
    return shapes, dtypes


def evaluate_nested(graph, inputs: Sequence[np.ndarray], shapes: dict,
                    dtypes: dict) -> list[np.ndarray]:
    """Run *graph* node by node with already inferred *shapes*/*dtypes* (keyed by entry);
    *inputs* are given in ``list_inputs()`` order."""
    from .registry import ForwardContext
    values: dict[Key, np.ndarray] = {}
    for node, x in zip(graph.input_nodes(), inputs):
        values[(node, 0)] = np.asarray(x)
    for node in graph.topo_order():
        if node.op is None:
            continue
        ins = [values[e.key] for e in node.inputs]
        nout = node.num_outputs()
        ctx = ForwardContext(node=node,
                             out_shapes=[shapes.get((node, i)) for i in range(nout)],
                             out_dtypes=[dtypes.get((node, i)) for i in range(nout)],
                             in_shapes=[x.shape for x in ins],
                             in_dtypes=[x.dtype.name for x in ins])
        try:
            outs = node.opdef.forward(node.params, ins, ctx)
        except MxcError:
            raise
        except Exception as exc:
            raise ExecutionError(f"operator {node.op} (node {node.ref}) failed in the "
                                 f"reference backend: {type(exc).__name__}: {exc}") from exc
        for i, v in enumerate(outs):
            v = np.asarray(v)
            want = ctx.out_dtypes[i]
            if want is not None and v.dtype.name != want:
                v = v.astype(want)
            values[(node, i)] = v
    return [values[e.key] for e in graph.outputs]


def infer_nested(graph, kind: str, in_values: list, out_values: list,
                 full: bool = False):
    """Bidirectional inference inside *graph* (``kind`` "shape" or "dtype").

    *in_values* are the values of ``graph.input_nodes()`` in order and
    *out_values* those of ``graph.outputs`` (``None`` unknown); returns both
    lists refined, sweeping forward and backward until nothing changes, as
    :mod:`mxc.compiler.infer` does for whole graphs.  With ``full=True``
    returns every entry's value instead, keyed by ``Entry.key``.
    """
    from ..infer import infer_seeded
    inputs = graph.input_nodes()
    seeds = [((node, 0), v, f"input {node.ref}") for node, v in zip(inputs, in_values)]
    seeds += [(e.key, v, f"output {k}") for k, (e, v) in enumerate(zip(graph.outputs, out_values))]
    values = infer_seeded(graph, kind, seeds)
    if full:
        return values
    return ([values.get((n, 0)) for n in inputs],
            [values.get(e.key) for e in graph.outputs])


# ---------------------------------------------------------------------------
# _CachedOp output names (MXNet 1.9.1's forward graph)
# ---------------------------------------------------------------------------
# Ops MXNet's common-subexpression pass never merges although they are pure
# in inference: stateful (FCreateOpState) or random ones.  Ops that mutate
# inputs (BatchNorm ...) and subgraph ops are recognised from their OpDef.
_NEVER_MERGED = frozenset({"RNN", "Dropout", "Custom", "_foreach", "_while_loop", "_cond",
                           "shuffle", "_shuffle"})
_RANDOM_PREFIXES = ("_random_", "random_", "_sample_", "sample_", "_npi_random",
                    "_npx_random")


class _FwdNode:
    """A node of the emulated CachedOp forward graph."""

    __slots__ = ("op", "name", "attrs", "inputs", "source")

    def __init__(self, op, name, attrs, inputs, source=None):
        self.op = op
        self.name = name
        self.attrs = attrs
        self.inputs = inputs      # list of (_FwdNode, index)
        self.source = source      # the mxc Node this mirrors (None for copies)


_CANONICAL: dict[str, str] = {}


def _canonical(op: str | None) -> str | None:
    if op is None:
        return None
    name = _CANONICAL.get(op)
    if name is None:
        try:
            name = get_op(op).name if has_op(op) else op
        except MxcError:
            name = op
        if has_op(op):
            _CANONICAL[op] = name
    return name


def _mergeable(n: _FwdNode) -> bool:
    if n.op is None:
        return False
    op = _canonical(n.op)
    if op in _NEVER_MERGED or op.startswith(_RANDOM_PREFIXES):
        return False
    if n.source is None:
        return True  # an inserted _copy
    try:
        opdef = n.source.opdef
        if opdef.is_subgraph_op or getattr(opdef, "is_random", False) or \
                opdef.mutable_inputs(n.source.params):
            return False
    except MxcError:
        return False
    return True


def _entry_name(node: _FwdNode, index: int) -> str:
    if node.op is None:
        return node.name
    if node.source is None:
        return f"{node.name}_output"
    names = node.source.opdef.output_names(node.source.params)
    suffix = names[index] if index < len(names) else f"output{index}"
    return f"{node.name}_{suffix}"


def cached_op_output_names(graph) -> list[str]:
    """The output names MXNet 1.9.1 gives a ``_CachedOp`` over *graph*.

    Emulates ``CachedOp``'s forward-graph construction: a repeated head
    becomes ``_copy`` node ``<name>_copy<k>``; then the common-subexpression
    pass (on by default, ``MXNET_ELIMINATE_COMMON_EXPR``) merges identical
    nodes (same op, attributes and inputs, not stateful/random/mutating) and
    replaces each repeated output by a fresh ``_copy`` named
    ``<name>_<k>_copy``, until nothing merges.
    """
    heads = graph.outputs
    if len({(e.node, e.index, e.version) for e in heads}) == len(heads) \
            and not _may_merge(graph.nodes):
        return [_plain_name(e.node, e.index) for e in heads]
    mirror: dict[int, _FwdNode] = {}
    for n in graph.topo_order():
        mirror[id(n)] = _FwdNode(n.op, n.name, dict(n.attrs),
                                 [(mirror[id(e.node)], e.index) for e in n.inputs], n)
    outputs: list[tuple[_FwdNode, int]] = []
    seen: dict[tuple[int, int, int], int] = {}
    for e in graph.outputs:
        key = (e.node, e.index, e.version)
        src = mirror[id(e.node)]
        if key in seen:
            copy = _FwdNode("_copy", f"{src.name}_copy{seen[key]}", {}, [(src, e.index)])
            seen[key] += 1
            outputs.append((copy, 0))
        else:
            seen[key] = 0
            outputs.append((src, e.index))

    while True:
        groups: dict[tuple, list[_FwdNode]] = {}
        for n in _fwd_post_order(outputs):
            if n.inputs:
                groups.setdefault(tuple((id(x), i) for x, i in n.inputs), []).append(n)
        replace: dict[int, _FwdNode] = {}
        for group in groups.values():
            done: set[int] = set()
            for i, a in enumerate(group):
                if i in done:
                    continue
                for j in range(i + 1, len(group)):
                    b = group[j]
                    if j not in done and _fwd_equal(a, b):
                        done.add(j)
                        replace[id(b)] = a
        if not replace:
            break
        for n in _fwd_post_order(outputs):
            n.inputs = [(replace.get(id(x), x), i) for x, i in n.inputs]
        outputs = [(replace.get(id(x), x), i) for x, i in outputs]
        uniq: dict[tuple[int, int], int] = {}
        for k, (x, i) in enumerate(outputs):
            key = (id(x), i)
            if key not in uniq:
                uniq[key] = 0
            else:
                copy = _FwdNode("_copy", f"{x.name}_{uniq[key]}_copy", {}, [(x, i)])
                uniq[key] += 1
                outputs[k] = (copy, 0)
    return [_entry_name(x, i) for x, i in outputs]


def _plain_name(node, index: int) -> str:
    if node.op is None:
        return node.name
    names = node.opdef.output_names(node.params)
    return f"{node.name}_{names[index] if index < len(names) else f'output{index}'}"


def _may_merge(nodes) -> bool:
    """Could the common-subexpression pass merge any two of *nodes*?"""
    seen: dict[tuple, list] = {}
    for n in nodes:
        if n.op is None or not n.inputs:
            continue
        key = (_canonical(n.op), tuple((e.node, e.index) for e in n.inputs))
        group = seen.setdefault(key, [])
        for other in group:
            if other.attrs == n.attrs:
                return True
        group.append(n)
    return False


def _fwd_equal(a: _FwdNode, b: _FwdNode) -> bool:
    if a.op is None or b.op is None:
        return False
    if _canonical(a.op) != _canonical(b.op) or a.attrs != b.attrs:
        return False
    return _mergeable(a) and _mergeable(b)


def _fwd_post_order(outputs) -> list[_FwdNode]:
    order: list[_FwdNode] = []
    done: set[int] = set()
    for root, _ in outputs:
        if id(root) in done:
            continue
        stack = [(root, iter(root.inputs))]
        done.add(id(root))
        while stack:
            node, it = stack[-1]
            for child, _ in it:
                if id(child) not in done:
                    done.add(id(child))
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


# ---------------------------------------------------------------------------
# user subgraph operators
# ---------------------------------------------------------------------------
ForwardFn = Callable[[list, Any, dict], Sequence[np.ndarray]]


def register_subgraph_op(name: str, forward: ForwardFn | None = None, *,
                         output_names: Callable[[Any], list[str]] | None = None,
                         override: bool = True) -> type:
    """Register *name* as a subgraph operator (MXNet's ``setIsSubgraphOp``).

    forward:
        ``forward(inputs, subgraph, attrs) -> outputs``: *inputs* are numpy
        arrays in the node's input order (nested inputs, then any extra
        inputs), *subgraph* the nested :class:`~mxc.compiler.ir.Graph` and
        *attrs* the node's attributes (those ``review_subgraph`` set
        included).  Without it the nested graph itself is run.
    output_names:
        ``output_names(subgraph) -> names``; default ``output``/``output<i>``.

    Returns the registered :class:`SubgraphOp` subclass.
    """
    user_forward = forward
    user_names = output_names

    class UserSubgraphOp(SubgraphOp):
        __doc__ = f"Subgraph operator {name!r} (registered with register_subgraph_op)."

        if user_forward is not None:
            def forward(self, p, inputs, ctx):
                outs = user_forward(list(inputs), self.nested(p), dict(p.node.attrs))
                return [np.asarray(o) for o in outs]

        if user_names is not None:
            def output_names(self, p):
                return list(user_names(self.nested(p)))

    UserSubgraphOp.__name__ = UserSubgraphOp.__qualname__ = f"SubgraphOp_{name}"
    if override:
        unregister_op(name)
    register_op(name, family="subgraph")(UserSubgraphOp)
    return UserSubgraphOp


def ensure_subgraph_op(name: str) -> None:
    """Register a nested-graph-running subgraph op *name* unless one exists.

    Raises :class:`~mxc.errors.OpError` if *name* is a registered operator
    that is not a subgraph operator.
    """
    if has_op(name):
        if not get_op(name).is_subgraph_op:
            raise OpError(f"operator {name!r} is registered but is not a subgraph operator "
                          f"(is_subgraph_op is False); a partitioner cannot use it for its "
                          f"subgraphs")
        return
    register_subgraph_op(name, override=False)
