"""A located JSON parser (lark LALR) for MXNet symbol files.

:func:`parse_json` turns JSON text into plain Python values, except that
objects and arrays come back as :class:`JObject` / :class:`JArray` (``dict`` /
``list`` subclasses) that remember where they start in the text, and objects
also where each of their keys is.  A later validation step can then say
``model.json:12:5: node 3 ('conv0'): ...`` (see :class:`SourceText`).

The grammar is ``json_grammar.lark`` (LALR).  Lark's own lexer is correct but
spends most of the parse creating full tokens with line bookkeeping, so the
grammar is lexed here by :class:`_JSONLexer`, which is built from the
grammar's own terminal definitions (same regular expressions, same priority
order) and creates featherweight tokens that only carry an offset; line and
column are computed from the offset when an error is reported.  A 1,000-node
symbol file parses in about 0.1 s (stdlib ``json`` is not used at all).

Malformed input raises :class:`~mxc.errors.ParseError` whose message starts
with ``source:line:column`` and says what was expected, e.g.
``expected ',' or '}', got '"name"'`` or, for a truncated file,
``unexpected end of input: expected ',' or ']'`` at the position of the end.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any

import lark
from lark.lexer import Lexer

from ..errors import ParseError

__all__ = ["JObject", "JArray", "SourceText", "parse_json", "plain", "describe_type"]


class JObject(dict):
    """A JSON object with its source offset (of ``{``) and its keys' offsets."""

    __slots__ = ("offset", "key_offsets")

    # (no __init__: the parser sets both slots; use getattr(obj, "offset", None)
    # on objects that may have been built elsewhere)


class JArray(list):
    """A JSON array with the source offset of its ``[``."""

    __slots__ = ("offset",)

    # (no __init__, see JObject)


def _fresh(value: Any) -> Any:
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else value


def plain(value: Any) -> Any:
    """A deep copy of *value* with plain ``dict``/``list`` containers (no recursion)."""
    top = _fresh(value)
    stack = [(value, top)] if top is not value else []
    while stack:
        src, dst = stack.pop()
        for k, v in (src.items() if isinstance(src, dict) else enumerate(src)):
            copy = _fresh(v)
            if isinstance(dst, dict):
                dst[k] = copy
            else:
                dst.append(copy)
            if copy is not v:
                stack.append((v, copy))
    return top


def describe_type(value: Any) -> str:
    """``'a string'``, ``'an object'`` ... for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


class SourceText:
    """The text being parsed plus its name; turns offsets into line/column."""

    __slots__ = ("text", "source", "_line_starts")

    def __init__(self, text: str, source: str = "<string>"):
        self.text = text
        self.source = source
        self._line_starts: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column (in characters) of *offset*."""
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def error(self, message: str, offset: int | None, cls: type[ParseError] = ParseError,
              ) -> ParseError:
        """A *cls* (ParseError or subclass) located at *offset* (None: unknown)."""
        if offset is None:
            return cls(message, source=self.source)
        line, col = self.line_col(offset)
        return cls(message, source=self.source, line=line, column=col)

    def item_offset(self, array: JArray, index: int) -> int | None:
        """Offset of ``array[index]`` (best effort: the array's own when unsure)."""
        item = array[index]
        own = getattr(item, "offset", None)
        if own is not None:
            return own
        start = getattr(array, "offset", None)
        if start is None:
            return None
        if any(isinstance(v, (dict, list)) for v in array):
            return start
        for k, m in enumerate(_SCALAR_RE.finditer(self.text, start + 1)):
            if k == index:
                return m.start()
        return start

    def key_offset(self, obj: Any, key: str) -> int | None:
        """Offset of *key* in *obj* if known, else of *obj* itself."""
        start = getattr(obj, "offset", None)
        if isinstance(obj, JObject) and start is not None:
            return obj.key_offsets.get(key, start)
        return start


_SCALAR_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|[^\s,\[\]{}:"]+')


# ---------------------------------------------------------------------------
# lexing
# ---------------------------------------------------------------------------
class _LexError(Exception):
    def __init__(self, offset: int, message: str):
        super().__init__(message)
        self.offset = offset
        self.message = message


class _Tok:
    """A minimal token: type, text and offset (lark only needs ``type``)."""

    __slots__ = ("type", "value", "start_pos")
    # attributes lark copies when it makes its end-of-input token
    line = column = end_line = end_column = end_pos = None

    def __init__(self, type_: str, value: str, start_pos: int):
        self.type = type_
        self.value = value
        self.start_pos = start_pos

    def __repr__(self) -> str:
        return f"_Tok({self.type}, {self.value!r}, {self.start_pos})"


class _JSONLexer(Lexer):
    """A basic (context-free) lexer for the grammar's own terminals.

    It tries the terminals in the order lark's basic lexer does (priority,
    then width) as one alternation, skips the ``%ignore``'d ones and yields
    :class:`_Tok` objects.  Text that no terminal matches raises _LexError with
    a specific message (unterminated string, invalid token ...).
    """

    def __init__(self, lexer_conf):
        terminals = sorted(lexer_conf.terminals,
                           key=lambda t: (-t.priority, -t.pattern.max_width,
                                          -len(t.pattern.value), t.name))
        self.ignore = frozenset(lexer_conf.ignore)
        self.match = re.compile("|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})"
                                         for t in terminals)).match

    def lex(self, text: str):
        match = self.match
        ignore = self.ignore
        pos = 0
        end = len(text)
        depth = 0  # open brackets: bounded so that nothing downstream recurses without limit
        if text.startswith("\ufeff"):  # byte order mark
            pos = 1
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise _lex_error(text, pos)
            kind = m.lastgroup
            if kind in _OPENERS:
                depth += 1
                if depth > MAX_DEPTH:
                    raise _LexError(pos, f"objects and arrays nested more than {MAX_DEPTH} "
                                         f"levels deep (a symbol file needs far fewer)")
            elif kind in _CLOSERS:
                depth -= 1
            if kind not in ignore:
                yield _Tok(kind, m.group(), pos)
            pos = m.end()


#: deepest nesting of objects/arrays accepted (a symbol file with subgraphs nested 64
#: deep needs about 260); deeper input is a typed error, never a RecursionError
MAX_DEPTH = 400
#: longest integer accepted (int64 has 19 digits); longer ones are a typed error instead
#: of Python's own int-conversion limit or a huge number
MAX_INT_DIGITS = 32
_OPENERS = frozenset({"LBRACE", "LSQB"})
_CLOSERS = frozenset({"RBRACE", "RSQB"})
_LONG_INT_RE = re.compile(r"[0-9]{%d,}" % (MAX_INT_DIGITS + 1))


def _check_digits(tok) -> None:
    """Refuse integers longer than MAX_INT_DIGITS (located at the offending number)."""
    if len(tok.value) > MAX_INT_DIGITS:
        m = _LONG_INT_RE.search(tok.value)
        if m is not None:
            raise _LexError(tok.start_pos + m.start(),
                            f"integer with {m.end() - m.start()} digits; at most "
                            f"{MAX_INT_DIGITS} are accepted")


_BAD_TOKEN_RE = re.compile(r'[^\s,:\[\]{}"]+')
_STRING_PREFIX_RE = re.compile(r'"(?:[^"\\\n]|\\.)*')


def _lex_error(text: str, pos: int) -> _LexError:
    ch = text[pos]
    if ch == '"':
        m = _STRING_PREFIX_RE.match(text, pos)
        stop = m.end()
        if stop >= len(text):
            return _LexError(pos, "unterminated string (end of input inside a string)")
        if text[stop] == "\n":
            return _LexError(pos, "unterminated string (a raw newline inside a string; "
                                  "write \\n)")
        # a backslash before a newline or at the end
        return _LexError(stop, "invalid escape sequence in string")
    m = _BAD_TOKEN_RE.match(text, pos)
    if m is None:
        return _LexError(pos, f"unexpected character {ch!r}")
    word = m.group()
    if len(word) > 24:
        word = word[:24] + "..."
    hint = ""
    if word in ("True", "False", "None", "NaN", "Infinity", "-Infinity", "nan", "inf"):
        hint = " (JSON has true, false, null and finite numbers only)"
    elif word[0] == "'":
        hint = " (JSON strings use double quotes)"
    return _LexError(pos, f"invalid token {word!r}{hint}")


# ---------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.)|$)", re.S)


def _unescape(raw: str, offset: int) -> str:
    """Decode the escapes of *raw* (string body); *offset*: where raw starts."""
    if "\\" not in raw:
        return raw
    out: list[str] = []
    last = 0
    pending_high: int | None = None  # a high surrogate waiting for its low half
    for m in _ESCAPE_RE.finditer(raw):
        if m.start() > last:
            if pending_high is not None:
                out.append(chr(pending_high))
                pending_high = None
            out.append(raw[last:m.start()])
        last = m.end()
        hexa, ch = m.group(1), m.group(2)
        if hexa is not None:
            code = int(hexa, 16)
            if pending_high is not None:
                if 0xDC00 <= code <= 0xDFFF:
                    out.append(chr(0x10000 + ((pending_high - 0xD800) << 10) + (code - 0xDC00)))
                    pending_high = None
                    continue
                out.append(chr(pending_high))
                pending_high = None
            if 0xD800 <= code <= 0xDBFF:
                pending_high = code
            else:
                out.append(chr(code))  # lone low surrogates are kept, as Python's json does
            continue
        if pending_high is not None:
            out.append(chr(pending_high))
            pending_high = None
        if ch is None or ch not in _ESCAPES:
            if ch == "u":
                what = "\\u must be followed by 4 hex digits"
            elif ch is None:
                what = "a backslash at the end of the string"
            else:
                what = f"invalid escape sequence '\\{ch}'"
            raise _LexError(offset + m.start(), what)
        out.append(_ESCAPES[ch])
    if pending_high is not None:
        out.append(chr(pending_high))
    out.append(raw[last:])
    return "".join(out)


_KEYSTR_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"\s*:\s*"((?:[^"\\\n]|\\.)*)"')
_FLAT_RE = re.compile(r"\[([^\[\]]*)\]")


class _Build(lark.Transformer):
    """Inline LALR callbacks: build located Python values bottom-up."""

    def string(self, children):
        tok = children[0]
        s = tok.value
        if "\\" in s:
            return _unescape(s[1:-1], tok.start_pos + 1)
        return s[1:-1]

    def number(self, children):
        s = children[0].value
        if "." in s or "e" in s or "E" in s:
            return float(s)
        _check_digits(children[0])
        return int(s)

    def ints(self, children):
        tok = children[0]
        _check_digits(tok)
        arr = JArray(map(int, tok.value[1:-1].split(",")))
        arr.offset = tok.start_pos
        return arr

    def entries(self, children):
        tok = children[0]
        _check_digits(tok)
        base = tok.start_pos
        outer = JArray()
        outer.offset = base
        append = outer.append
        for m in _FLAT_RE.finditer(tok.value, 1):
            arr = JArray(map(int, m.group(1).split(",")))
            arr.offset = base + m.start()
            append(arr)
        return outer

    def true(self, _):
        return True

    def false(self, _):
        return False

    def null(self, _):
        return None

    # -- objects: one callback per member, appending in place -----------------
    @staticmethod
    def _new_object(brace) -> JObject:
        obj = JObject()
        obj.offset = brace.start_pos
        obj.key_offsets = {}
        return obj

    @staticmethod
    def _add_key_value(obj: JObject, tok, value) -> JObject:
        # tok: KEY (`"key": `) or COMMA_KEY (`, "key": `)
        s = tok.value
        q = 0 if s[0] == '"' else s.index('"')
        key = s[q + 1:s.rindex('"')]
        if "\\" in key:
            key = _unescape(key, tok.start_pos + q + 1)
        obj[key] = value
        obj.key_offsets[key] = tok.start_pos + q
        return obj

    @staticmethod
    def _add_key_string(obj: JObject, tok) -> JObject:
        # tok: KEYSTR (`"key": "value"`) or COMMA_KEYSTR (`, "key": "value"`)
        s = tok.value
        q = 0 if s[0] == '"' else s.index('"')
        if "\\" not in s:
            end = s.index('"', q + 1)
            key = s[q + 1:end]
            obj[key] = s[s.index('"', end + 1) + 1:-1]
        else:
            m = _KEYSTR_RE.match(s, q)
            key = _unescape(m.group(1), tok.start_pos + m.start(1))
            obj[key] = _unescape(m.group(2), tok.start_pos + m.start(2))
        obj.key_offsets[key] = tok.start_pos + q
        return obj

    def object_empty(self, children):
        return self._new_object(children[0])

    def object_end(self, children):
        return children[0]

    def members_first(self, children):
        return self._add_key_value(self._new_object(children[0]), children[1], children[2])

    def members_first_str(self, children):
        return self._add_key_string(self._new_object(children[0]), children[1])

    def members_next(self, children):
        return self._add_key_value(children[0], children[1], children[2])

    def members_next_str(self, children):
        return self._add_key_string(children[0], children[1])

    # -- arrays ---------------------------------------------------------------
    def array_empty(self, children):
        arr = JArray()
        arr.offset = children[0].start_pos
        return arr

    def array_end(self, children):
        return children[0]

    def items_first(self, children):
        arr = JArray()
        arr.offset = children[0].start_pos
        arr.append(children[1])
        return arr

    def items_next(self, children):
        arr = children[0]
        arr.append(children[2])
        return arr


# ---------------------------------------------------------------------------
# errors from the parser
# ---------------------------------------------------------------------------
_VALUE_START = frozenset({"LBRACE", "LSQB", "STRING", "NUMBER", "INTS", "ENTRIES", "TRUE",
                          "FALSE", "NULL"})
_TERMINAL_WORDS = {
    "LBRACE": "'{'", "RBRACE": "'}'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','",
    "KEY": "an object key (a string)", "KEYSTR": "an object key (a string)",
    "COMMA_KEY": "','", "COMMA_KEYSTR": "','",
    "STRING": "a string", "NUMBER": "a number", "TRUE": "true", "FALSE": "false",
    "NULL": "null", "INTS": "an array", "ENTRIES": "an array", "$END": "end of input",
}
_ORDER = ["a value", "an object key (a string)", "','", "':'", "'}'", "']'", "end of input"]


def _expected_words(expected: set[str]) -> str:
    words: set[str] = set()
    if expected & _VALUE_START:
        words.add("a value")
        expected = expected - _VALUE_START
    for name in expected:
        words.add(_TERMINAL_WORDS.get(name, name))
    ordered = sorted(words, key=lambda w: (_ORDER.index(w) if w in _ORDER else 99, w))
    if len(ordered) == 1:
        return ordered[0]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def _describe_token(tok: _Tok) -> str:
    text = tok.value.strip()
    if len(text) > 24:
        text = text[:24] + "..."
    return repr(text)


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


_PARSER: lark.Lark | None = None


def _parser() -> lark.Lark:
    global _PARSER
    if _PARSER is None:
        grammar = Path(__file__).with_name("json_grammar.lark").read_text()
        _PARSER = lark.Lark(grammar, parser="lalr", lexer=_JSONLexer, transformer=_Build(),
                            keep_all_tokens=True, maybe_placeholders=False)
    return _PARSER


def parse_json(text: str, *, source: str = "<string>") -> Any:
    """Parse JSON *text* into located values; raises :class:`ParseError`."""
    src = SourceText(text, source)
    try:
        return _parser().parse(text)
    except _LexError as exc:
        raise src.error(exc.message, exc.offset) from None
    except lark.exceptions.VisitError as exc:  # a callback failed (bad escape)
        orig = exc.orig_exc
        if isinstance(orig, _LexError):
            raise src.error(orig.message, orig.offset) from None
        raise
    except lark.UnexpectedToken as exc:
        raise _token_error(src, exc) from None


def _token_error(src: SourceText, exc: lark.UnexpectedToken) -> ParseError:
    tok = exc.token
    text = src.text
    try:  # the exact set (LALR's table would also list reduce look-aheads)
        expected = set(exc.accepts)
    except Exception:  # pragma: no cover - older lark
        expected = set(exc.expected)
    if tok.type == "$END":
        # point just past the last character: where the file was cut off
        return src.error(f"unexpected end of input: expected {_expected_words(expected)}",
                         len(text))
    pos = _skip_ws(text, tok.start_pos)
    kind = tok.type
    if kind == "COMMA" and "COMMA_KEY" in expected:
        # in an object, a comma not followed by `"key":` -- blame what follows
        return _after_separator(src, tok.start_pos + len(tok.value), "an object key (a string)")
    if kind in ("COMMA_KEY", "COMMA_KEYSTR"):
        if "COMMA" not in expected:
            return src.error(f"expected {_expected_words(expected)}, got ','", pos)
        # the comma is fine (we are in an array): the key is a string value there
        pos = text.index('"', pos)
        expected = _accepts_after(exc, ["COMMA"])
        kind = "KEY"
    if kind == "STRING" and "KEY" in expected:
        # `{"a" 1}`: the key is fine, the colon is missing
        return _after_separator(src, pos, "", after_key=True)
    if kind in ("KEY", "KEYSTR"):
        string_end = _STRING_PREFIX_RE.match(text, pos).end() + 1
        if "STRING" in expected:
            # a string where a value may be, but then a colon
            colon = text.index(":", string_end)
            kinds = ["COMMA", "STRING"] if tok.type.startswith("COMMA") else ["STRING"]
            return src.error(f"expected {_expected_words(_accepts_after(exc, kinds))}, "
                             f"got ':'", colon)
        return src.error(f"expected {_expected_words(expected)}, got "
                         f"{_snippet(text[pos:string_end])}", pos)
    if kind in _VALUE_START and "KEY" in expected:
        return src.error(f"expected {_expected_words(expected)} (object keys must be strings),"
                         f" got {_describe_token(tok)}", pos)
    return src.error(f"expected {_expected_words(expected)}, got {_describe_token(tok)}", pos)


def _snippet(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 24 else text[:24] + "...")


def _after_separator(src: SourceText, pos: int, want: str, after_key: bool = False
                     ) -> ParseError:
    """Error for what follows a separator at *pos* (or a key, with *after_key*)."""
    text = src.text
    if after_key:
        # pos is at the key string; it lacks its colon
        end = _STRING_PREFIX_RE.match(text, pos).end() + 1
        return src.error("expected ':' after the object key", _skip_ws(text, end))
    pos = _skip_ws(text, pos)
    if pos >= len(text):
        return src.error(f"unexpected end of input: expected {want}", len(text))
    if text[pos] == '"':
        return _after_separator(src, pos, want, after_key=True)
    m = _BAD_TOKEN_RE.match(text, pos)
    got = m.group() if m else text[pos]
    return src.error(f"expected {want}, got {_snippet(got)}", pos)


def _accepts_after(exc: lark.UnexpectedToken, kinds: list[str]) -> set[str]:
    """What the parser accepts after feeding it tokens of *kinds* at the error."""
    try:
        ip = exc.interactive_parser.copy()
        for kind in kinds:
            ip.feed_token(_Tok(kind, "", 0))
        return set(ip.accepts())
    except Exception:
        return set(exc.expected)
