"""Partitioners of a compiled library as mxc partitioners.

Every strategy ``_partRegGet`` lists becomes a strategy of an mxc
:class:`~mxc.compiler.partition.Partitioner` whose callbacks call the
library: ``supportedOps`` and ``createSelector`` get the graph as MXNet's JSON
(with ``__ext_shape__``/``__ext_dtype__`` when shapes are known), selectors
are driven through ``_partCallSelect*``/``Filter``/``Reset``, and
``reviewSubgraph`` gets the subgraph's JSON, its id, the options and the
parameter tensors of the arguments it reads.  Attributes it returns land on
the subgraph node.

Node ids are positions in the JSON's node list (MXNet's order); they are
mapped to mxc's node order by name, so the two orders need not agree.
"""

from __future__ import annotations

import ctypes
import json
from ctypes import POINTER, byref, c_char_p, c_int, c_void_p
from typing import Any, Mapping

from .abi import strings
from .graph_json import graph_to_json
from .handle import NativeLibrary, library_text
from .marshal import as_contiguous, tensor_block

__all__ = ["register_partitioners", "read_partitioners"]


def _options(options: Mapping[str, str]):
    keys = list(options)
    return strings(keys), strings([str(options[k]) for k in keys]), len(keys)


def _json_and_map(graph) -> tuple[bytes, list[int], dict[int, int]]:
    """The graph's JSON, json position -> graph.nodes position, and the reverse."""
    text = graph_to_json(graph)
    names = [n["name"] for n in json.loads(text)["nodes"]]
    where = {}
    for i, node in enumerate(graph.nodes):
        where.setdefault(node.name, i)
    to_graph = [where.get(name, -1) for name in names]
    return text.encode("utf-8"), to_graph, {g: j for j, g in enumerate(to_graph) if g >= 0}


class _Strategy:
    """The callbacks of one strategy, bound to the library's function pointers."""

    def __init__(self, lib: NativeLibrary, part: str, name: str, supported: int,
                 selector: int, review: int):
        self.lib, self.part, self.name = lib, part, name
        self.supported, self.selector, self.review = supported, selector, review

    def _fail(self, hook: str, mx_hook: str):
        return self.lib.fail(f"partitioner {self.part!r} strategy {self.name!r} {hook}",
                             f"Error calling {mx_hook} for partitioner '{self.part}'")

    def supported_ops(self, graph, ids, options):
        text, to_graph, _ = _json_and_map(graph)
        arr = (c_int * max(len(to_graph), 1))(*([-2] * len(to_graph)))
        keys, vals, n = _options(options)
        ok = self.lib.abi._partCallSupportedOps(self.supported, text, len(to_graph), arr, keys,
                                                vals, n)
        if not ok:
            raise self._fail("supported_ops", "supportedOps")
        for j, g in enumerate(to_graph):
            if g >= 0:
                ids[g] = int(arr[j])
        return True

    def create_selector(self, graph, options):
        text, to_graph, to_json = _json_and_map(graph)
        keys, vals, n = _options(options)
        handle = c_void_p()
        ok = self.lib.abi._partCallCreateSelector(self.selector, text, byref(handle), keys, vals,
                                                  n)
        if not ok or not handle.value:
            raise self._fail("create_selector", "createSelector")
        return _Selector(self.lib, handle.value, to_graph, to_json)

    def review_subgraph(self, subgraph, subgraph_id, options, params=None):
        text = graph_to_json(subgraph).encode("utf-8")
        keys, vals, n = _options(options)
        accept = c_int(0)
        akeys, avals, nattr = POINTER(c_char_p)(), POINTER(c_char_p)(), c_int(0)
        keep: list = []
        blocks = []
        for kind in ("args", "aux"):
            named = dict((params or {}).get(kind, {}))
            arrays = [as_contiguous(_host(v)) for v in named.values()]
            dense, _ = tensor_block(arrays, keep)
            shapes, dims, data, dtypes, ids, devs, dev_ids, count = dense
            blocks += [strings(list(named)), count, data, shapes, dims, dtypes, ids, devs,
                       dev_ids]
        ok = self.lib.abi._partCallReviewSubgraph(
            self.review, text, subgraph_id, byref(accept), keys, vals, n, byref(akeys),
            byref(avals), byref(nattr), *blocks)
        if not ok:
            raise self._fail("review_subgraph", "reviewSubgraph")
        attrs = {}
        for i in range(nattr.value):
            key = library_text(akeys[i], self.lib.name, f"reviewSubgraph attribute {i}'s name")
            attrs[key] = library_text(avals[i], self.lib.name,
                                      f"reviewSubgraph attribute {key!r}'s value")
            self.lib.free(ctypes.cast(ctypes.cast(akeys, POINTER(c_void_p))[i], c_void_p))
            self.lib.free(ctypes.cast(ctypes.cast(avals, POINTER(c_void_p))[i], c_void_p))
        if nattr.value:
            self.lib.free(ctypes.cast(akeys, c_void_p))
            self.lib.free(ctypes.cast(avals, c_void_p))
        return bool(accept.value), attrs

    review_subgraph.wants_params = True  # type: ignore[attr-defined]


