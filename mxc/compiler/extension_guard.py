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
from typing import Any, Iterator, Protocol

from ..errors import ExtensionError

__all__ = ["guard", "extension_error", "extension_of", "current_library", "loaded",
           "LibraryRecord", "LibraryRecords", "RECORDS"]


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


class LibraryRecord(Protocol):
    """What the records need of a library (:class:`mxc.library.ExtensionLibrary` has it;
    the compiler may not import that class, so it is described here)."""

    name: str
    module_name: str
    _key: str


class LibraryRecords:
    """The loaded libraries (by key, in load order) and the stack of libraries being loaded.

    One instance, :data:`RECORDS`, shared by :mod:`mxc.library`, the compiled-
    library loader and the compiler's error reporting.  Every change goes
    through these methods under :attr:`lock` (reentrant, so a library that
    loads another one while it loads does not deadlock); the loaders change it
    only through :class:`mxc.library.transaction.ExtensionTransaction`.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._loaded: dict[str, LibraryRecord] = {}
        self._loading: list[LibraryRecord] = []

    def get(self, key: str) -> "LibraryRecord | None":
        """The loaded library recorded under *key*, or None."""
        with self.lock:
            return self._loaded.get(key)

    def keys(self) -> set[str]:
        """The keys of every loaded library."""
        with self.lock:
            return set(self._loaded)

    def values(self) -> list[LibraryRecord]:
        """Every loaded library, in load order."""
        with self.lock:
            return list(self._loaded.values())

    def add(self, record: LibraryRecord) -> None:
        with self.lock:
            self._loaded[record._key] = record

    def pop(self, key: str) -> "LibraryRecord | None":
        """Forget the library under *key*; returns it (None if there was none)."""
        with self.lock:
            return self._loaded.pop(key, None)

    def is_loading(self, key: str) -> bool:
        """True while the library under *key* is being loaded (a library loading itself)."""
        with self.lock:
            return any(rec._key == key for rec in self._loading)

    def push_loading(self, record: LibraryRecord) -> None:
        with self.lock:
            self._loading.append(record)

    def pop_loading(self, record: LibraryRecord) -> None:
        with self.lock:
            if self._loading and self._loading[-1] is record:
                self._loading.pop()
            elif record in self._loading:  # pragma: no cover - nested loads unwind in order
                self._loading.remove(record)

    def loading(self) -> list[LibraryRecord]:
        """The libraries being loaded, outermost first."""
        with self.lock:
            return list(self._loading)


#: the one set of library records
RECORDS = LibraryRecords()


def loaded() -> list[Any]:
    """Every library loaded so far, in load order."""
    return RECORDS.values()


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
    for rec in RECORDS.values() + RECORDS.loading():
        if rec.module_name and (module == rec.module_name
                                or module.startswith(rec.module_name + ".")):
            return rec.name
    return module


def current_library() -> Any:
    """The library being loaded right now (None outside :func:`mxc.library.load`).

    Registration functions use it to attribute what they register, so run-
    time errors can name the extension.
    """
    stack = RECORDS.loading()
    return stack[-1] if stack else None
