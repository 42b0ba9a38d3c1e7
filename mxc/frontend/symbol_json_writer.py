"""MXNet symbol JSON out: :func:`dump_json` reproduces MXNet 1.9.1's
``tojson()`` byte for byte.

Nodes come in MXNet's DFS order; the layout is dmlc's JSON writer's (2-space
indentation, ``", \\n"`` separators, arrays of more than 10 numbers one per
line, single-member objects inline); attribute keys are sorted.  Reading is
:mod:`mxc.frontend.symbol_json`, which re-exports everything public here.
"""

from __future__ import annotations

from typing import Any

from ..compiler.ir.graph import Graph
from ..compiler.ir.node import Entry, Node
from .json_parser import plain
from .legacy import MXNET_VERSION

__all__ = ["dump_json", "graph_to_dict", "mxnet_version"]


def mxnet_version(graph: Graph) -> int | None:
    """The ``mxnet_version`` recorded in ``graph.attrs`` (None if absent/odd)."""
    v = graph.attrs.get("mxnet_version")
    if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[1], int) \
            and not isinstance(v[1], bool):
        return v[1]
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


def graph_to_dict(graph: Graph) -> dict:
    """The symbol JSON object of *graph* (plain dicts/lists), as MXNet writes it."""
    return _to_dict(graph, top=True)


def _num_outputs(node: Node, used: int) -> int:
    """Outputs of *node* for node_row_ptr.

    In order: the count the loaded file gave this very node (same op and
    attributes), the op registry, one per head for a single-subgraph op
    (``_CachedOp``), else 1; never less than the outputs actually used.
    """
    if node.op is None:
        return 1
    n = None
    hint = node.meta.get("json_num_outputs")
    if isinstance(hint, tuple) and len(hint) == 3 and hint[0] == node.op \
            and hint[1] == node.attrs:
        n = hint[2]
    if n is None:
        try:
            from ..compiler.ops.registry import has_op
            if has_op(node.op):
                n = node.num_outputs()
        except Exception:
            n = None
    if n is None:
        n = len(node.subgraphs[0].outputs) if len(node.subgraphs) == 1 else 1
    return max(n, used)


def _to_dict(graph: Graph, top: bool) -> dict:
    order = graph.topo_order()
    index = {id(n): i for i, n in enumerate(order)}
    used: dict[int, int] = {}  # highest output index read, per node

    def entry(e: Entry) -> list[int]:
        k = id(e.node)
        if e.index + 1 > used.get(k, 0):
            used[k] = e.index + 1
        return [index[k], e.index, e.version]

    jnodes = []
    arg_nodes = []
    for i, n in enumerate(order):
        jn: dict[str, Any] = {"op": "null" if n.op is None else n.op, "name": n.name}
        if n.attrs:
            jn["attrs"] = {k: n.attrs[k] for k in sorted(n.attrs)}
        jn["inputs"] = [entry(e) for e in n.inputs]
        if n.control_deps:
            jn["control_deps"] = [index[id(c)] for c in n.control_deps]
        if n.subgraphs:
            jn["subgraphs"] = [_to_dict(g, top=False) for g in n.subgraphs]
        jnodes.append(jn)
        if n.op is None:
            arg_nodes.append(i)
    heads = [entry(e) for e in graph.outputs]
    row_ptr = [0]
    for n in order:
        row_ptr.append(row_ptr[-1] + _num_outputs(n, used.get(id(n), 0)))
    doc: dict[str, Any] = {"nodes": jnodes, "arg_nodes": arg_nodes, "node_row_ptr": row_ptr,
                           "heads": heads}
    attrs = {k: plain(v) for k, v in graph.attrs.items() if _is_any_value(v)}
    if top and "mxnet_version" not in attrs:
        v = mxnet_version(graph)  # also accepts a bare int
        attrs["mxnet_version"] = ["int", MXNET_VERSION if v is None else v]
    if attrs:
        doc["attrs"] = attrs
    return doc


def _is_any_value(v: Any) -> bool:
    """dmlc serializes graph attributes as ``[type name, value]`` pairs only."""
    return isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str)


def dump_json(graph: Graph, *, indent: int = 2) -> str:
    """Serialize *graph* as MXNet 1.9.1 does (``Symbol.tojson()``), byte for byte.

    *indent* is the width of one nesting level (MXNet: 2).
    """
    w = _DmlcWriter(indent)
    w.graph(graph_to_dict(graph))
    return "".join(w.out)


