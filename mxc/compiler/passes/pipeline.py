"""Textual pass pipelines: ``remove-dropout,fold-batchnorm,partition{backend=default}``.

The grammar (``pipeline.lark``) is three rules, MLIR-style: passes separated
by commas, each with optional ``{key=value ...}`` options (space separated,
list items separated by ``;``, values quoted when they hold spaces or
punctuation).  :meth:`Pipeline.parse` reads it, ``str(pipeline)`` prints the
canonical form, and parsing that again gives the same string::

    >>> str(Pipeline.parse("dce , partition{ backend=default  op_names=exp;log }"))
    'dce,partition{backend=default op_names=exp;log}'

Errors -- malformed text, an unknown pass, an unknown or invalid option --
are :class:`PipelineError` s that give the column, show the text with a
caret under it, and list what is known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import lark

from ...errors import PassError
from .registry import PASSES, OptionError, PassInfo, get_pass, has_pass

__all__ = ["Pipeline", "PassSpec", "PipelineError", "parse_pipeline"]

_GRAMMAR = Path(__file__).with_name("pipeline.lark").read_text()
_PARSER = lark.Lark(_GRAMMAR, parser="lalr", lexer="contextual", maybe_placeholders=False)
_BARE = re.compile(r'[^\s{}=;,"]+\Z')
#: most passes a pipeline may hold (the built-in pipelines use about 20): a longer one is
#: a mistake or an attack, and 20,000 passes run for minutes
MAX_PIPELINE_PASSES = 1000
#: longest pipeline text parsed (1,000 passes with generous options)
MAX_PIPELINE_CHARS = 64 * 1024

_TOKEN_WORDS = {
    "PASS_NAME": "a pass name", "KEY": "an option name", "WORD": "a value",
    "STRING": "a quoted value", "_COMMA": "','", "_LBRACE": "'{'", "_RBRACE": "'}'",
    "_EQUAL": "'='", "_SEMICOLON": "';'", "$END": "the end of the pipeline",
}


class PipelineError(PassError):
    """A pipeline could not be parsed or resolved; ``.column`` is 1-based (or None)."""

    def __init__(self, message: str, text: str | None = None, column: int | None = None):
        self.text = text
        self.column = column
        self.bare_message = message
        if column is not None and text is not None:
            message = (f"pipeline column {column}: {message}\n  {text}\n"
                       f"  {' ' * (column - 1)}^")
        super().__init__(message)


@dataclass(frozen=True)
class PassSpec:
    """One pass of a pipeline: its name and the options as written.

    ``options`` maps a key to a value: a tuple of strings when parsed from
    text (one per ``;``-separated item), any Python value when built in code.
    Columns (1-based, None when built in code) are for error messages only.
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    column: int | None = field(default=None, compare=False)
    option_columns: Mapping[str, int] = field(default_factory=dict, compare=False)
    value_columns: Mapping[str, int] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        items = " ".join(f"{k}={format_value(v)}" for k, v in self.options.items())
        return f"{self.name}{{{items}}}"


