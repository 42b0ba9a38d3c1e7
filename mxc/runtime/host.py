"""Host nodes: the operators a compiled graph leaves to numpy.

A node the TVM backend cannot lower (or a subgraph operator of a user
partitioner) runs on the host with its operator definition's reference
kernel.  The artifact stores what that needs -- the op name, its raw
attributes, its *parsed* parameters, inferred shapes/dtypes and, for
subgraph operators, the nested graph -- so no attribute text is parsed at
run time.

This is the only part of :mod:`mxc.runtime` that imports the compiler's op
definitions (:mod:`mxc.compiler.ops`, :mod:`mxc.compiler.ir`), and only when
an artifact actually has host nodes.  Those modules import the attribute
parser and with it ``lark`` (``mxc.compiler.ops.registry`` imports
``mxc.frontend.attrs`` at module level), so running a host node imports
lark even though nothing is parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..errors import ArtifactError, ExecutionError, MxcError

if TYPE_CHECKING:
    from .plan import HostStep

# ---------------------------------------------------------------------------
# JSON encodings shared with the compiler side
# ---------------------------------------------------------------------------
_TUPLE = "__tuple__"


def encode_value(v: Any) -> Any:
    """A parsed attribute value as JSON (tuples tagged); raises TypeError otherwise."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, tuple):
        return {_TUPLE: [encode_value(x) for x in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    raise TypeError(f"cannot store a {type(v).__name__} attribute value")


def decode_value(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(decode_value(x) for x in v[_TUPLE])
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    return v


def encode_graph(graph) -> dict:
    """A nested graph as plain JSON (nodes in topological order, heads)."""
    order = graph.topo_order()
    index = {id(n): i for i, n in enumerate(order)}
    nodes = []
    for n in order:
        nodes.append({
            "op": n.op, "name": n.name, "attrs": dict(n.attrs),
            "inputs": [[index[id(e.node)], e.index, e.version] for e in n.inputs],
            "subgraphs": [encode_graph(g) for g in n.subgraphs],
        })
    return {"nodes": nodes,
            "heads": [[index[id(e.node)], e.index, e.version] for e in graph.outputs]}


def decode_graph(data: dict):
    from ..compiler.ir import Entry, Graph, Node
    nodes: list = []
    for spec in data["nodes"]:
        inputs = [Entry(nodes[i], k, v) for i, k, v in spec["inputs"]]
        nodes.append(Node(spec["op"], spec["name"], spec["attrs"], inputs,
                          [decode_graph(g) for g in spec.get("subgraphs", ())]))
    return Graph(nodes, [Entry(nodes[i], k, v) for i, k, v in data["heads"]])


# ---------------------------------------------------------------------------
# running one host node
# ---------------------------------------------------------------------------
class HostKernel:
    """One host node, ready to run: ``kernel(inputs) -> outputs`` (numpy arrays).

    A control-flow node (``_foreach``, ``_while_loop``, ``_cond``) whose step
    lists compiled ``bodies`` runs its loop here and each compiled body
    through *body_call* (``body_call(spec, inputs) -> outputs``, the session's
    VM); a body without a compiled function runs on the reference backend.
    """

    __slots__ = ("name", "op", "node", "opdef", "params", "ctx", "out_dtypes", "nout",
                 "bodies", "body_call", "runners")

    def __init__(self, spec: "HostStep", body_call=None):
        from ..compiler.ir import Node
        from ..compiler.ops.registry import ForwardContext, Params, has_op
        op, name = spec.op, spec.name
        if not has_op(op):
            raise ArtifactError(
                f"host node {name!r} needs operator {op!r}, which is not registered in this "
                f"process; load the extension that defines it before loading the artifact "
                f"(mxc run/inspect --load LIB, or mxc.library.load(LIB) in Python)")
        node = Node(op, name, dict(spec.attrs), subgraphs=[decode_graph(g) for g in spec.subgraphs])
        stored = spec.params
        self.name, self.op, self.node = name, op, node
        try:
            self.opdef = node.opdef
            if stored is not None:  # the parsed parameters: nothing is parsed here
                self.params = Params({k: decode_value(v) for k, v in stored.items()}, node)
            else:  # custom and subgraph operators parse their own (string) attributes
                self.params = node.params
            self.nout = self.opdef.num_outputs(self.params)
        except MxcError as exc:
            raise ArtifactError(f"host node {name!r} ({op}): {exc}") from None
        self.bodies = list(spec.bodies)
        self.body_call = body_call
        self.runners: dict = {}
        self.out_dtypes = list(spec.out_dtypes)
        self.ctx = ForwardContext(node=node, out_shapes=_shapes(spec.out_shapes),
                                  out_dtypes=self.out_dtypes, in_shapes=_shapes(spec.in_shapes),
                                  in_dtypes=list(spec.in_dtypes))

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        try:
            if self.bodies and self.body_call is not None:
                outs = self.opdef.run(self.params, list(inputs), self._call_body,
                                      self.ctx.out_shapes, self.ctx.out_dtypes)
            else:
                outs = self.opdef.forward(self.params, list(inputs), self.ctx)
        except MxcError:
            raise
        except Exception as exc:  # a kernel bug or an input outside the op's domain
            raise ExecutionError(f"host node {self.name!r} ({self.op}) failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if len(outs) != self.nout:
            raise ExecutionError(f"host node {self.name!r} ({self.op}) returned {len(outs)} "
                                 f"outputs, expected {self.nout}")
        result = []
        for i, v in enumerate(outs):
            v = np.asarray(v)
            want = self.out_dtypes[i] if i < len(self.out_dtypes) else None
            if want is not None and v.dtype.name != want:
                v = v.astype(want)
            result.append(v)
        return result

    def _call_body(self, k: int, inputs):
        spec = self.bodies[k] if k < len(self.bodies) else None
        if spec is None:  # not compiled: the reference kernels (types inferred once)
            runner = self.runners.get(k)
            if runner is None:
                from ..compiler.ops.control_flow import BodyRunner
                runner = self.runners[k] = BodyRunner(self.node.subgraphs[k])
            return runner(inputs)
        return self.body_call(spec, [inputs[i] for i in spec.inputs])


def _shapes(shapes) -> list:
    return [None if s is None else tuple(s) for s in shapes]


def manifest_entries(ops: Iterable[str]) -> list[dict]:
    """The manifest's ``libraries``: one entry per compiled library the *ops* come from.

    Here because it asks the compiler's op registry (see the module docstring).
    """
    from ..compiler.ops.registry import get_op, has_op
    found: dict[str, dict] = {}
    for op in ops:
        entry = getattr(getattr(get_op(op), "impl", None), "native", None) if has_op(op) else None
        if entry is None:
            continue
        lib = entry.lib
        rec = found.setdefault(lib.sha256, {"name": lib.name, "sha256": lib.sha256,
                                            "lib_api_version": lib.version, "operators": []})
        if op not in rec["operators"]:
            rec["operators"].append(op)
    return list(found.values())
