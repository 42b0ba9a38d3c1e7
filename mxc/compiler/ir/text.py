"""mxc's textual IR: print any :class:`Graph` and parse the text back.

The format (described fully in ``docs/textual-ir.md``) is one line per node in
:attr:`Graph.nodes` order, in the spirit of MLIR and TVM Relax::

    graph @main attributes {mxnet_version = ["int", 10901]} {
      %data = var
      %conv0_weight = var {__init__ = "zeros"}
      %conv0 = Convolution(%data, %conv0_weight) {kernel = "(3, 3)", num_filter = "8"}
      %split0 = SliceChannel(%conv0) {num_outputs = "2"}
      %sum = elemwise_add(%split0, %split0#1) after(%conv0)
      return %sum, %split0#1
    }

* ``%name`` is output 0 of a node, ``%name#i`` output *i*, ``%name@v`` an
  entry with MXNet variable version *v* (``%name#i@v`` both).  Names that are
  not plain identifiers are quoted: ``%"stage1.conv-0"``.
* ``var`` declares a variable (``op is None``); anything else is an operator
  call ``Op(%a, %b)``.  Attribute values are printed verbatim as quoted
  strings, in insertion order, hidden attributes included.
* ``after(%a, %b)`` lists control dependencies; a trailing ``{ graph ... }``
  block holds the node's nested subgraphs.
* Graph attributes (``Graph.attrs``) are JSON-like literals in the
  ``attributes {...}`` header clause.
* ``//`` starts a comment up to the end of the line (the printer writes one
  only when given ``annotate``).

Printing then parsing gives a structurally equal graph, and printing that
graph again gives the identical text.  The parser is lark's LALR parser with
the tree built by callbacks, so a 10k-node graph parses well under a second.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import lark

from ...errors import ParseError
from .graph import MAX_SUBGRAPH_DEPTH, Graph, subgraph_depth
from .node import Entry, Node, mark_repeated_names
from .text_printer import _IDENT_RE, RESERVED_WORDS, _label, _word, print_graph, quote_string

__all__ = ["print_graph", "parse_graph", "quote_string", "RESERVED_WORDS"]

# ---------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------
_GRAMMAR = Path(__file__).with_name("text_grammar.lark").read_text()

_REF_RE = re.compile(r'%(?:([A-Za-z_][A-Za-z0-9_]*)|"((?:[^"\\\n]|\\.)*)")'
                     r"(?:~([0-9]+))?(?:#([0-9]+))?(?:@([0-9]+))?")
_ATTR_RE = re.compile(r'(?:([A-Za-z_][A-Za-z0-9_]*)|"((?:[^"\\\n]|\\.)*)")[ \t]*=[ \t]*'
                      r'"((?:[^"\\\n]|\\.)*)"')
_BAD_ATTR_RE = re.compile(r'(?:[A-Za-z_][A-Za-z0-9_]*|"(?:[^"\\\n]|\\.)*")[ \t]*=[ \t]*([^ \t])')
_ESCAPE_RE = re.compile(r"\\(u\{[0-9A-Fa-f]{1,6}\}|.)")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}

class _Tok:
    """A token: what lark's LALR parser reads (``type``) plus the text and offset.

    Lighter than :class:`lark.Token` (a ``str`` subclass that also tracks
    lines and end positions), which matters at ~10 tokens per node.
    """

    __slots__ = ("type", "value", "start_pos")
    line = column = end_line = end_column = end_pos = None  # read by lark's $END token

    def __init__(self, type: str, value: str, start_pos: int):
        self.type, self.value, self.start_pos = type, value, start_pos

    def __repr__(self) -> str:
        return f"_Tok({self.type}, {self.value!r}, {self.start_pos})"


#: Terminal names (as lark reports them in "expected" sets) in words.
_FRIENDLY = {
    "REF": "a value such as %x",
    "DEF": "a definition such as '%x = ...'",
    "ATTR": "an attribute such as 'key = \"value\"'",
    "GRAPH_NAME": "a graph name such as @main",
    "IDENT": "a name",
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "_GRAPH": "'graph'",
    "_RETURN": "'return'",
    "_VAR": "'var'",
    "_AFTER": "'after'",
    "_ATTRIBUTES": "'attributes'",
    "_TRUE": "'true'",
    "_FALSE": "'false'",
    "_NULL": "'null'",
    "OPAQUE": "'opaque'",
    "_LBRACE": "'{'",
    "_RBRACE": "'}'",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_LSQB": "'['",
    "_RSQB": "']'",
    "_COMMA": "','",
    "_EQUAL": "'='",
    "_COLON": "':'",
    "$END": "end of input",
    "<END-OF-FILE>": "end of input",
}

#: How an unexpected token of a value-carrying terminal is described.
_TOKEN_KIND = {"REF": "value", "DEF": "definition", "ATTR": "attribute",
               "GRAPH_NAME": "graph name", "IDENT": "name", "STRING": "string",
               "NUMBER": "number"}


class _Fail(Exception):
    """A semantic error found by a parser callback; becomes a :class:`ParseError`.

    Positions are character offsets (tokens carry only their offset; lines and
    columns are worked out once, for the error).  :data:`_WHERE` in the
    message is replaced by the line and column of offset *where*.
    """

    def __init__(self, message: str, pos: int, where: int | None = None):
        super().__init__(message)
        self.message, self.pos, self.where = message, pos, where


#: Placeholder for a second position in a message (names in messages are
#: printed with :func:`_name`, which escapes NUL, so it cannot clash).
_WHERE = "\x00where\x00"


def _line_col(text: str, pos: int) -> tuple[int, int]:
    pos = max(0, min(pos, len(text)))
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _unescape(body: str, pos: int) -> str:
    """Decode the escapes of a string literal's *body*, which starts at offset *pos*."""
    if "\\" not in body:
        return body

    def repl(m: re.Match) -> str:
        esc = m.group(1)
        simple = _SIMPLE_ESCAPES.get(esc)
        if simple is not None:
            return simple
        if esc.startswith("u{"):
            code = int(esc[2:-1], 16)
            if code <= 0x10FFFF:
                return chr(code)
        raise _Fail(f"invalid escape sequence '\\{esc}' (expected one of \\\\ \\\" \\n "
                    f"\\r \\t \\u{{hex}} up to 10ffff)", pos + m.start())
    return _ESCAPE_RE.sub(repl, body)