def format_value(value: Any) -> str:
    """An option value in canonical pipeline syntax."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ";".join(_atom(format_value(v) if not isinstance(v, str) else v) for v in value)
    return _atom(str(value))


def _atom(text: str) -> str:
    if _BARE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Pipeline(Sequence):
    """An ordered list of :class:`PassSpec`; ``str()`` is the canonical text."""

    def __init__(self, passes: Iterable[PassSpec | str | tuple] = (), text: str | None = None):
        specs = []
        for p in passes:
            if len(specs) == MAX_PIPELINE_PASSES:
                raise PipelineError(f"the pipeline has more than {MAX_PIPELINE_PASSES} passes "
                                    f"(pass {len(specs) + 1}: {_spec(p).name!r:.60}); at most "
                                    f"{MAX_PIPELINE_PASSES} are accepted")
            specs.append(_spec(p))
        self.passes: tuple[PassSpec, ...] = tuple(specs)
        self.text = text

    @classmethod
    def parse(cls, text: str) -> "Pipeline":
        """Parse pipeline *text*; raises :class:`PipelineError` with the column."""
        return parse_pipeline(text)

    @classmethod
    def of(cls, pipeline: "Pipeline | str | Iterable") -> "Pipeline":
        """A pipeline from text, a Pipeline, or a list of names/specs/(name, options)."""
        if isinstance(pipeline, Pipeline):
            return pipeline
        if isinstance(pipeline, str):
            return parse_pipeline(pipeline)
        return cls(pipeline)

    def __str__(self) -> str:
        return ",".join(str(p) for p in self.passes)

    def __repr__(self) -> str:
        return f"Pipeline({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and self.passes == other.passes

    def __hash__(self) -> int:
        return hash(str(self))

    def __getitem__(self, i):
        return self.passes[i]

    def __len__(self) -> int:
        return len(self.passes)

    def __iter__(self) -> Iterator[PassSpec]:
        return iter(self.passes)

    def resolve(self) -> list[tuple[PassSpec, PassInfo, dict, dict]]:
        """Look up every pass and check its options, before anything runs.

        Returns ``[(spec, info, typed options, extra string options)]``;
        raises :class:`PipelineError` pointing at the offending pass or option.
        """
        resolved = []
        for spec in self.passes:
            if not has_pass(spec.name):
                raise PipelineError(str(PASSES.unknown_error(spec.name)), self.text,
                                    spec.column)
            info = get_pass(spec.name)
            try:
                typed, extra = info.bind(spec.options)
            except OptionError as exc:
                columns = spec.value_columns if exc.kind == "invalid" else spec.option_columns
                column = columns.get(exc.key, spec.column)
                raise PipelineError(str(exc), self.text, column) from None
            resolved.append((spec, info, typed, extra))
        return resolved


def _spec(p: PassSpec | str | tuple) -> PassSpec:
    if isinstance(p, PassSpec):
        return p
    if isinstance(p, str):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", p):
            return_value = parse_pipeline(p)
            if len(return_value) != 1:
                raise PipelineError(f"expected one pass, got {p!r}")
            return return_value[0]
        return PassSpec(p)
    if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str):
        return PassSpec(p[0], dict(p[1] or {}))
    raise PipelineError(f"a pipeline entry must be a pass name, a PassSpec or "
                        f"(name, options), got {p!r}")


def parse_pipeline(text: str) -> Pipeline:
    """Parse *text* into a :class:`Pipeline` (see the module docstring)."""
    if not isinstance(text, str):
        raise PipelineError(f"a pipeline must be a string, got {type(text).__name__}")
    if len(text) > MAX_PIPELINE_CHARS:
        raise PipelineError(f"the pipeline text is {len(text):,} characters long; at most "
                            f"{MAX_PIPELINE_CHARS:,} are accepted ({MAX_PIPELINE_PASSES} "
                            f"passes at most)")
    try:
        tree = _PARSER.parse(text)
    except lark.UnexpectedCharacters as exc:
        raise PipelineError(f"unexpected character {text[exc.pos_in_stream]!r}; expected "
                            f"{_expected(exc.allowed)}", text, exc.column) from None
    except lark.UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            raise PipelineError(f"unexpected end of the pipeline; expected "
                                f"{_expected(exc.expected)}", text, len(text) + 1) from None
        raise PipelineError(f"unexpected {str(tok)!r}; expected {_expected(exc.expected)}",
                            text, tok.column) from None
    except lark.UnexpectedEOF as exc:  # pragma: no cover - LALR reports UnexpectedToken
        raise PipelineError(f"unexpected end of the pipeline; expected "
                            f"{_expected(exc.expected)}", text, len(text) + 1) from None
    passes = []
    for item in tree.find_data("pass_item"):
        name_tok = item.children[0]
        options: dict[str, tuple[str, ...]] = {}
        columns: dict[str, int] = {}
        value_columns: dict[str, int] = {}
        for opt in (item.children[1].children if len(item.children) > 1 else ()):
            key_tok, value = opt.children
            key = str(key_tok)
            if key in options:
                raise PipelineError(f"option {key!r} of pass {str(name_tok)!r} is given twice",
                                    text, key_tok.column)
            atoms = _atoms(value)
            options[key] = tuple(_unquote(t) for t in atoms)
            columns[key] = key_tok.column
            value_columns[key] = atoms[0].column
        passes.append(PassSpec(str(name_tok), options, name_tok.column, columns, value_columns))
    return Pipeline(passes, text)


def _atoms(value: lark.Tree) -> list[lark.Token]:
    out: list[lark.Token] = []
    node = value
    while isinstance(node, lark.Tree):  # value is left-recursive: value ; atom
        *rest, last = node.children
        out.append(last)
        node = rest[0] if rest else None
    return out[::-1]


def _unquote(tok: lark.Token) -> str:
    text = str(tok)
    if tok.type != "STRING":
        return text
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _expected(names: Iterable[str]) -> str:
    words = sorted({_TOKEN_WORDS.get(n, n) for n in names})
    return " or ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " or " + words[-1]
