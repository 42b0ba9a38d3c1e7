"""``mxc draw``: pictures of models, partitions and artifacts (SVG or an offline HTML page).

::

    mxc draw resnet18-symbol.json --shape data=1,3,224,224 -o graph.html
    mxc draw partitioned-symbol.json -o graph.svg
    mxc draw model.mxc -o graph.html

:func:`draw` reads what it is given (a symbol JSON, partitioned or not; an
``.mxc`` artifact), builds a :class:`~mxc.draw.model.Drawing` and writes it
as SVG or as the HTML page of :mod:`mxc.draw.page`.  Graphviz lays it out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..errors import MxcError
from .model import Drawing, from_artifact, from_graph

__all__ = ["draw", "drawing_of", "Drawing"]

FORMATS = (".html", ".svg")


def register_backend_ops() -> None:
    """Register the subgraph backends mxc provides, so the region operators they
    define (``_tvm_subgraph``) load from a partitioned JSON."""
    from ..backends.tvm.property import register_tvm_backend
    register_tvm_backend()


def drawing_of(path: str | os.PathLike, shapes: Mapping[str, tuple] | None = None,
               params: Mapping | None = None, show_params: bool = False) -> Drawing:
    """The drawing of the model, partitioned model or artifact at *path*."""
    path = os.fspath(path)
    from ..runtime.artifact import is_artifact
    title = Path(path).name
    if path.endswith(".mxc") or is_artifact(path):
        from ..runtime.artifact import read_artifact
        art = read_artifact(path, check_target=False)
        return from_artifact(art.graph, art.manifest, title,
                             {k: v.shape for k, v in art.params.items()})
    from ..symbol import load
    register_backend_ops()
    sym = load(path)
    given = {k: tuple(v.shape) for k, v in (params or {}).items()}
    given.update(shapes or {})
    return from_graph(sym.graph, title, given, show_params=show_params,
                      weights=(params or {}).keys())


def draw(path: str | os.PathLike, output: str | os.PathLike,
         shapes: Mapping[str, tuple] | None = None, params: Mapping | None = None,
         show_params: bool = False) -> Drawing:
    """Write the drawing of *path* to *output* (``.html`` or ``.svg``); returns it."""
    suffix = Path(output).suffix.lower()
    if suffix not in FORMATS:
        raise MxcError(f"{output}: mxc draw writes .html or .svg, not {suffix or 'no suffix'!r}")
    drawing = drawing_of(path, shapes, params, show_params)
    if suffix == ".svg":
        from .render import render_svg
        text = render_svg(drawing)
    else:
        from .page import to_html
        text = to_html(drawing)
    from ..atomic_files import atomic_write_text
    atomic_write_text(output, text)
    return drawing