#: longest integer literal or index accepted (int64 has 19 digits); longer ones are a
#: ParseError at the number instead of Python's int-conversion limit (4,300 digits)
MAX_INT_DIGITS = 32


def _int(text: str, pos: int, what: str = "integer") -> int:
    """*text* (decimal digits, maybe signed) as an int, refusing more than MAX_INT_DIGITS."""
    digits = len(text.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise _Fail(f"{what} with {digits} digits; at most {MAX_INT_DIGITS} are accepted", pos)
    return int(text)


def _string(tok: _Tok) -> str:
    return _unescape(tok.value[1:-1], tok.start_pos + 1)


def _word_of(tok: _Tok) -> str:
    return _string(tok) if tok.type == "STRING" else tok.value


def _split_ref(tok: _Tok) -> tuple[tuple[str, int], str | None, str | None]:
    """``%name~k#i@v`` -> ((name, k), "i" or None, "v" or None); k is 0 without ``~k``.

    ``~k`` tells apart nodes that share a name (MXNet allows two variables of the
    same name): ``%x`` is the first node named x, ``%x~1`` the second.
    """
    plain, quoted, dup, index, version = _REF_RE.match(tok.value).groups()
    name = plain if plain is not None else _unescape(quoted, tok.start_pos + 2)
    pos = tok.start_pos
    return (name, _int(dup or "0", pos, "duplicate number")), index, version


def _split_attr(tok: _Tok) -> tuple[str, str]:
    """``key = "value"`` -> (key, value)."""
    m = _ATTR_RE.match(tok.value)
    plain, quoted, value = m.groups()
    pos = tok.start_pos
    key = plain if plain is not None else _unescape(quoted, pos + 1)
    return key, _unescape(value, pos + m.start(3))


class _Build(lark.Transformer):
    """Parser callbacks: build nodes and graphs while the LALR parser reduces.

    A node statement becomes a plain tuple; a graph's nodes are created when
    the whole graph has been read, so a name used too early can be told apart
    from one that is never defined.
    """

    # -- graphs ---------------------------------------------------------------------
    def start(self, items):
        return items[0]

    def graph(self, items):
        _gname, gattrs, *specs, outputs = items
        defs: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (statement, offset)
        for k, spec in enumerate(specs):
            tok, key = spec[0], spec[1]
            first = defs.get(key)
            if first is not None:
                raise _Fail(f"duplicate definition of {_label(key)} (first defined at "
                            f"{_WHERE}); another node of that name is written "
                            f"{_label((key[0], key[1] + 1))}", tok.start_pos, first[1])
            defs[key] = (k, tok.start_pos)
        nodes: list[Node] = []
        by_name: dict[tuple[str, int], Node] = {}

        def lookup(name: tuple[str, int], tok: _Tok, k: int) -> Node:
            node = by_name.get(name)
            if node is not None:
                return node
            d = defs.get(name)
            label = _label(name)
            if d is None:
                raise _Fail(f"undefined value {label}", tok.start_pos)
            if d[0] == k:
                raise _Fail(f"{label} is used in its own definition", tok.start_pos)
            raise _Fail(f"{label} is used before its definition at {_WHERE}",
                        tok.start_pos, d[1])

        def entries(toks, k):
            out = []
            for tok in toks:
                name, index, version = _split_ref(tok)
                out.append(Entry(lookup(name, tok, k),
                                 _int(index or "0", tok.start_pos, "output index"),
                                 _int(version or "0", tok.start_pos, "version")))
            return out

        for k, (_tok, key, op, args, attrs, deps, subgraphs) in enumerate(specs):
            control = []
            for tok in deps:
                dep, index, version = _split_ref(tok)
                if index is not None or version is not None:
                    raise _Fail(f"control dependency {tok.value} must name a node, without "
                                f"an output index or version", tok.start_pos)
                control.append(lookup(dep, tok, k))
            node = Node(op, key[0], attrs, entries(args, k), subgraphs, control)
            nodes.append(node)
            by_name[key] = node
        mark_repeated_names(nodes)  # %x and %x~1 keep the name x; messages add the index
        return Graph(nodes, entries(outputs or (), len(specs)), gattrs)

    subgraph = graph

    def graph_attrs(self, items):
        out: dict[str, Any] = {}
        for tok, value in items[0]:
            key = _word_of(tok) if tok.type != "ATTR" else _split_attr(tok)[0]
            if key in out:
                raise _Fail(f"duplicate graph attribute {_word(key)}", tok.start_pos)
            out[key] = value
        return out

    def gattr(self, items):
        return items[0], items[1]

    def gattr_string(self, items):
        tok = items[0]
        return tok, _split_attr(tok)[1]

    # -- nodes -----------------------------------------------------------------------
    @staticmethod
    def _define(tok: _Tok) -> tuple[str, int]:
        key, index, version = _split_ref(tok)
        if index is not None or version is not None:
            raise _Fail(f"the definition of {_label(key)} cannot carry an output index "
                        f"(#) or version (@)", tok.start_pos)
        return key

    def var_node(self, items):
        tok, args, attrs, deps, region = items
        return (tok, self._define(tok), None, args or (), attrs, deps or (), region or ())

    def op_node(self, items):
        tok, op, args, attrs, deps, region = items
        return (tok, self._define(tok), _word_of(op), args or (), attrs, deps or (),
                region or ())

    def args(self, items):
        return items[0] or ()

    deps = args

    def region(self, items):
        return items

    # comma-separated lists (see the grammar)
    def items_first(self, items):
        return [items[0]]

    def items_pair(self, items):
        return [items[0], items[1]]

    def items_more(self, items):
        items[0].append(items[1])
        return items[0]

    def attrs(self, items):
        out: dict[str, str] = {}
        for tok in items[0]:
            key, value = _split_attr(tok)
            if key in out:
                raise _Fail(f"duplicate attribute {_word(key)}", tok.start_pos)
            out[key] = value
        return out

    # -- literals --------------------------------------------------------------------
    def lit_str(self, items):
        return _string(items[0])

    def lit_number(self, items):
        text = items[0].value
        if any(c in text for c in ".eEn"):  # a fraction, an exponent, inf or nan
            return float(text)
        return _int(text, items[0].start_pos)

    def lit_true(self, _):
        return True

    def lit_false(self, _):
        return False

    def lit_null(self, _):
        return None

    def lit_list(self, items):
        return items[0] or []

    def lit_empty_tuple(self, _):
        return ()

    def lit_one_tuple(self, items):
        return (items[0],)

    def lit_tuple(self, items):
        return tuple(items[0])

    def lit_dict(self, items):
        out: dict[str, Any] = {}
        for tok, value in items[0] or ():
            key = _string(tok)
            if key in out:
                raise _Fail(f"duplicate key {quote_string(key)}", tok.start_pos)
            out[key] = value
        return out

    def pair(self, items):
        return items[0], items[1]

    def lit_opaque(self, items):
        keyword, tok = items
        raise _Fail(f"opaque({tok.value}) was printed from a Python object that has no "
                    f"textual form and cannot be read back", keyword.start_pos)


class _Scanner(lark.lexer.Lexer):
    """The tokenizer: the grammar's terminals, scanned with one regular expression.

    Built from the grammar's own terminal definitions, so the grammar stays the
    single description of the syntax; it is several times faster than lark's
    lexer because the regex engine skips whitespace and picks the terminal, and
    tokens carry only their offset (lines and columns are computed for errors).
    Keywords are identifiers with a reserved spelling.  A character no
    terminal accepts becomes a ``BAD_CHARACTER`` token, which the LALR parser
    rejects with the set of terminals it expected there.
    """

    def __init__(self, conf):
        self.keywords: dict[str, str] = {}
        parts: list[tuple[int, int, str]] = []
        for k, term in enumerate(conf.terminals):
            pattern = term.pattern
            if isinstance(pattern, lark.lexer.PatternStr) and _IDENT_RE.match(pattern.value):
                self.keywords[pattern.value] = term.name
            elif term.name != "WS":  # WS is the skipped prefix below
                parts.append((-term.priority, k, f"(?P<{term.name}>{pattern.to_regexp()})"))
        parts.sort()
        alternatives = [p for _, _, p in parts] + [r"(?P<BAD_CHARACTER>[^ \t\r\n])"]
        self.regex = re.compile(r"[ \t\r\n]*(?:" + "|".join(alternatives) + ")")
        self.ignore = frozenset(conf.ignore) - {"WS"}

    def lex(self, text: str):
        keywords, ignore = self.keywords, self.ignore
        Token = _Tok
        depth = 0  # open brackets, bounded: the printer and later passes recurse on them
        for m in self.regex.finditer(text):
            kind = m.lastgroup
            if kind in ignore:
                continue
            value = m.group(kind)
            start = m.start(kind)
            if kind == "IDENT":
                kind = keywords.get(value, kind)
            elif kind in _OPEN:
                depth += 1
                if depth > MAX_TEXT_DEPTH:
                    raise _Fail(f"brackets nested more than {MAX_TEXT_DEPTH} levels deep", start)
            elif kind in _CLOSE:
                depth -= 1
            yield Token(kind, value, start)


#: deepest bracket nesting the parser accepts (graph attributes read from a symbol file
#: may nest up to the JSON reader's own limit, 400)
MAX_TEXT_DEPTH = 512
_OPEN = frozenset({"_LBRACE", "_LSQB", "_LPAR"})
_CLOSE = frozenset({"_RBRACE", "_RSQB", "_RPAR"})


_PARSER = lark.Lark(_GRAMMAR, parser="lalr", lexer=_Scanner, transformer=_Build(),
                    maybe_placeholders=True, propagate_positions=False)


def _friendly(names) -> str:
    words = sorted({_FRIENDLY.get(n, n) for n in names})
    if not words:
        return "nothing"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def parse_graph(text: str, *, source: str = "<ir>") -> Graph:
    """Read a graph written by :func:`print_graph`.

    Raises :class:`~mxc.errors.ParseError` whose message starts with
    ``source:line:column`` and says what was expected, for syntax errors and
    for names that are defined twice, never defined, or used before their
    definition.  Nodes are built through the IR constructors, so use counts are
    exact.
    """
    try:
        graph = _PARSER.parse(text)
        if subgraph_depth(graph, MAX_SUBGRAPH_DEPTH) > MAX_SUBGRAPH_DEPTH:
            raise _Fail(f"subgraphs nested more than {MAX_SUBGRAPH_DEPTH} levels deep", 0)
        return graph
    except _Fail as exc:
        message = exc.message
        if exc.where is not None:
            line, col = _line_col(text, exc.where)
            message = message.replace(_WHERE, f"line {line}, column {col}")
        line, col = _line_col(text, exc.pos)
        raise ParseError(message, source=source, line=line, column=col) from None
    except lark.UnexpectedToken as exc:
        tok = exc.token
        expected = _friendly(exc.expected)
        if tok.type == "$END":
            line, col = _line_col(text, len(text))
            raise ParseError(f"unexpected end of input; expected {expected}", source=source,
                             line=line, column=col) from None
        line, col = _line_col(text, tok.start_pos)
        if "ATTR" in exc.expected and tok.type in ("IDENT", "STRING"):
            bad = _BAD_ATTR_RE.match(text, tok.start_pos)
            if bad is not None:  # 'key = <not a string>': say what is wrong with the value
                line, col = _line_col(text, bad.start(1))
                if bad.group(1) == '"':
                    raise ParseError("unterminated string (a string must end on the line it "
                                     "starts, with '\\n' for a newline)", source=source,
                                     line=line, column=col) from None
                raise ParseError("attribute values are quoted strings; expected a quoted "
                                 "string", source=source, line=line, column=col) from None
        if tok.type == "BAD_CHARACTER":
            if tok.value == '"' or text.startswith(('%"', '@"'), tok.start_pos):
                raise ParseError("unterminated string (a string must end on the line it "
                                 "starts, with '\\n' for a newline)", source=source,
                                 line=line, column=col) from None
            found = f"character {tok.value!r}"
        else:
            shown = tok.value if len(tok.value) <= 40 else tok.value[:37] + "..."
            kind = _TOKEN_KIND.get(tok.type)
            found = f"{kind} {shown}" if kind else repr(shown)
        raise ParseError(f"unexpected {found}; expected {expected}",
                         source=source, line=line, column=col) from None
