"""MXNet attribute value strings <-> Python values.

MXNet stores every operator parameter as a string (``"(3, 3)"``, ``"True"``,
``"1e-05"``, ``"None"``, ``"float32"``).  :func:`parse_attr_value` turns such a
string into a Python value with a small lark grammar (``attr_value.lark``);
results are cached because real models repeat the same few strings thousands
of times.  :func:`format_attr_value` is the inverse and writes what MXNet's
Python front end writes (``str()`` of the value), so builders produce the same
JSON MXNet would.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import lark

from ...errors import ParseError

_GRAMMAR = (Path(__file__).with_name("attr_value.lark")).read_text()


class _ToPython(lark.Transformer):
    def empty_tuple(self, _):
        return ()

    def one_tuple(self, items):
        return (items[0],)

    def many_tuple(self, items):
        return tuple(items)

    def paren(self, items):
        return items[0]

    def list(self, items):
        return list(items)

    def empty_list(self, _):
        return []

    def none(self, _):
        return None

    def true(self, _):
        return True

    def false(self, _):
        return False

    def int_(self, tok):
        return int(tok[0])

    def float_(self, tok):
        return float(str(tok[0]).rstrip("fF"))

    def special_float(self, tok):
        return float(str(tok[0]).lower().replace("infinity", "inf"))

    def string(self, tok):
        return str(tok[0])[1:-1]

    def word(self, tok):
        return str(tok[0])


_PARSER = lark.Lark(_GRAMMAR, parser="lalr", transformer=_ToPython(), maybe_placeholders=True)


@functools.lru_cache(maxsize=65536)
def parse_attr_value(text: str) -> Any:
    """Parse one MXNet attribute string into int/float/bool/None/str/tuple/list.

    Raises :class:`~mxc.errors.ParseError` (with the column) on malformed text.
    Results are cached; tuples are immutable, lists are returned as tuples'
    siblings but must not be mutated by callers.
    """
    try:
        return _PARSER.parse(text)
    except lark.UnexpectedInput as exc:
        col = getattr(exc, "column", None)
        raise ParseError(f"malformed attribute value {text!r}", source="<attribute>",
                         line=None, column=col) from None


def format_attr_value(value: Any) -> str:
    """Write *value* the way MXNet's Python API stringifies keyword arguments."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (tuple, list)):
        return str(tuple(_plain(v) for v in value)) if isinstance(value, tuple) \
            else str([_plain(v) for v in value])
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalar
        return format_attr_value(value.item())
    return str(value)


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (tuple, list)):
        return v.item()
    if isinstance(v, (tuple, list)):
        return type(v)(_plain(x) for x in v)
    return v
