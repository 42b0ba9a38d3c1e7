"""Running one operator on NDArrays (``mx.nd.<op>``), recorded for autograd.

Each call builds a one-node graph: variables for the inputs and a node for the
operator, so the operator's own attribute parsing, shape/dtype inference and
reference (or library) kernel run exactly as they do inside a graph.  The node
lives as long as something needs it: a stateful operator's state is created
for it and is released with it, as MXNet creates one state per imperative call.

This module sits above the NDArray class (:mod:`._ndarray_core`) and below the
sparse arrays (:mod:`.sparse`): on import it hands the class :func:`invoke` and
:func:`resolve` (what ``x + y`` and ``x.softmax()`` run), and :mod:`.sparse`
hands it the wrapper of sparse kernel results (:func:`provide_sparse_wrapper`),
so none of the three imports a module above it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..compiler.ir import Entry, Node
from ..compiler.ops.registry import ForwardContext, get_op, has_op
from ..errors import MxcError
from . import _ndarray_core, autograd
from ._ndarray_core import NDArray
from .base import MXNetError, mxnet_error, not_supported

__all__ = ["invoke", "resolve", "op_function", "run_node", "wrap_output", "raw_value",
           "storage_attrs", "check_training", "provide_sparse_wrapper"]

#: sparse kernel result -> sparse NDArray (or None when dense); handed in by .sparse
_sparse_wrapper: list[Callable[[Any], Any]] = []


def provide_sparse_wrapper(fn: Callable[[Any], Any]) -> None:
    """Set how :func:`wrap_output` wraps a sparse kernel result (``sparse.from_kernel``)."""
    _sparse_wrapper[:] = [fn]


def resolve(name: str) -> str | None:
    """*name* if it is a registered operator (library ops included), else None.

    Subgraph operators are not functions (they run as nodes of a partitioned
    graph), as in MXNet.
    """
    try:
        return name if has_op(name) and not get_op(name).is_subgraph_op else None
    except MxcError:  # pragma: no cover - a broken registry entry
        return None


@functools.lru_cache(maxsize=None)
def op_function(op_name: str):
    """The ``mx.nd.<op>`` function of *op_name* (looks the definition up per call)."""
    def fn(*args, **kwargs):
        return invoke(op_name, list(args), kwargs)
    fn.__name__ = fn.__qualname__ = op_name
    fn.__doc__ = f"Run operator ``{op_name}`` on NDArrays (MXNet's ``mx.nd.{op_name}``)."
    return fn


def raw_value(x: Any):
    """What an operator kernel receives for *x*: a numpy array, or a sparse array as is."""
    if isinstance(x, NDArray):
        return x.kernel_value() if x.stype != "default" else x._data
    return np.asarray(x)


def storage_attrs(array) -> dict[str, str]:
    """MXNet's ``__storage_type__`` attribute for a variable bound to a sparse array
    (how storage-type inference learns an input is CSR or row-sparse)."""
    stype = getattr(array, "stype", "default")
    return {} if stype == "default" else {"__storage_type__": stype}


def wrap_output(value: Any, ctx=None) -> NDArray:
    """An operator's result as an NDArray (sparse results keep their storage)."""
    if isinstance(value, NDArray):
        return value
    sparse = _sparse_wrapper[0](value) if _sparse_wrapper else None
    if sparse is not None:
        return sparse
    return NDArray(np.asarray(value), ctx)


def check_training(node: Node) -> None:
    """Refuse to run *node* in training mode when its training semantics differ.

    mxc's kernels are inference kernels: Dropout (p > 0) would not drop and
    BatchNorm would use the moving statistics, so a forward in training mode
    (``is_train=True``, ``autograd.record()``) that reaches one of them is
    refused instead of computing inference values.
    """
    p = node.params
    differs = ((node.op == "Dropout" and p.get("p", 0) > 0)
               or (node.op in ("BatchNorm", "_contrib_SyncBatchNorm")
                   and not p.get("use_global_stats", False))
               or (node.op == "RNN" and p.get("p", 0) > 0))
    if differs:
        raise not_supported(f"training-mode {node.op} (node {node.ref}): mxc.mxnet runs its "
                            f"inference semantics only; run with is_train=False / outside "
                            f"autograd.record(), or train_mode=False")


def _dense_fallback(node: Node, values: list) -> list:
    """Sparse values as dense for operators without sparse kernels (MXNet's storage fallback);
    custom and library operators receive the sparse containers themselves."""
    if getattr(node.opdef, "impl", None) is not None:
        return values
    return [v.todense() if getattr(v, "stype", "default") != "default" and hasattr(v, "todense")
            else v for v in values]


