"""Extension guard and loaded-library records: the part of :mod:`mxc.library` the compiler uses.

Compiler code runs extension callbacks (custom operators, partitioners,
passes) and must name the extension when one fails, but the compiler may not
import :mod:`mxc.library` (which imports the compiler's registries).  So the
error wrapper (:func:`guard`), the records of loaded and loading libraries
and the queries over them live here, below both; :mod:`mxc.library`
re-exports them and fills the records when it loads a library.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import ExtensionError

if TYPE_CHECKING:  # the records' type; mxc.library defines it
    from ..library import ExtensionLibrary

__all__ = ["guard", "extension_error", "extension_of", "current_library"]


# ---------------------------------------------------------------------------
# errors raised inside extension code
# ---------------------------------------------------------------------------
def _node_label(node: Any, function: str = "") -> str:
    if node is None:
        return ""
    if isinstance(node, str):
        return f" on node {node!r}"
    name = getattr(node, "name", None)
    op = getattr(node, "op", None)
    if name is None:
        return f" on {node!r}"
    show_op = op and f"'{op}'" not in function
    return f" on node {name!r}" + (f" ({op})" if show_op else "")


def extension_error(extension: str | None, function: str, node: Any,
                    exc: BaseException) -> ExtensionError:
    """The :class:`~mxc.errors.ExtensionError` :func:`guard` raises for *exc*.

    Its message reads ``extension 'my_ops': operator 'my_gemm' forward
    raised on node 'gemm0' (my_gemm): ValueError: <the extension's
    message>``; the attributes ``extension``, ``function``, ``node`` (a name
    or None) and ``original`` (the exception) are set for programs.
    Callers chain it themselves (``raise extension_error(...) from exc``).
    """
    text = str(exc)
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    ext = extension or "<unknown extension>"
    err = ExtensionError(f"extension {ext!r}: {function} raised{_node_label(node, function)}: {what}")
    err.extension = ext
    err.function = function
    err.node = node if isinstance(node, str) or node is None else getattr(node, "name", None)
    err.original = exc
    return err


@contextlib.contextmanager
def guard(extension: str | None, function: str, node: Any = None) -> Iterator[None]:
    """Run extension code; report any exception as an :class:`ExtensionError`.

    Parameters
    ----------
    extension:
        The extension's name (:attr:`ExtensionLibrary.name`, or the Python
        module that registered the component).
    function:
        What was called, as the user would say it: ``"operator 'my_gemm'
        forward"``, ``"partitioner 'myProp' supported_ops"``, ``"graph pass
        'myPass'"``.
    node:
        The node being processed (a :class:`~mxc.compiler.ir.Node` or a
        name), or None.

    An :class:`ExtensionError` raised inside passes through unchanged (it
    already names its extension); every other exception, mxc's own errors
    included, is wrapped with the extension's message kept and the original
    chained as ``__cause__``::

        with mxc.library.guard("my_ext", "partitioner 'myProp' supported_ops"):
            ok = strategy.supported_ops(graph, ids, options)
    """
    try:
        yield
    except ExtensionError:
        raise
    except Exception as exc:  # any failure of foreign code is reported
        raise extension_error(extension, function, node, exc) from exc


_LOCK = threading.RLock()
#: loaded libraries by key, in load order, and the stack of libraries being loaded
#: (filled by :mod:`mxc.library`, which shares these very objects)
_LIBRARIES: dict[str, "ExtensionLibrary"] = {}
_LOADING: list["ExtensionLibrary"] = []


def loaded() -> list["ExtensionLibrary"]:
    """Every library loaded so far, in load order."""
    with _LOCK:
        return list(_LIBRARIES.values())


def extension_of(obj: Any) -> str:
    """The name to report for extension code *obj* (a function, class or instance).

    The name of the loaded (or loading) library whose module defines *obj*,
    else *obj*'s Python module.  Partitioners and passes use it to fill in
    :func:`guard`'s *extension*.
    """
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        module = getattr(type(obj), "__module__", None)
    if not module:
        return "<unknown extension>"
    for rec in list(_LIBRARIES.values()) + list(_LOADING):
        if rec.module_name and (module == rec.module_name
                                or module.startswith(rec.module_name + ".")):
            return rec.name
    return module


def current_library() -> "ExtensionLibrary | None":
    """The library being loaded right now (None outside :func:`load`).

    Registration functions use it to attribute what they register, so run-
    time errors can name the extension.
    """
    return _LOADING[-1] if _LOADING else None
