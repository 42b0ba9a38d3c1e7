"""Run a graph on numpy arrays with each op's reference kernel (the interpreter).

It lives in the compiler because compiler code evaluates graphs too
(constant folding, subgraph operators' reference kernels, ``Symbol.eval``);
:mod:`mxc.backends.reference` re-exports it as the numpy backend.  This is the oracle every other backend is checked against, and the host
fallback of the runtime, so it favours clarity and exact MXNet semantics over
speed.  Intermediate values are released after their last use so large models
run in bounded memory.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np

from ..errors import ExecutionError, MxcError
from ..memory_limits import checked_nbytes
from .infer import inference_memo
from .ir import Graph, Node
from .ir.types import Key
from .ops.registry import ForwardContext

__all__ = ["Executor", "run_graph", "unused_inputs"]

log = logging.getLogger(__name__)


def run_graph(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Evaluate *graph* given every input (arguments and aux states) by name.

    Inference memo: nested subgraph operators run their own graphs through
    here again; sharing one memo for the whole run lets each level reuse the
    nested inferences its parent already made, so nesting costs linear time.
    """
    with inference_memo():
        return _run_graph(graph, feeds)


def _run_graph(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    order = graph.topo_order()
    arrays = {name: np.asarray(v) for name, v in feeds.items()}
    unused = graph.unused_inputs()
    missing = [n.name for n in order if n.op is None and n.name not in feeds]
    if any(name not in unused for name in missing):
        raise ExecutionError("missing value for graph input(s): "
                             + ", ".join(m for m in missing if m not in unused))
    given = [n for n in order if n.op is None and n.name in arrays]
    types = graph.types({n.name: arrays[n.name].shape for n in given},
                        {n.name: arrays[n.name].dtype.name for n in given})
    shapes, dtypes = types.shapes, types.dtypes
    for n in order:
        if n.op is None and n.name not in arrays:
            shape = shapes.get((n, 0))
            if shape is None or None in shape:
                raise ExecutionError(f"input {n.name!r} is not read in inference, but its shape "
                                     f"cannot be inferred to fill it with zeros; feed it")
            dtype = np.dtype(dtypes.get((n, 0)) or np.float32)
            checked_nbytes(shape, dtype.itemsize, f"zero-filled input {n.name!r}")
            arrays[n.name] = np.zeros(shape, dtype=dtype)
    remaining: dict[Key, int] = {}
    for n in order:
        for e in n.inputs:
            remaining[e.key] = remaining.get(e.key, 0) + 1
    for e in graph.outputs:
        remaining[e.key] = remaining.get(e.key, 0) + 1 << 20  # outputs live to the end
    values: dict[Key, np.ndarray] = {}
    for node in order:
        if node.op is None:
            values[(node, 0)] = arrays[node.name]
            continue
        ins = [values[e.key] for e in node.inputs]
        outs = _run_node(node, ins, shapes, dtypes)
        for i, v in enumerate(outs):
            values[(node, i)] = v
        for e in node.inputs:
            left = remaining[e.key] - 1
            remaining[e.key] = left
            if left == 0:
                values.pop(e.key, None)
    return [values[e.key] for e in graph.outputs]


def _run_node(node: Node, ins: Sequence[np.ndarray], shapes, dtypes) -> list[np.ndarray]:
    nout = node.num_outputs()
    ctx = ForwardContext(
        node=node,
        out_shapes=[shapes.get((node, i)) for i in range(nout)],
        out_dtypes=[dtypes.get((node, i)) for i in range(nout)],
        in_shapes=[x.shape for x in ins],
        in_dtypes=[x.dtype.name for x in ins],
    )
    for i, shape in enumerate(ctx.out_shapes):
        if shape is not None and None not in shape:
            itemsize = np.dtype(ctx.out_dtypes[i] or np.float32).itemsize
            checked_nbytes(shape, itemsize, f"operator {node.op} (node {node.ref}) output {i}")
    try:
        outs = node.opdef.forward(node.params, ins, ctx)
    except MxcError:
        raise
    except Exception as exc:  # a kernel bug or an input outside the op's domain
        raise ExecutionError(f"operator {node.op} (node {node.ref}) failed in the reference "
                             f"backend: {type(exc).__name__}: {exc}") from exc
    if len(outs) != nout:
        raise ExecutionError(f"operator {node.op} (node {node.ref}) returned {len(outs)} "
                             f"outputs, expected {nout}")
    result = []
    for i, v in enumerate(outs):
        v = np.asarray(v)
        want = ctx.out_dtypes[i]
        if want is not None and v.dtype.name != want:
            v = v.astype(want)
        result.append(v)
    return result


def unused_inputs(graph: Graph) -> set[str]:
    """Names of graph inputs that only feed slots inference never reads (:meth:`Graph.unused_inputs`)."""
    return graph.unused_inputs()


class Executor:
    """MXNet-style bound executor: ``forward()`` then read ``outputs``."""

    def __init__(self, graph: Graph, arg_dict: Mapping[str, np.ndarray],
                 aux_dict: Mapping[str, np.ndarray] | None = None):
        self.graph = graph
        self.arg_dict = {k: np.asarray(v) for k, v in arg_dict.items()}
        self.aux_dict = {k: np.asarray(v) for k, v in (aux_dict or {}).items()}
        self.outputs: list[np.ndarray] = []

    def forward(self, is_train: bool = False, **kwargs: np.ndarray) -> list[np.ndarray]:
        """Run inference; keyword arguments overwrite argument arrays first."""
        if is_train:
            raise ExecutionError("the reference backend runs inference only (is_train=False)")
        for k, v in kwargs.items():
            if k not in self.arg_dict:
                raise ExecutionError(f"forward() got unknown argument {k!r}; arguments are "
                                     f"{', '.join(self.arg_dict)}")
            self.arg_dict[k] = np.asarray(v)
        feeds = {**self.arg_dict, **self.aux_dict}
        self.outputs = run_graph(self.graph, feeds)
        return self.outputs
