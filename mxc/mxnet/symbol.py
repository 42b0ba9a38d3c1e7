"""``mx.sym``: MXNet's Symbol API with executors that train, over mxc's Symbol.

:class:`Symbol` extends mxc's :class:`~mxc.symbol.Symbol` (same graph,
same JSON, same inference) with MXNet 1.x behaviour where mxc's own API
differs:

* ``bind``/``simple_bind`` return an :class:`~mxc.mxnet.executor.Executor` on
  NDArrays that also runs ``backward`` (``args_grad``, ``grad_req``);
* ``optimize_for`` never clears earlier partitions (MXNet's Symbol API has no
  ``clear``), and an unknown backend logs MXNet's error and returns the
  symbol unchanged instead of raising;
* errors are :class:`~mxc.mxnet.base.MXNetError` in MXNet's wording.

Every registered operator is a builder (``mx.sym.exp``, library ops once
loaded), and ``mx.sym.linalg`` / ``contrib`` / ``sparse`` map to the
operator prefixes as in ``mx.nd``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import numpy as np

from .. import symbol as _base
from ..errors import MxcError
from ._imperative import resolve as _resolve
from .base import MXNetError, mxnet_error, version_number
from .context import check_cpu
from .executor import Executor, infer_error
from .ndarray import NDArray, zeros as _nd_zeros
from .operator import custom_op_type as _custom_op_type

__all__ = ["Symbol", "var", "Variable", "Group", "load", "load_json", "fromjson",
           "linalg", "contrib", "sparse"]

_log = logging.getLogger("mxc.mxnet")


def _wrap(sym):
    if isinstance(sym, _base.Symbol) and not isinstance(sym, Symbol):
        return Symbol(sym._outputs, sym._graph)
    return sym


def _names(arrays, names: list[str], what: str) -> dict:
    """*arrays* (a dict, or a list in *names* order) as a dict, with MXNet's length error."""
    from ..compiler.optimize import _as_dict
    try:
        return _as_dict(arrays, names, what)
    except MxcError:
        raise MXNetError(f"Length of {what} do not match number of arguments "
                         f"({len(list(arrays))} vs. {len(names)})") from None


def _nd(value) -> NDArray:
    if isinstance(value, NDArray):
        return value
    return NDArray(np.array(value, dtype=np.asarray(value).dtype))


