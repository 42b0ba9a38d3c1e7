"""The Symbol API moved to :mod:`mxc.symbol` (re-export, resolved on first use).

``Symbol`` serializes through the frontend and evaluates through the
interpreter, so it sits on the API floor above the compiler; the compiler
itself works on :class:`~mxc.compiler.ir.Graph` only.  This old path keeps
working: every name is looked up in :mod:`mxc.symbol` when first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    module = importlib.import_module("mxc.symbol")  # by name: the compiler imports no API module
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'mxc.compiler.symbol' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(vars(importlib.import_module("mxc.symbol")))
