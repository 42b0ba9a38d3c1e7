"""Gluon's ``SymbolBlock``: a symbol used as a block, hybridized for a backend.

``SymbolBlock(outputs, inputs)`` turns every argument and auxiliary state of
*outputs* that is not one of *inputs* into a :class:`Parameter`.  Calling the
block binds the (possibly optimized) symbol to the inputs and the
parameters' arrays and runs it; the executor is kept per input signature, so
stateful operators keep their state across calls as with MXNet's CachedOp.

``hybridize(backend=...)`` partitions at the first call, when the input
shapes are known; ``optimize_for(x, ..., backend=...)`` does it at once.  A
backend (a graph pass) may add parameters: they are exported with the block
but, as in MXNet, are not part of ``collect_params()``.

Blocks defined in Python (``HybridBlock`` subclasses with ``hybrid_forward``,
``nn.Dense`` ...) are not provided: mxc.mxnet runs models given as symbols.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..base import MXNetError, not_supported
from ..ndarray import NDArray, save as nd_save
from ..symbol import Group, Symbol, _wrap, load as sym_load, var
from .parameter import Parameter, ParameterDict

__all__ = ["Block", "HybridBlock", "SymbolBlock"]

# hybridize()/optimize_for() keywords that are execution flags, not backend options
_FLAGS = ("static_alloc", "static_shape", "inline_limit", "forward_bulk_size",
          "backward_bulk_size", "partition_if_dynamic", "active")


class Block:
    """Base of Gluon blocks; only :class:`SymbolBlock` is available in mxc.mxnet."""

    def __init__(self, prefix=None, params=None):
        if type(self) in (Block, HybridBlock) or not isinstance(self, SymbolBlock):
            raise not_supported("Gluon blocks defined in Python (Block/HybridBlock subclasses, "
                                "gluon.nn layers); load the model as a symbol and use "
                                "gluon.nn.SymbolBlock")


class HybridBlock(Block):
    pass


class SymbolBlock(HybridBlock):
    """A block computing *outputs* from *inputs* (MXNet's ``gluon.nn.SymbolBlock``)."""

    def __init__(self, outputs, inputs, params: ParameterDict | None = None):
        if isinstance(outputs, (list, tuple)):
            outputs = Group(outputs) if len(outputs) > 1 else outputs[0]
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        self._symbol: Symbol = _wrap(outputs)
        self._input_names = [s.name for s in inputs]
        unknown = [n for n in self._input_names if n not in self._symbol.list_inputs()]
        if unknown:
            raise MXNetError(f"SymbolBlock: input {unknown[0]!r} is not an input of the "
                             f"symbol; its inputs are {', '.join(self._symbol.list_inputs())}")
        self._params = ParameterDict()
        aux = set(self._symbol.list_auxiliary_states())
        for name in self._symbol.list_inputs():
            if name in self._input_names:
                continue
            given = params.get(name) if params is not None else None
            self._params[name] = given or Parameter(
                name, grad_req="null" if name in aux else "write", allow_deferred_init=True)
        self._optimized: Symbol | None = None
        self._extra: dict[str, NDArray] = {}    # parameters a backend added
        self._backend: str | None = None
        self._backend_opts: dict[str, Any] = {}
        self._active = False
        self._executors: dict = {}

    # -- parameters ------------------------------------------------------------------------
    def collect_params(self, select: str | None = None) -> ParameterDict:
        if select is None:
            return self._params
        import re
        pattern = re.compile(select)
        out = ParameterDict()
        for k, v in self._params.items():
            if pattern.match(k):
                out[k] = v
        return out

    @property
    def params(self) -> ParameterDict:
        return self._params

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False) -> None:
        self._params.initialize(init, ctx, verbose, force_reinit)

    def cast(self, dtype) -> None:
        for p in self._params.values():
            p.cast(dtype)
        self._executors.clear()

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source="current") -> None:
        self._params.load(filename, ctx, allow_missing, ignore_extra, "", cast_dtype,
                          dtype_source)

    def save_parameters(self, filename: str, deduplicate: bool = False) -> None:
        self._params.save(filename)

    # -- hybridization ---------------------------------------------------------------------
    def hybridize(self, active: bool = True, backend: str | None = None,
                  backend_opts: dict | None = None, clear: bool = True, **kwargs) -> None:
        """Cache the graph; with *backend*, partition it at the next call."""
        self._active = active
        if clear:
            self._optimized = None
            self._extra = {}
        self._backend = backend
        self._backend_opts = {**(backend_opts or {}),
                              **{k: v for k, v in kwargs.items() if k not in _FLAGS}}
        self._executors.clear()

    def optimize_for(self, x, *args, backend: str | None = None, backend_opts=None,
                     clear: bool = False, **kwargs) -> None:
        """Partition (or transform) for *backend* now, with the shapes of the given inputs."""
        if backend is None:
            raise MXNetError("optimize_for: backend must be given")
        opts = {**(backend_opts or {}), **{k: v for k, v in kwargs.items() if k not in _FLAGS}}
        self._active = True
        if clear:
            self._optimized, self._extra = None, {}
        self._backend, self._backend_opts = None, {}
        self._optimize(backend, opts, [x, *args])
        self._executors.clear()

    def _optimize(self, backend: str, opts: dict, inputs: Sequence[NDArray]) -> None:
        base = self._optimized if self._optimized is not None else self._symbol
        arg_dict, aux_dict = self._arrays(base, inputs)
        result = base.optimize_for(backend, arg_dict, aux_dict, **opts)
        known = set(self._input_names) | set(self._params)
        for name, value in {**arg_dict, **aux_dict}.items():
            if name not in known:
                self._extra[name] = value
        self._optimized = result

    def _arrays(self, sym: Symbol, inputs: Sequence[NDArray]) -> tuple[dict, dict]:
        """``(args, aux)`` of *sym*: the inputs, then parameters (deferred ones created)."""
        if len(inputs) != len(self._input_names):
            raise MXNetError(f"SymbolBlock expects {len(self._input_names)} inputs "
                             f"({', '.join(self._input_names)}), got {len(inputs)}")
        given = dict(zip(self._input_names, inputs))
        self._finish_deferred(given)
        arg_dict: dict[str, NDArray] = {}
        for name in sym.list_arguments():
            arg_dict[name] = self._value(name, given)
        aux_dict = {name: self._value(name, given) for name in sym.list_auxiliary_states()}
        return arg_dict, aux_dict

    def _value(self, name: str, given: dict) -> NDArray:
        if name in given:
            return given[name]
        if name in self._params:
            return self._params[name].data()
        if name in self._extra:
            return self._extra[name]
        raise MXNetError(f"SymbolBlock: no array for input {name!r}")

    def _finish_deferred(self, given: dict) -> None:
        waiting = [p for p in self._params.values() if p._data is None and p._deferred]
        if not waiting:
            return
        shapes = {k: v.shape for k, v in given.items()}
        arg_s, _, aux_s = self._symbol.infer_shape_partial(**shapes)
        names = self._symbol.list_arguments() + self._symbol.list_auxiliary_states()
        types = {k: np.dtype(v.dtype).name for k, v in given.items()}
        arg_t, _, aux_t = self._symbol.infer_type_partial(**types)
        for name, shape, dtype in zip(names, arg_s + aux_s, arg_t + aux_t):
            if name in self._params and shape is not None and None not in shape:
                self._params[name]._finish_deferred(shape, dtype or np.float32)

    # -- running ---------------------------------------------------------------------------
    def __call__(self, x, *args):
        return self.forward(x, *args)

    def forward(self, x, *args):
        from .. import autograd
        if autograd.is_recording():
            raise not_supported("differentiating through a SymbolBlock under autograd.record() "
                                "(bind the symbol with args_grad to get gradients)")
        inputs = [x, *args]
        if self._active and self._backend is not None and self._optimized is None:
            self._optimize(self._backend, self._backend_opts, inputs)
        sym = self._optimized if self._optimized is not None else self._symbol
        arg_dict, aux_dict = self._arrays(sym, inputs)
        key = tuple((tuple(a.shape), np.dtype(a.dtype).name) for a in inputs)
        exe = self._executors.get(key)
        if exe is None:
            exe = sym.bind(args=arg_dict, aux_states=aux_dict, grad_req="null")
            self._executors[key] = exe
        else:
            for name, value in {**arg_dict, **aux_dict}.items():
                target = exe.arg_dict.get(name, exe.aux_dict.get(name))
                if target is not value:
                    (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name] = value
        outs = exe.forward()
        return outs[0] if len(outs) == 1 else outs

    # -- export ----------------------------------------------------------------------------
    def export(self, path: str, epoch: int = 0, remove_amp_cast: bool = True):
        """Write ``path-symbol.json`` and ``path-%04d.params`` (``arg:``/``aux:`` keys)."""
        sym = self._optimized if self._optimized is not None else self._symbol
        sym.save(f"{path}-symbol.json")
        aux = set(sym.list_auxiliary_states())
        data: dict[str, NDArray] = {}
        for name in sym.list_inputs():
            if name in self._input_names:
                continue
            if name in self._params:
                value = self._params[name].data()
            elif name in self._extra:
                value = self._extra[name]
            else:
                continue
            data[f"{'aux' if name in aux else 'arg'}:{name}"] = value
        params_file = f"{path}-{epoch:04d}.params"
        nd_save(params_file, data)
        return f"{path}-symbol.json", params_file

    @staticmethod
    def imports(symbol_file: str, input_names, param_file: str | None = None, ctx=None,
                allow_missing: bool = False, ignore_extra: bool = False) -> "SymbolBlock":
        """A block from an exported model (``prefix-symbol.json`` + params)."""
        sym = sym_load(symbol_file)
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        block = SymbolBlock(sym, [var(n) for n in names])
        if param_file is not None:
            block.collect_params().load(param_file, ctx, allow_missing, ignore_extra)
        return block

    def __repr__(self) -> str:
        return f"SymbolBlock(inputs={self._input_names}, outputs={self._symbol.list_outputs()})"
