"""The compact textual form of patterns (grammar in ``pattern.lark``)::

    %bn:BatchNorm(%conv:(Convolution|FullyConnected)(%x, %w:var, ...), %g, %b, %m, %v)

Parsed with lark's LALR parser; the tree is turned into the same pattern
objects the Python builders make (:mod:`.pattern`), so a text pattern can be
refined further in Python and matched or rewritten the same way.
"""

from __future__ import annotations

from pathlib import Path

import lark

from ...errors import MxcError, ParseError
from .pattern import Pattern, is_op, is_var, wildcard

__all__ = ["parse_pattern"]

_PARSER = lark.Lark(Path(__file__).with_name("pattern.lark").read_text(), parser="lalr",
                    maybe_placeholders=True)

_WORDS = {"LABEL": "%name", "OP_NAME": "an operator name", "INDEX": "#index",
          "STRING": "a quoted string", "WORD": "a value", "_ANON": "'_'", "_VAR": "'var'",
          "_ELLIPSIS": "'...'", "_BAR": "'|'", "_COLON": "':'", "_COMMA": "','",
          "_LPAR": "'('", "_RPAR": "')'", "_LBRACE": "'{'", "_RBRACE": "'}'", "_EQUAL": "'='",
          "$END": "the end of the pattern"}


_ANY_INPUTS = object()


class _Builder(lark.Transformer):
    def __init__(self) -> None:
        super().__init__()
        self.labels: dict[str, Pattern] = {}

    def _fail(self, tok, message: str):
        raise ParseError(message, source="<pattern>", line=tok.line, column=tok.column)

    def start(self, items):
        return items[0]

    def alt(self, items):
        return items[0] | items[1]

    def ref(self, items):
        (tok,) = items
        name = str(tok)[1:]
        if name not in self.labels:
            self.labels[name] = wildcard().named(name)
        return self.labels[name]

    def labeled(self, items):
        tok, p = items
        name = str(tok)[1:]
        if name in self.labels:
            self._fail(tok, f"%{name} is defined twice (or used before its definition: "
                            f"name a sub-pattern where it first appears)")
        self.labels[name] = p = p.named(name)
        return p

    def anon(self, items):
        return wildcard()

    def var(self, items):
        return is_var()

    def one_op(self, items):
        return [str(items[0])]

    def op_set(self, items):
        return [str(t) for t in items[0]]

    def call(self, items):
        ops, args, attrs, index = items
        p = is_op(*ops)
        if args is None:
            p = p()  # Op(): no inputs
        elif args is not _ANY_INPUTS:
            exact, more = args
            p = p(*exact, ...) if more else p(*exact)
        if attrs is not None:
            p = p.has_attr(**attrs)
        if index is not None:
            p = p[int(str(index)[1:])]
        return p

    def args_exact(self, items):
        return (items[0], False)

    def args_more(self, items):
        return (items[0], True)

    def args_any(self, items):
        return _ANY_INPUTS

    def attrs(self, items):
        return dict(items[0])

    def attr(self, items):
        key, value = items
        text = str(value)
        if value.type == "STRING":
            text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        return (str(key), text)

    def items_first(self, items):
        return [items[0]]

    def items_pair(self, items):
        return [items[0], items[1]]

    def items_more(self, items):
        return items[0] + [items[1]]


def parse_pattern(text: str) -> Pattern:
    """A pattern from its textual form (grammar in ``pattern.lark``)::

        %bn:BatchNorm(%conv:Convolution(%x, %w:var, ...), %g, %b, %m, %v)

    ``Op(a, b)`` is an operator with exactly these inputs (``...`` last: any
    more), ``(A|B)(...)`` one of several ops, ``{k = "v"}`` an attribute
    (compared as the typed parameter), ``#i`` output *i*, ``%x`` any value
    named *x* (the same name again is the same value), ``%x:p`` pattern *p*
    named *x*, ``var`` a variable, ``_`` any value, ``p | q`` either.
    Raises :class:`~mxc.errors.ParseError` with the column.
    """
    try:
        tree = _PARSER.parse(text)
    except lark.UnexpectedCharacters as exc:
        raise ParseError(f"unexpected character {text[exc.pos_in_stream]!r}",
                         source="<pattern>", line=exc.line, column=exc.column) from None
    except lark.UnexpectedToken as exc:
        expected = ", ".join(sorted({_WORDS.get(t, t) for t in exc.expected}))
        if exc.token.type == "$END":
            raise ParseError(f"unexpected end of the pattern; expected {expected}",
                             source="<pattern>", line=1, column=len(text) + 1) from None
        raise ParseError(f"unexpected {str(exc.token)!r}; expected {expected}",
                         source="<pattern>", line=exc.line, column=exc.column) from None
    try:
        return _Builder().transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, MxcError):
            raise exc.orig_exc from None
        raise
