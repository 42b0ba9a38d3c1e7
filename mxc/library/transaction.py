"""One extension load as a transaction: snapshot every registry, commit or restore.

Both loaders (:func:`mxc.library.load` for Python extensions and
:func:`mxc.library.native.loader.load_native` for compiled ones) run the
library's code inside one :class:`ExtensionTransaction`::

    with ExtensionTransaction(record) as tx:
        run_the_librarys_code()
        tx.registrations = {...}      # optional: what to report, else the registry diff
    # here the record is loaded, its changes kept for unload

Entering takes the library records' lock, snapshots every registry
(:func:`mxc.library.registrations.snapshot`) and marks *record* as loading
(so what it registers is attributed to it).  Leaving normally commits: the
record gets the registry changes made meanwhile (minus those of libraries it
loaded itself, which belong to them) and joins the loaded libraries.  Leaving
by an exception restores every registry to the snapshot, forgets the
library's modules and every library loaded from inside it, and re-raises.
The rollback lives here once, instead of once per loader.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from ..compiler.extension_guard import RECORDS
from . import registrations

__all__ = ["ExtensionTransaction", "forget_modules"]


def forget_modules(module_name: str) -> None:
    """Drop *module_name* and its submodules from :data:`sys.modules` (nothing for "")."""
    if not module_name:
        return
    for name in [m for m in sys.modules if m == module_name or m.startswith(module_name + ".")]:
        sys.modules.pop(name, None)


class ExtensionTransaction:
    """Load *record*'s library with every registry restored if it fails (see the module doc).

    Attributes
    ----------
    record:
        The :class:`~mxc.library.ExtensionLibrary` being loaded.
    registrations:
        ``{kind: [names]}`` to store on the record at commit; None (the
        default) stores what the registry diff reports.
    committed:
        True once the transaction committed.
    """

    def __init__(self, record: Any) -> None:
        self.record = record
        self.registrations: dict[str, list[str]] | None = None
        self.committed = False
        self._before: registrations.Before | None = None
        self._libraries_before: set[str] = set()

    def __enter__(self) -> "ExtensionTransaction":
        RECORDS.lock.acquire()
        try:
            self._before = registrations.snapshot()
            self._libraries_before = RECORDS.keys()
            RECORDS.push_loading(self.record)
        except BaseException:
            RECORDS.lock.release()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        try:
            RECORDS.pop_loading(self.record)
            if exc_type is None:
                self._commit()
            else:
                self.rollback()
        finally:
            RECORDS.lock.release()
        return False

    def _nested(self) -> set[str]:
        """Keys of the libraries loaded from inside this one."""
        return RECORDS.keys() - self._libraries_before

    def changes(self) -> list[registrations.LibraryChange]:
        """The registry changes this library made (not those of libraries it loaded)."""
        assert self._before is not None, "the transaction has not started"
        nested = {(id(c.table), c.name) for key in self._nested()
                  for c in getattr(RECORDS.get(key), "_changes", [])}
        return [c for c in registrations.changes_since(self._before)
                if (id(c.table), c.name) not in nested]

    def rollback(self) -> None:
        """Restore every registry to the snapshot and forget what the load imported."""
        assert self._before is not None, "the transaction has not started"
        registrations.undo(registrations.changes_since(self._before))
        forget_modules(self.record.module_name)
        for key in self._nested():
            nested = RECORDS.pop(key)
            if nested is not None:
                forget_modules(nested.module_name)

    def _commit(self) -> None:
        record = self.record
        if RECORDS.get(record._key) is None:  # loading a loaded library again keeps its record
            record._changes = self.changes()
            record.registrations = (self.registrations if self.registrations is not None
                                    else registrations.registrations(record._changes))
            RECORDS.add(record)
        registrations.tag_operators(record)
        self.committed = True
