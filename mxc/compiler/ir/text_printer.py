"""Printing graphs as mxc's textual IR (the format is described in :mod:`.text`).

Split from the parser so each stays a readable size; :func:`print_graph` is
re-exported by :mod:`mxc.compiler.ir.text`.  Printing never recurses on
values (literals are printed with an explicit stack) and recurses once per
subgraph level, which :func:`check_subgraph_depth` bounds.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Callable

from .graph import Graph, check_subgraph_depth
from .node import Entry, Node

#: Words with a meaning of their own; never printed as bare attribute keys or op names.
RESERVED_WORDS = frozenset({"graph", "return", "var", "after", "attributes", "true", "false",
                            "null", "opaque", "inf", "nan"})

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDENT = "  "


# ---------------------------------------------------------------------------------------
# printing
# ---------------------------------------------------------------------------------------
def quote_string(text: str) -> str:
    """*text* as a double-quoted literal of the textual IR.

    ``"`` and ``\\`` are escaped, newline, carriage return and tab as ``\\n``,
    ``\\r``, ``\\t``, and every other non-printable character (control and
    format characters, separators other than the space) as ``\\u{hex}``, so
    each literal stays on one line and reads unambiguously in a terminal.
    """
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    return '"' + "".join(out) + '"'


def _word(text: str) -> str:
    """An attribute key or op name: bare when it is a plain, non-reserved identifier."""
    if _IDENT_RE.match(text) and text not in RESERVED_WORDS:
        return text
    return quote_string(text)


def _name(text: str) -> str:
    """A node or graph name after its ``%``/``@`` sigil."""
    return text if _IDENT_RE.match(text) else quote_string(text)


class _Raw(str):
    """Text the literal printer emits as is (not a string value to quote)."""


def _literal(value: Any) -> str:
    """A graph-attribute value as a literal (JSON-like, plus tuples, inf, nan).

    Iterative (an explicit stack), so deeply nested lists print without recursion.
    """
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is _Raw:
            out.append(v)
        elif isinstance(v, (list, tuple)) or (isinstance(v, dict)
                                               and all(isinstance(k, str) for k in v)):
            if isinstance(v, dict):
                opening, closing = "{", "}"
                parts: list[Any] = []
                for k, item in v.items():
                    parts += [_Raw(quote_string(k) + ": "), item, _Raw(", ")]
            else:
                opening, closing = ("[", "]") if isinstance(v, list) else ("(", ")")
                parts = []
                for item in v:
                    parts += [item, _Raw(", ")]
            if parts:
                parts.pop()
            if isinstance(v, tuple) and len(v) == 1:
                parts.append(_Raw(","))
            stack.append(_Raw(closing))
            stack.extend(reversed(parts))
            stack.append(_Raw(opening))
        else:
            out.append(_scalar_literal(v))
    return "".join(out)


def _scalar_literal(value: Any) -> str:
    if isinstance(value, str):
        return quote_string(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f):
            return "nan"
        return repr(f)  # always has '.', 'e' or 'inf', so it reads back as a float
    # Anything else is shown but cannot be read back (the parser rejects it).
    return f"opaque({quote_string(repr(value))})"


def _attr_text(attrs: dict) -> str:
    return "{" + ", ".join(f"{_word(str(k))} = {quote_string(str(v))}"
                           for k, v in attrs.items()) + "}"


def print_graph(graph: Graph, *, name: str = "main",
                annotate: Callable[[Node], str] | None = None) -> str:
    """The textual form of *graph* (no trailing newline).

    Nodes are printed in :attr:`Graph.nodes` order and referred to by name, so
    the text reads back (:func:`parse_graph`) only when names are unique per
    graph and the node list is topologically ordered, as
    :meth:`Graph.verify` requires.  *annotate*, if given, is called for every
    node (nested ones too) and a non-empty result is appended to the node's
    line as a ``// comment``.
    """
    check_subgraph_depth(graph)  # the printer recurses once per level
    lines: list[str] = []
    _print_graph(graph, name, "", lines, annotate)
    return "\n".join(lines)


def _print_graph(graph: Graph, name: str, indent: str, lines: list[str],
                 annotate: Callable[[Node], str] | None) -> None:
    header = f"{indent}graph @{_name(name)}"
    if graph.attrs:
        header += " attributes {" + ", ".join(
            f"{_word(str(k))} = {_literal(v)}" for k, v in graph.attrs.items()) + "}"
    lines.append(header + " {")
    body = indent + _INDENT
    refs: dict[int, str] = {}  # id(node) -> "%name"

    def ref(node: Node) -> str:
        r = refs.get(id(node))
        if r is None:  # a node outside the list (dangling); print its name anyway
            r = refs[id(node)] = "%" + _name(node.name)
        return r

    def entry(e: Entry) -> str:
        r = ref(e.node)
        if e.index:
            r += f"#{e.index}"
        if e.version:
            r += f"@{e.version}"
        return r

    seen: dict[str, int] = {}  # name -> nodes printed with it (a repeat gets ~k)
    for node in graph.nodes:
        dup = seen.get(node.name, 0)
        seen[node.name] = dup + 1
        r = refs[id(node)] = _label((node.name, dup))
        if node.op is None:
            line = f"{body}{r} = var"
            if node.inputs:
                line += "(" + ", ".join(entry(e) for e in node.inputs) + ")"
        else:
            line = f"{body}{r} = {_word(node.op)}(" + ", ".join(
                entry(e) for e in node.inputs) + ")"
        if node.attrs:
            line += " " + _attr_text(node.attrs)
        if node.control_deps:
            line += " after(" + ", ".join(ref(d) for d in node.control_deps) + ")"
        if node.subgraphs:
            line += " {"
        if annotate is not None:
            note = annotate(node)
            if note:
                line += "  // " + " ".join(str(note).splitlines())
        lines.append(line)
        if node.subgraphs:
            for k, sub in enumerate(node.subgraphs):
                _print_graph(sub, f"sg_{k}", body + _INDENT, lines, annotate)
            lines.append(body + "}")
    ret = f"{body}return"
    if graph.outputs:
        ret += " " + ", ".join(entry(e) for e in graph.outputs)
    lines.append(ret)
    lines.append(indent + "}")


def _label(key: tuple[str, int]) -> str:
    name, dup = key
    return "%" + _name(name) + (f"~{dup}" if dup else "")