class Symbol(_base.Symbol):
    """An MXNet symbol (``mx.sym.Symbol``)."""

    __slots__ = ()

    # -- structure (results stay mx Symbols) ----------------------------------------------
    def __getitem__(self, index):
        return _wrap(super().__getitem__(index))

    def __iter__(self):
        return (_wrap(s) for s in super().__iter__())

    def get_internals(self):
        return _wrap(super().get_internals())

    def get_children(self):
        return _wrap(super().get_children())

    def __copy__(self):
        return Symbol(self._outputs, self._graph)

    # -- serialization: the running (emulated) MXNet's version, as MXNet writes it ------------
    def _versioned_graph(self):
        from ..compiler.ir import Graph
        g = self.graph
        attrs = {**g.attrs, "mxnet_version": ["int", version_number()]}
        return Graph(g.nodes, g.outputs, attrs)

    def tojson(self) -> str:
        from ..frontend.symbol_json import dump_json
        return dump_json(self._versioned_graph())

    def save(self, fname, remove_amp_cast: bool = True) -> None:
        from ..frontend.symbol_json import dump_json
        from ..atomic_files import atomic_write_text
        atomic_write_text(fname, dump_json(self._versioned_graph()))

    # -- inference (MXNet's errors) ------------------------------------------------------
    def _infer(self, method, what: str, args, kwargs, report: bool = True):
        """Run a base inference *method*; on failure print MXNet's argument report."""
        try:
            return method(self, *args, **kwargs)
        except MxcError as exc:
            if report:
                print(f"{what} error. Arguments:")
                for i, arg in enumerate(args):
                    print(f"  #{i}: {arg}")
                for key, value in kwargs.items():
                    print(f"  {key}: {value}")
            raise exc if isinstance(exc, MXNetError) else infer_error(exc) from exc

    def infer_shape(self, *args, **kwargs):
        return self._infer(_base.Symbol.infer_shape, "infer_shape", args, kwargs)

    def infer_shape_partial(self, *args, **kwargs):
        # no argument report here: infer_shape calls this and reports once itself
        return self._infer(_base.Symbol.infer_shape_partial, "infer_shape", args, kwargs,
                           report=False)

    @staticmethod
    def _dtype_names(args, kwargs):
        return (tuple(None if a is None else np.dtype(a).name for a in args),
                {k: None if v is None else np.dtype(v).name for k, v in kwargs.items()})

    def infer_type(self, *args, **kwargs):
        names, kw = self._dtype_names(args, kwargs)
        try:
            return self._infer(_base.Symbol.infer_type, "infer_type", names, kw, report=False)
        except MXNetError:
            print("infer_type error. Arguments:")
            for i, arg in enumerate(args):
                print(f"  #{i}: {arg}")
            for key, value in kwargs.items():
                print(f"  {key}: {value}")
            raise

    def infer_type_partial(self, *args, **kwargs):
        names, kw = self._dtype_names(args, kwargs)
        return self._infer(_base.Symbol.infer_type_partial, "infer_type", names, kw,
                           report=False)

    # -- binding -------------------------------------------------------------------------
    def bind(self, ctx=None, args=None, args_grad=None, grad_req="write", aux_states=None,
             group2ctx=None, shared_exec=None) -> Executor:
        """An executor over NDArrays (shared with the caller: writes are seen)."""
        ctx = check_cpu(ctx, "bind")
        arg_names, aux_names = self.list_arguments(), self.list_auxiliary_states()
        arg_dict = {k: _nd(v) for k, v in _names(args, arg_names, "args").items()}
        missing = [n for n in arg_names if n not in arg_dict]
        if missing:
            raise MXNetError(f"Must specify all the arguments in args; missing "
                             f"{', '.join(missing)}")
        aux_dict = {k: _nd(v) for k, v in _names(aux_states, aux_names, "aux_states").items()}
        missing = [n for n in aux_names if n not in aux_dict]
        if missing:
            raise MXNetError(f"Must specify all the auxiliary states; missing "
                             f"{', '.join(missing)}")
        grad_dict = {k: v for k, v in _names(args_grad, arg_names, "args_grad").items()
                     if v is not None}
        if isinstance(grad_req, str):
            reqs = {n: grad_req for n in arg_names}
        elif isinstance(grad_req, Mapping):
            reqs = {n: grad_req.get(n, "null") for n in arg_names}
        else:
            reqs = dict(zip(arg_names, grad_req))
        bad = sorted({r for r in reqs.values() if r not in ("write", "add", "null")})
        if bad:
            raise MXNetError(f"grad_req must be 'write', 'add' or 'null', got {bad[0]!r}")
        return Executor(self, ctx, arg_dict, grad_dict, reqs, aux_dict)

    def simple_bind(self, ctx=None, grad_req="write", type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs) -> Executor:
        """Allocate the arguments (zeros), gradients and aux states from shapes, and bind."""
        try:
            arg_shapes, _, aux_shapes = self._infer(_base.Symbol.infer_shape, "", (), kwargs,
                                                    report=False)
            if arg_shapes is None:
                partial = self._infer(_base.Symbol.infer_shape_partial, "", (), kwargs,
                                      report=False)[0]
                unknown = [n for n, s in zip(self.list_arguments(), partial)
                           if s is None or None in s]
                raise MXNetError(f"simple_bind: cannot infer the shape of "
                                 f"{', '.join(unknown)}")
            arg_types, _, aux_types = self._infer(
                _base.Symbol.infer_type_partial, "", (),
                {k: np.dtype(v).name for k, v in (type_dict or {}).items()}, report=False)
        except MXNetError as exc:
            given = "".join(f"{k}: {tuple(v)}\n" for k, v in kwargs.items())
            raise RuntimeError(f"simple_bind error. Arguments:\n{given}{exc}") from exc
        args = {n: _nd_zeros(s, dtype=t or np.float32)
                for n, s, t in zip(self.list_arguments(), arg_shapes, arg_types)}
        aux = {n: _nd_zeros(s, dtype=t or np.float32)
               for n, s, t in zip(self.list_auxiliary_states(), aux_shapes, aux_types)}
        grads = None
        if grad_req != "null":
            grads = {n: _nd_zeros(a.shape, dtype=a.dtype) for n, a in args.items()}
        return self.bind(ctx, args, args_grad=grads, grad_req=grad_req, aux_states=aux)

    def eval(self, ctx=None, **kwargs) -> list[NDArray]:
        return self.bind(ctx, kwargs).forward()

    # -- optimize_for (MXNet semantics) --------------------------------------------------
    def optimize_for(self, backend: str, args=None, aux=None, ctx=None, **kwargs) -> "Symbol":
        """Partition or transform for *backend*; earlier partitions are kept."""
        from ..compiler.partition import has_subgraph_backend
        from ..compiler.passes.registry import has_pass
        for key in ("shape_dict", "type_dict", "stype_dict", "skip_infer"):
            kwargs.pop(key, None)
        if not (has_pass(backend) or has_subgraph_backend(backend)):
            _log.error("Error optimizing for backend '%s' cannot be found", backend)
            return self
        np_args, np_aux = _to_numpy(args), _to_numpy(aux)
        if has_pass(backend):
            # MXNet runs a pass given no dicts too; what it allocates then is dropped
            np_args = {} if np_args is None else np_args
            np_aux = {} if np_aux is None else np_aux
        try:
            result = super().optimize_for(backend, np_args, np_aux, clear=False, **kwargs)
        except MXNetError:
            raise
        except MxcError as exc:
            raise mxnet_error(exc) from exc
        _sync(args, np_args)
        _sync(aux, np_aux)
        return _wrap(result)

    # -- arithmetic returns mx Symbols -----------------------------------------------------