class _DmlcWriter:
    """Mimics dmlc::JSONWriter as nnvm's SaveJSON drives it.

    dmlc writes an array on several lines when it has more than 10 items or
    its items are not plain numbers, an object when it has more than one
    member; the closing bracket goes on its own line only if the *enclosing*
    scope is multi-line (a dmlc quirk reproduced here).  Strings escape only
    ``\\r \\n \\t \\\\ "`` (other characters are written raw, which is what
    MXNet's reader expects).
    """

    def __init__(self, indent: int):
        self.out: list[str] = []
        self.unit = " " * indent
        self.multi: list[bool] = []
        self.count: list[int] = []

    # -- dmlc primitives ------------------------------------------------------------
    def _sep(self) -> None:
        if not self.multi or self.multi[-1]:
            self.out.append("\n" + self.unit * len(self.multi))

    def begin(self, bracket: str, multi: bool) -> None:
        self.out.append(bracket)
        self.multi.append(multi)
        self.count.append(0)

    def end(self, bracket: str) -> None:
        multi = self.multi.pop()
        n = self.count.pop()
        if multi and n:
            self._sep()
        self.out.append(bracket)

    def key(self, k: str) -> None:
        if self.count[-1]:
            self.out.append(", ")
        self._sep()
        self.count[-1] += 1
        self.out.append(_dmlc_string(k) + ": ")

    def item(self) -> None:
        if self.count[-1]:
            self.out.append(", ")
        self.count[-1] += 1
        self._sep()

    # -- typed writers --------------------------------------------------------------
    def uint_array(self, values: list[int]) -> None:
        if len(values) <= 10:  # dmlc: single line
            self.out.append("[" + ", ".join(map(str, values)) + "]")
            return
        self.begin("[", True)
        for v in values:
            self.item()
            self.out.append(str(v))
        self.end("]")

    def entry_array(self, entries: list[list[int]]) -> None:
        # entries are PODs: single line up to 10 of them
        if len(entries) <= 10:
            self.out.append("[" + ", ".join(f"[{a}, {b}, {c}]" for a, b, c in entries) + "]")
            return
        self.begin("[", True)
        for a, b, c in entries:
            self.item()
            self.out.append(f"[{a}, {b}, {c}]")
        self.end("]")

    def string_map(self, d: dict[str, str]) -> None:
        self.begin("{", len(d) > 1)
        for k, v in d.items():
            self.key(k)
            self.out.append(_dmlc_string(v))
        self.end("}")

    def any_value(self, v: Any) -> None:
        """A graph attribute: dmlc's ``any`` is ["type", value] on one line."""
        if isinstance(v, str):
            self.out.append(_dmlc_string(v))
        elif isinstance(v, bool):
            self.out.append("true" if v else "false")
        elif isinstance(v, (int, float)):
            self.out.append(repr(v))
        elif v is None:
            self.out.append("null")
        elif isinstance(v, dict):
            self.begin("{", len(v) > 1)
            for k, x in v.items():
                self.key(str(k))
                self.any_value(x)
            self.end("}")
        elif isinstance(v, (list, tuple)):
            pod = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
            self.begin("[", len(v) > 10 or not pod)
            for x in v:
                self.item()
                self.any_value(x)
            self.end("]")
        else:
            self.out.append(_dmlc_string(str(v)))

    def graph(self, doc: dict) -> None:
        self.begin("{", True)
        self.key("nodes")
        self.begin("[", True)
        for jn in doc["nodes"]:
            self.item()
            self.node(jn)
        self.end("]")
        self.key("arg_nodes")
        self.uint_array(doc["arg_nodes"])
        self.key("node_row_ptr")
        self.uint_array(doc["node_row_ptr"])
        self.key("heads")
        self.entry_array(doc["heads"])
        if "attrs" in doc:
            self.key("attrs")
            attrs = doc["attrs"]
            self.begin("{", len(attrs) > 1)
            for k, v in attrs.items():
                self.key(k)
                t, x = v
                self.begin("[", False)
                self.item()
                self.out.append(_dmlc_string(str(t)))
                self.item()
                self.any_value(x)
                self.end("]")
            self.end("}")
        self.end("}")

    def node(self, jn: dict) -> None:
        self.begin("{", True)
        self.key("op")
        self.out.append(_dmlc_string(jn["op"]))
        self.key("name")
        self.out.append(_dmlc_string(jn["name"]))
        if "attrs" in jn:
            self.key("attrs")
            self.string_map(jn["attrs"])
        self.key("inputs")
        self.entry_array(jn["inputs"])
        if "control_deps" in jn:
            self.key("control_deps")
            self.uint_array(jn["control_deps"])
        if "subgraphs" in jn:
            self.key("subgraphs")
            self.begin("[", True)  # JSONGraph is not a POD: always multi-line
            for sub in jn["subgraphs"]:
                self.item()
                self.graph(sub)
            self.end("]")
        self.end("}")


_DMLC_ESCAPES = str.maketrans({"\r": "\\r", "\n": "\\n", "\\": "\\\\", "\t": "\\t",
                               '"': '\\"'})


def _dmlc_string(s: str) -> str:
    return '"' + s.translate(_DMLC_ESCAPES) + '"'
