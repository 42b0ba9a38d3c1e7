"""Graph passes of a compiled library as mxc passes.

A library pass takes the graph as MXNet's JSON plus the options and the
parameter tensors, and returns a new JSON.  Parameters it allocates
(``alloc_arg``/``alloc_aux``) come through MXNet's ``nd_malloc`` callback;
they are handed back to the caller's ``args``/``aux`` even when no node uses
them, as MXNet does, and -- as in MXNet -- their contents are whatever the
library wrote (numpy ``empty`` memory otherwise).
"""

from __future__ import annotations

import ctypes
import json
from ctypes import byref, c_char_p, c_void_p

import numpy as np

from .abi import ND_MALLOC, strings
from .graph_json import graph_from_json, graph_to_json
from .handle import NativeLibrary, library_text
from .marshal import as_contiguous, dtype_name, tensor_block

__all__ = ["read_passes", "register_passes"]

_PENDING: dict[int, list] = {}


def _nd_malloc(alloc, shape, ndim, dev, dev_id, dtype, name, is_arg, data):
    out = _PENDING.get(alloc or 0)
    if out is None:
        return
    dims = tuple(int(shape[i]) for i in range(ndim))
    array = np.empty(dims, dtype=dtype_name(dtype) or "float32")
    out.append(((name or b"").decode("utf-8", "replace"), bool(is_arg), array))
    data[0] = array.ctypes.data


_ND_CALLBACK = ND_MALLOC(_nd_malloc)


def _read_output(lib: NativeLibrary, ptr: int) -> str:
    """The pass's output JSON, owned as this lib_api version hands it over."""
    if lib.abi.pass_output == "malloc-unterminated":
        # v7 copies the string without its NUL: read up to the first NUL, keep the JSON value
        raw = ctypes.string_at(ptr).decode("utf-8", "replace")
        text, _ = json.JSONDecoder().raw_decode(raw)
        lib.free(ptr)
        return json.dumps(text)
    raw = ctypes.string_at(ptr)
    if lib.abi.pass_output == "malloc":
        lib.free(ptr)
    return library_text(raw, lib.name, "a graph pass's output JSON")


class _LibraryPass:
    """Runs one library pass inside mxc's pass manager."""

    def __init__(self, lib: NativeLibrary, name: str, fp: int):
        self.lib, self.name, self.fp = lib, name, fp
        self.__doc__ = f"Graph pass {name!r} of compiled extension library {lib.name}."

    def __call__(self, graph, ctx):
        _annotate(graph, ctx)
        text = graph_to_json(graph).encode("utf-8")
        opts = {k: v if isinstance(v, str) else str(v) for k, v in ctx.options.items()}
        keys = list(opts)
        keep: list = []
        blocks = []
        for named in (ctx.params.args, ctx.params.aux):
            arrays = [as_contiguous(np.asarray(v)) for v in named.values()]
            dense, _ = tensor_block(arrays, keep)
            shapes, dims, data, dtypes, ids, devs, dev_ids, count = dense
            blocks += [strings(list(named)), count, data, shapes, dims, dtypes, ids, devs,
                       dev_ids]
        allocated: list = []
        key = id(allocated)
        _PENDING[key] = allocated
        out = c_void_p()
        try:
            ok = self.lib.abi._passCallGraphPass(
                self.fp, text, byref(out), strings(keys), strings([opts[k] for k in keys]),
                len(keys), self.name.encode("utf-8"), *blocks, _ND_CALLBACK, c_void_p(key))
        finally:
            _PENDING.pop(key, None)
        if not ok or not out.value:
            raise self.lib.fail(f"graph pass {self.name!r}",
                                f"Error calling graph pass '{self.name}'")
        new = graph_from_json(_read_output(self.lib, out.value),
                              f"output of graph pass {self.name!r} ({self.lib.name})")
        for name, is_arg, array in allocated:
            kind = "arg" if is_arg else "aux"
            ctx.params.set(name, array, kind)
            ctx.params.pinned.add(name)
        return new


def _annotate(graph, ctx) -> None:
    """MXNet annotates ``__ext_shape__``/``__ext_dtype__`` before a pass when every
    input has an array; so do we (the attributes stay in the output graph)."""
    from ...compiler.partition.custom import annotate_ext_attrs
    inputs = [n for n in graph.topo_order() if n.op is None]
    arrays = {n.name: ctx.params.get(n.name) for n in inputs}
    if not inputs or any(v is None for v in arrays.values()):
        return
    types = graph.types({k: tuple(v.shape) for k, v in arrays.items()},
                        {k: v.dtype.name for k, v in arrays.items()})
    shapes, dtypes = types.shapes, types.dtypes
    annotate_ext_attrs(graph.topo_order(), shapes, dtypes)


def read_passes(lib: NativeLibrary) -> list[tuple[str, _LibraryPass]]:
    abi = lib.abi
    out = []
    for i in range(abi._passRegSize()):
        fp, name = c_void_p(), c_char_p()
        abi._passRegGet(i, byref(fp), byref(name))
        pname = library_text(name.value, lib.name, f"the name of graph pass {i}")
        out.append((pname, _LibraryPass(lib, pname, fp.value or 0)))
    return out


def register_passes(found) -> None:
    from ...compiler.passes.registry import register_pass
    for name, fn in found:
        register_pass(name, fn, summary=fn.__doc__, override=True)