def _to_numpy(arrays):
    if arrays is None:
        return None
    if isinstance(arrays, Mapping):
        return {k: (v._data if isinstance(v, NDArray) else v) for k, v in arrays.items()}
    return [v._data if isinstance(v, NDArray) else v for v in arrays]


def _sync(caller, updated) -> None:
    """Copy parameters a pass added (or removed) into the caller's dict, as NDArrays."""
    if not isinstance(caller, dict) or not isinstance(updated, dict):
        return
    for name in [k for k in caller if k not in updated]:
        del caller[name]
    for name, value in updated.items():
        current = caller.get(name)
        if current is None or (isinstance(current, NDArray) and current._data is not value):
            caller[name] = value if isinstance(value, NDArray) else NDArray(np.asarray(value))


def _arith(name: str):
    base = getattr(_base.Symbol, name)

    def method(self, *args):
        return _wrap(base(self, *args))
    method.__name__ = name
    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
            "__truediv__", "__rtruediv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
            "__neg__", "__eq__", "__ne__", "__gt__", "__ge__", "__lt__", "__le__"):
    setattr(Symbol, _op, _arith(_op))
Symbol.__hash__ = object.__hash__


# ---------------------------------------------------------------------------
# constructors
# ---------------------------------------------------------------------------
def var(name: str, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None,
        stype=None, **kwargs) -> Symbol:
    return _wrap(_base.var(name, attr=attr, shape=shape, lr_mult=lr_mult, wd_mult=wd_mult,
                           dtype=dtype, init=init, stype=stype, **kwargs))


Variable = var


def Group(symbols: Sequence[Symbol]) -> Symbol:
    return _wrap(_base.Group(symbols))


def load(fname: str) -> Symbol:
    try:
        return _wrap(_base.load(fname))
    except MxcError as exc:
        raise mxnet_error(exc) from exc


def load_json(json_str: str) -> Symbol:
    try:
        return _wrap(_base.load_json(json_str))
    except MxcError as exc:
        raise mxnet_error(exc) from exc


fromjson = load_json


def builder(op_name: str):
    """The ``mx.sym.<op>`` function of *op_name*."""
    def build(*args, name: str | None = None, attr=None, **kwargs: Any) -> Symbol:
        from ..compiler.ops.registry import get_op
        count = next((i for i, a in enumerate(args) if not isinstance(a, _base.Symbol)),
                     len(args))
        if count < len(args):  # positional attributes after the inputs, in declaration order
            free = [k for k in get_op(op_name).attrs if k not in kwargs]
            if len(args) - count > len(free) or any(isinstance(a, _base.Symbol)
                                                   for a in args[count:]):
                raise MXNetError(f"{op_name}: positional arguments are the input Symbols, "
                                 f"then attributes ({', '.join(free) or 'none'})")
            kwargs.update(zip(free, args[count:]))
            args = args[:count]
        try:
            return _wrap(_base.create(op_name, *args, name=name, attr=attr, **kwargs))
        except MXNetError:
            raise
        except MxcError as exc:
            raise mxnet_error(exc) from exc
    build.__name__ = build.__qualname__ = op_name
    build.__doc__ = f"Build a ``{op_name}`` node (MXNet's ``mx.sym.{op_name}``)."
    return build


class _Namespace:
    def __init__(self, module: str, prefixes: Sequence[str]):
        self.__name__ = module
        self._prefixes = tuple(prefixes)

    def __getattr__(self, name: str):
        if not name.startswith("__"):
            for prefix in self._prefixes:
                if _resolve(prefix + name) is not None:
                    return builder(prefix + name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


linalg = _Namespace("mxc.mxnet.symbol.linalg", ["_linalg_"])
contrib = _Namespace("mxc.mxnet.symbol.contrib", ["_contrib_"])
sparse = _Namespace("mxc.mxnet.symbol.sparse", ["_sparse_", ""])
random = _Namespace("mxc.mxnet.symbol.random", ["_random_", "_sample_"])
op = _Namespace("mxc.mxnet.symbol.op", [""])


def __getattr__(name: str):
    if name == "Custom" and _resolve("Custom") is None:
        return lambda *args, **kwargs: builder(_custom_op_type(kwargs))(*args, **kwargs)
    if not name.startswith("__") and _resolve(name) is not None:
        return builder(name)
    raise AttributeError(f"module 'mxc.mxnet.symbol' has no attribute {name!r} (no such "
                         f"operator is registered)")