def _host(value: Any):
    import numpy as np
    for attr in ("asnumpy", "numpy"):
        fn = getattr(value, attr, None)
        if callable(fn):
            return np.asarray(fn())
    return np.asarray(value)


class _Selector:
    """A library ``CustomOpSelector`` seen through mxc's selector protocol."""

    def __init__(self, lib: NativeLibrary, handle: int, to_graph: list[int],
                 to_json: dict[int, int]):
        self.lib, self.handle = lib, c_void_p(handle)
        self.to_graph, self.to_json = to_graph, to_json

    def _ask(self, fn, *ids) -> bool:
        out = c_int(0)
        fn(self.handle, *[self.to_json.get(i, -1) for i in ids], byref(out))
        return bool(out.value)

    def select(self, node_id):
        return self._ask(self.lib.abi._partCallSelect, node_id)

    def select_input(self, node_id, input_id):
        return self._ask(self.lib.abi._partCallSelectInput, node_id, input_id)

    def select_output(self, node_id, output_id):
        return self._ask(self.lib.abi._partCallSelectOutput, node_id, output_id)

    def filter(self, candidates):
        ids = [self.to_json.get(i, -1) for i in candidates]
        arr = (c_int * max(len(ids), 1))(*ids)
        keep, count = POINTER(c_int)(), c_int(0)
        self.lib.abi._partCallFilter(self.handle, arr, len(ids), byref(keep), byref(count))
        kept = [self.to_graph[keep[i]] for i in range(count.value)]
        self.lib.free(ctypes.cast(keep, c_void_p))
        return kept

    def reset(self):
        self.lib.abi._partCallReset(self.handle)


def read_partitioners(lib: NativeLibrary) -> list[tuple[str, list[tuple[str, str, _Strategy]]]]:
    """``[(partitioner, [(strategy, subgraph op, callbacks)])]`` as the library lists them."""
    abi = lib.abi
    out = []
    for i in range(abi._partRegSize()):
        name = c_char_p()
        count = abi._partRegGetCount(i, byref(name))
        pname = library_text(name.value, lib.name, f"the name of partitioner {i}")
        strategies = []
        for j in range(count):
            sname, op = c_char_p(), c_char_p()
            sup, sel, rev = c_void_p(), c_void_p(), c_void_p()
            abi._partRegGet(i, j, byref(sname), byref(sup), byref(sel), byref(rev), byref(op))
            sname_s = library_text(sname.value, lib.name,
                                   f"partitioner {pname!r} strategy {j}'s name")
            strategies.append((sname_s, library_text(op.value, lib.name,
                                                     f"strategy {sname_s!r}'s subgraph op"),
                               _Strategy(lib, pname, sname_s, sup.value or 0, sel.value or 0,
                                         rev.value or 0)))
        out.append((pname, strategies))
    return out


def register_partitioners(found) -> None:
    """Register what :func:`read_partitioners` found (replacing same-named ones)."""
    from ...compiler.partition import Partitioner, register_partitioner
    for pname, strategies in found:
        part = Partitioner(pname)
        for sname, op, cb in strategies:
            part.add_strategy(sname, op,
                              supported_ops=cb.supported_ops if cb.supported else None,
                              create_selector=cb.create_selector if cb.selector else None,
                              review_subgraph=cb.review_subgraph if cb.review else None)
        register_partitioner(pname, part)
