"""Graphs as MXNet's JSON, the form every lib_api graph hook reads and writes.

Libraries parse the JSON themselves (``Graph::fromString``), so the compact
form mxc writes is enough for partitioners and passes.  A subgraph operator
additionally receives its nested graph as the attribute ``subgraph_sym_json``
in the indented layout of MXNet's (dmlc) JSON writer, which libraries print
verbatim; :func:`pretty` reproduces that layout.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["graph_to_json", "graph_from_json", "subgraph_attr_json", "pretty",
           "SUBGRAPH_SYM_JSON"]

#: MXNet's ``MX_STR_SUBGRAPH_SYM_JSON``: the attribute carrying a subgraph op's nested graph.
SUBGRAPH_SYM_JSON = "subgraph_sym_json"


def graph_to_json(graph) -> str:
    """Compact MXNet JSON of an mxc :class:`~mxc.compiler.ir.Graph`, as MXNet hands a
    graph to a library: without the top-level ``attrs`` (``mxnet_version``)."""
    from ...frontend.symbol_json import dump_json
    doc = json.loads(dump_json(graph))
    doc.pop("attrs", None)
    return json.dumps(doc, separators=(",", ":"))


def graph_from_json(text: str, source: str):
    """An mxc graph from MXNet JSON a library produced."""
    from ...frontend.symbol_json import load_json
    return load_json(text, source=source)


def subgraph_attr_json(graph) -> str:
    """The ``subgraph_sym_json`` value for a nested graph (MXNet's layout, sorted attrs)."""
    doc = json.loads(graph_to_json(graph))
    for node in doc.get("nodes", []):
        if "attrs" in node:
            node["attrs"] = dict(sorted(node["attrs"].items()))
    return pretty(doc)


def _inline(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value)


def pretty(value: Any, level: int = 0) -> str:
    """dmlc's JSONWriter layout: objects and lists of objects one item per line,
    ``", "`` before each line break, two-space indents, other lists inline."""
    pad = "  " * (level + 1)
    end = "  " * level
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{json.dumps(k)}: {pretty(v, level + 1)}" for k, v in value.items()]
        return "{" + ", ".join("\n" + pad + it for it in items) + "\n" + end + "}"
    if isinstance(value, list) and value and any(isinstance(v, dict) for v in value):
        return "[" + ", ".join("\n" + pad + pretty(v, level + 1) for v in value) + "\n" + end + "]"
    return _inline(value)
