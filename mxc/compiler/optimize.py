"""``Symbol.optimize_for``: run a registered backend (partitioner or pass) by name.

Options arrive as strings, as MXNet's C API passes them.  When ``args``/``aux``
are given their shapes and dtypes are inferred first and handed to the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..frontend.attrs import format_attr_value

if TYPE_CHECKING:  # pragma: no cover
    from .symbol import Symbol


def optimize_symbol(sym: "Symbol", backend: str, *, args: dict | None = None,
                    aux: dict | None = None, clear: bool = True, **options: Any) -> "Symbol":
    from .partition import optimize_graph
    from .symbol import Symbol

    str_options = {k: _option_string(v) for k, v in options.items()}
    shapes = dtypes = None
    if args is not None or aux is not None:
        arrays = {**(args or {}), **(aux or {})}
        shapes = {k: tuple(np.shape(v)) for k, v in arrays.items()}
        dtypes = {k: np.asarray(v).dtype.name for k, v in arrays.items()}
    graph = optimize_graph(sym.graph.copy(), backend, options=str_options, shapes=shapes,
                           dtypes=dtypes, clear=clear)
    return Symbol.from_graph(graph)


def _option_string(value: Any) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return format_attr_value(value)
