"""``Executor``: a symbol bound to arrays, with forward and backward.

``Symbol.bind``/``simple_bind`` make one.  The executor owns a copy of the
graph, so stateful operators get one state per executor (created on the
first forward, released with the executor) as in MXNet.  ``forward`` runs
every node with its kernel and keeps the values; ``backward`` walks the graph
in reverse with each node's gradient (:mod:`mxc.mxnet._gradients`) and writes
the gradient arrays given at bind time according to ``grad_req``
(``'write'``, ``'add'`` or ``'null'``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import MxcError
from ._gradients import node_gradients
from ._imperative import check_training, raw_value, run_node, storage_attrs, wrap_output
from .base import MXNetError, mxnet_error
from .ndarray import NDArray

__all__ = ["Executor", "infer_error"]


def infer_error(exc: MxcError) -> MXNetError:
    """MXNet's wording for an inference failure in a symbol (names the node)."""
    node = getattr(exc, "node", None)
    return mxnet_error(exc, node=node if isinstance(node, str) else None)


class Executor:
    """Forward and backward over a bound graph (MXNet's ``mx.executor.Executor``)."""

    def __init__(self, symbol, ctx, arg_dict: Mapping[str, NDArray],
                 grad_dict: Mapping[str, NDArray], grad_req: Mapping[str, str],
                 aux_dict: Mapping[str, NDArray]):
        self._symbol = symbol
        self._ctx = ctx
        self._graph = symbol.graph.copy()
        self.arg_dict = dict(arg_dict)
        self.grad_dict = dict(grad_dict)
        self.aux_dict = dict(aux_dict)
        self._grad_req = dict(grad_req)
        self.outputs: list[NDArray] = []
        self._values: dict | None = None
        for node in self._graph.topo_order():
            bound = self.arg_dict.get(node.name, self.aux_dict.get(node.name))
            if node.op is None and bound is not None:
                node.attrs.update(storage_attrs(bound))

    # -- MXNet's list views ------------------------------------------------------------
    @property
    def arg_arrays(self) -> list[NDArray]:
        return [self.arg_dict[n] for n in self._symbol.list_arguments()]

    @property
    def grad_arrays(self) -> list[NDArray | None]:
        return [self.grad_dict.get(n) for n in self._symbol.list_arguments()]

    @property
    def aux_arrays(self) -> list[NDArray]:
        return [self.aux_dict[n] for n in self._symbol.list_auxiliary_states()]

    @property
    def output_dict(self) -> dict[str, NDArray]:
        return dict(zip(self._symbol.list_outputs(), self.outputs))

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        for source, target in ((arg_params, self.arg_dict), (aux_params or {}, self.aux_dict)):
            for name, value in source.items():
                if name in target:
                    target[name][:] = value
                elif not allow_extra_params:
                    raise MXNetError(f"Find name {name!r} that is not in the arguments")

    # -- running -----------------------------------------------------------------------
    def forward(self, is_train: bool = False, **kwargs) -> list[NDArray]:
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise MXNetError(f"Find name {name!r} that is not in the arguments")
            self.arg_dict[name][:] = value
        feeds = {**self.arg_dict, **self.aux_dict}
        graph = self._graph
        order = graph.topo_order()
        try:
            types = graph.types({k: tuple(v.shape) for k, v in feeds.items()},
                                {k: np.dtype(v.dtype).name for k, v in feeds.items()})
            shapes, dtypes = types.shapes, types.dtypes
        except MXNetError:
            raise
        except MxcError as exc:
            raise infer_error(exc) from exc
        if is_train:
            for node in order:
                if node.op is not None:
                    check_training(node)
        values: dict = {}
        for node in order:
            if node.op is None:
                if node.name not in feeds:
                    raise MXNetError(f"no array is bound to input {node.ref}")
                values[(node, 0)] = raw_value(feeds[node.name])
                continue
            n_out = node.num_outputs()
            ins = [values[e.key] for e in node.inputs]
            try:
                outs = run_node(node, ins,
                                out_shapes=[shapes.get((node, i)) for i in range(n_out)],
                                out_dtypes=[dtypes.get((node, i)) for i in range(n_out)])
            except MXNetError:
                raise
            except MxcError as exc:
                raise mxnet_error(exc) from exc
            for i, v in enumerate(outs):
                values[(node, i)] = v
        self._values = values
        self.outputs = [wrap_output(values[e.key], self._ctx) for e in graph.outputs]
        return self.outputs

    def backward(self, out_grads: NDArray | Sequence[NDArray] | None = None,
                 is_train: bool = True) -> None:
        """Gradients of the arguments into ``grad_dict`` (per ``grad_req``)."""
        if self._values is None:
            raise MXNetError("backward() called before forward()")
        graph, values = self._graph, self._values
        if isinstance(out_grads, NDArray):
            out_grads = [out_grads]
        heads = graph.outputs
        if out_grads is None:
            out_grads = [None] * len(heads)
        if len(out_grads) != len(heads):
            raise MXNetError(f"backward: {len(out_grads)} head gradients for {len(heads)} "
                             f"outputs")
        grads: dict = {}

        def add(key, g):
            grads[key] = g if key not in grads else grads[key] + g

        for e, g in zip(heads, out_grads):
            v = values[e.key]
            add(e.key, np.ones(np.shape(v), dtype=v.dtype) if g is None else
                np.asarray(raw_value(g)))
        for node in reversed(graph.topo_order()):
            if node.op is None:
                continue
            n_out = node.num_outputs()
            keys = [(node, i) for i in range(n_out)]
            if not any(k in grads for k in keys):
                continue
            outs = [values[k] for k in keys]
            ogs = [grads.pop(k, None) for k in keys]
            ogs = [np.zeros(np.shape(o), dtype=o.dtype) if g is None else g
                   for g, o in zip(ogs, outs)]
            ins = [values[e.key] for e in node.inputs]
            for e, g in zip(node.inputs, node_gradients(node, ogs, ins, outs)):
                if g is not None:
                    add(e.key, g)
        for node in graph.topo_order():
            if node.op is not None or node.name not in self.grad_dict:
                continue
            req = self._grad_req.get(node.name, "null")
            target = self.grad_dict[node.name]
            g = grads.get((node, 0))
            if req == "null" or target is None:
                continue
            if g is None:
                g = np.zeros(target.shape, dtype=target._data.dtype)
            if req == "add":
                target._data += g.astype(target._data.dtype, copy=False)
            else:
                target._data[...] = g

    def __repr__(self) -> str:
        return f"<Executor of {self._symbol!r}>"