def run_node(node: Node, values: list, *, in_shapes=None, in_dtypes=None,
             out_shapes=None, out_dtypes=None) -> list:
    """Run one node's kernel on *values* given inferred output shapes/dtypes."""
    ctx = ForwardContext(node=node, out_shapes=list(out_shapes or []),
                         out_dtypes=list(out_dtypes or []),
                         in_shapes=list(in_shapes or [tuple(np.shape(v)) for v in values]),
                         in_dtypes=list(in_dtypes or [np.dtype(v.dtype).name for v in values]))
    outs = node.opdef.forward(node.params, _dense_fallback(node, values), ctx)
    result = []
    for i, v in enumerate(outs):
        want = ctx.out_dtypes[i] if i < len(ctx.out_dtypes) else None
        if isinstance(v, np.ndarray) or np.isscalar(v):
            v = np.asarray(v)
            if want is not None and v.dtype.name != want:
                v = v.astype(want)
        result.append(v)
    return result


def _split(opdef, args: list, kwargs: dict) -> tuple[list, dict, dict]:
    """``(input arrays, inputs by name, attributes)``; positional values after the arrays
    are the operator's attributes in declaration order, as MXNet's generated functions take
    them (``x.clip(0, 1)``)."""
    count = next((i for i, a in enumerate(args) if not isinstance(a, NDArray)), len(args))
    arrays, extra = list(args[:count]), list(args[count:])
    named = {k: v for k, v in kwargs.items() if isinstance(v, NDArray)}
    attrs = {k: v for k, v in kwargs.items() if not isinstance(v, NDArray) and v is not None}
    free = [k for k in opdef.attrs if k not in attrs]
    if any(isinstance(a, NDArray) for a in extra) or len(extra) > len(free):
        raise MXNetError(f"{opdef.name}: positional arguments are the input NDArrays, then "
                         f"attributes ({', '.join(opdef.attrs) or 'none'}); got "
                         f"{', '.join(type(a).__name__ for a in args)}")
    attrs.update(zip(free, extra))
    return arrays, named, attrs


def invoke(op_name: str, args: list, kwargs: dict):
    """``mx.nd.<op_name>(*args, **kwargs)``: one output as an NDArray, several as a list."""
    opdef = get_op(op_name)
    out = kwargs.pop("out", None)
    name = kwargs.pop("name", None)
    kwargs.pop("ctx", None)
    arrays, named, attr_kwargs = _split(opdef, args, kwargs)
    try:
        attrs = opdef.format_attrs(attr_kwargs)
        if "num_args" in opdef.attrs and "num_args" not in attrs:
            attrs["num_args"] = str(len(arrays) + len(named))
        node = Node(op_name, name or op_name, attrs)
        p = node.params
        if named:
            names = opdef.input_names(p)
            extra = [k for k in named if k not in names]
            if extra:
                raise MXNetError(f"{op_name}: unexpected input(s) {', '.join(extra)}; inputs "
                                 f"are {', '.join(names)}")
            for in_name in names[len(arrays):]:
                if in_name in named:
                    arrays.append(named[in_name])
        expected = opdef.num_inputs(p)
        if expected is not None and expected != len(arrays):
            raise MXNetError(f"Check failed: num_inputs == infered_num_inputs ({len(arrays)} vs. "
                             f"{expected}) : Operator {op_name} expects {expected} inputs, but "
                             f"got {len(arrays)} instead.")
        node.inputs = [Entry(Node(None, f"{node.name}_in{i}", storage_attrs(a)))
                       for i, a in enumerate(arrays)]
        if autograd.is_training():
            check_training(node)
        values = [raw_value(a) for a in arrays]
        in_shapes = [tuple(a.shape) for a in arrays]
        in_dtypes = [np.dtype(a.dtype).name for a in arrays]
        n_out = opdef.num_outputs(p)
        _, out_shapes = opdef.infer_shape(p, list(in_shapes), [None] * n_out)
        _, out_dtypes = opdef.infer_type(p, list(in_dtypes), [None] * n_out)
        outs = run_node(node, values, in_shapes=in_shapes, in_dtypes=in_dtypes,
                        out_shapes=out_shapes, out_dtypes=out_dtypes)
    except MXNetError:
        raise
    except MxcError as exc:
        raise mxnet_error(exc) from exc
    visible = opdef.num_visible_outputs(p)
    results = [wrap_output(v) for v in outs]
    autograd.record_op(node, arrays, values, results, outs)
    results = results[:visible]
    if out is not None:
        targets = out if isinstance(out, (list, tuple)) else [out]
        for t, r in zip(targets, results):
            t[:] = r
        return out
    return results[0] if len(results) == 1 else results


_ndarray_core.provide(invoke=invoke, resolve=resolve)
