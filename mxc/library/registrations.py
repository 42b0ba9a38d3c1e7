"""What an extension library registered: its record, the registry diff and the rollback.

:func:`mxc.library.load` (and the compiled-library loader) take a
:func:`snapshot` of every :class:`mxc.registry.Registry` before running an
extension, ask :func:`changes_since` afterwards which entries it added,
replaced or grew, and :func:`undo` them when the extension fails or is
unloaded.  Everything goes through the registries' public snapshot API; no
registry's private state is touched.  Three registries are *reported*
(MXNet's ``Found N operators / partitioners / graph passes in library``);
every other one (converters, host-only operators, partitioners' own table,
CLI verbs, ...) is tracked silently so that unloading restores it too.

A registry that is not a :class:`~mxc.registry.Registry` can still take part
with :func:`track_registry` (snapshot and restore callables).
"""

from __future__ import annotations

import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..registry import Change, Registry, Snapshot, all_registries, same_token

__all__ = ["ExtensionLibrary", "track_registry", "MISSING", "snapshot", "changes_since",
           "undo", "registrations", "report", "tag_operators"]

#: what ``restore(name, previous)`` receives for an entry that was absent before the load
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

#: the reported kinds, in report order: label -> (module, registry attribute)
_REPORTED = {"operators": ("mxc.compiler.ops.registry", "OPS"),
             "partitioners": ("mxc.compiler.partition.registry", "BACKENDS"),
             "graph passes": ("mxc.compiler.passes.registry", "PASSES")}


@dataclass(eq=False)
class ExtensionLibrary:
    """One loaded extension library (what :func:`mxc.library.load` returns).

    Attributes
    ----------
    name:
        The name errors and reports use: the module's ``EXTENSION_NAME`` if
        it sets one, else the file stem / package directory name (or the
        entry point's name).
    path:
        The resolved ``.py`` file or package directory (None for an entry
        point whose module has no file).
    module_name:
        The name the module was imported under (in ``sys.modules``).
    module:
        The imported module.
    source:
        ``"path"`` or ``"entry point <group>:<name>"``.
    registrations:
        ``{kind: [names]}`` for every reported registry; kinds are
        ``"operators"``, ``"partitioners"``, ``"graph passes"`` and any
        added with :func:`track_registry`.
    """

    name: str
    path: Path | None
    module_name: str
    module: types.ModuleType | None = None
    source: str = "path"
    distribution: str | None = None
    registrations: dict[str, list[str]] = field(default_factory=dict)
    #: the opened compiled library (:class:`mxc.library.native.NativeLibrary`) of a
    #: ``.so``/``.dll``/``.dylib``; None for a Python extension
    native: Any = None
    _changes: list = field(default_factory=list, repr=False)
    _key: str = field(default="", repr=False)

    @property
    def operators(self) -> list[str]:
        return list(self.registrations.get("operators", []))

    @property
    def partitioners(self) -> list[str]:
        return list(self.registrations.get("partitioners", []))

    @property
    def graph_passes(self) -> list[str]:
        return list(self.registrations.get("graph passes", []))

    def __repr__(self) -> str:
        counts = ", ".join(f"{len(v)} {k}" for k, v in self.registrations.items())
        return f"<ExtensionLibrary {self.name!r} ({counts or 'nothing registered'})>"


# ---------------------------------------------------------------------------
# registries that are not mxc.registry.Registry objects
# ---------------------------------------------------------------------------
@dataclass
class _Tracker:
    kind: str
    snapshot: Callable[[], Mapping[str, Any]]
    restore: Callable[[str, Any], None]
    describe: Callable[[str], list[str]] = lambda name: []


_TRACKERS: list[_Tracker] = []


def track_registry(kind: str, snapshot: Callable[[], Mapping[str, Any]],
                   restore: Callable[[str, Any], None], *,
                   describe: Callable[[str], list[str]] | None = None) -> None:
    """Let :func:`mxc.library.load` attribute a registry's new entries to the library that made them.

    For a table that is not a :class:`mxc.registry.Registry` (those are
    tracked already).

    Parameters
    ----------
    kind:
        Plural label used in the verbose report and in
        :attr:`ExtensionLibrary.registrations` (``"graph passes"``).
    snapshot:
        ``snapshot() -> {name: token}``: the registry's current content; an
        entry counts as registered by a library when its token (the
        registered object, compared by identity) is new or changed.
    restore:
        ``restore(name, previous)``: undo one registration; *previous* is the
        token before loading, or a sentinel meaning "was absent" (test it
        with ``previous is mxc.library.MISSING``).
    describe:
        Optional ``describe(name) -> [lines]`` printed under the name in the
        verbose report.
    """
    _TRACKERS.append(_Tracker(kind, snapshot, restore, describe=describe or (lambda name: [])))


# ---------------------------------------------------------------------------
# snapshot, diff, undo
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Before:
    """Every registry's content before a load (:func:`snapshot`)."""

    registries: dict[Registry, Snapshot]
    trackers: list[tuple[_Tracker, dict[str, Any]]]


@dataclass(frozen=True)
class LibraryChange:
    """One registration a load made: *table* (a Registry or a tracker) and *name*;
    *shown* when it belongs in the report (not an alias, not a removal)."""

    table: Any
    name: str
    shown: bool
    revert: Callable[[], None] = field(repr=False, compare=False)


def snapshot() -> Before:
    """The content of every registry (their built-ins loaded first, so a library's
    clash with a built-in name is reported while it loads)."""
    registries = all_registries()
    for reg in registries:
        reg.load_builtins()
    return Before({reg: reg.snapshot() for reg in registries},
                  [(t, dict(t.snapshot())) for t in _TRACKERS])


def _registry_change(reg: Registry, change: Change) -> LibraryChange:
    shown = change.after is not None and not change.after.is_alias
    return LibraryChange(reg, change.name, shown, lambda: reg.revert([change]))


def changes_since(before: Before) -> list[LibraryChange]:
    """Every entry added, replaced, grown or removed since *before*.

    A registry created meanwhile (its module imported by the library) is
    compared with its built-in entries.
    """
    out: list[LibraryChange] = []
    for reg in all_registries():
        snap = before.registries.get(reg)
        if snap is None:
            reg.load_builtins()
            snap = reg.baseline()
        out.extend(_registry_change(reg, c) for c in reg.changes_since(snap))
    for tracker, old in before.trackers:
        now = tracker.snapshot()
        for name, token in now.items():
            prev = old.get(name, MISSING)
            if prev is MISSING or not same_token(prev, token):
                out.append(LibraryChange(tracker, name, True,
                                         lambda t=tracker, n=name, p=prev: t.restore(n, p)))
        for name, prev in old.items():
            if name not in now:  # removed by the library: restore on undo as well
                out.append(LibraryChange(tracker, name, False,
                                         lambda t=tracker, n=name, p=prev: t.restore(n, p)))
    return out


def undo(changes: list[LibraryChange]) -> None:
    """Revert *changes*, newest first; a failure is warned about and the rest still undone."""
    for change in reversed(changes):
        try:
            change.revert()
        except Exception as exc:  # noqa: BLE001 - best effort: report, undo the rest
            kind = getattr(change.table, "kind", "registry")
            warnings.warn(f"could not undo the registration of {kind} {change.name!r}: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)


def _reported() -> dict[str, Any]:
    """Report label -> table: the three MXNet kinds, then the :func:`track_registry` ones."""
    import importlib
    tables: dict[str, Any] = {label: getattr(importlib.import_module(module), attr)
                              for label, (module, attr) in _REPORTED.items()}
    for tracker in _TRACKERS:
        tables.setdefault(tracker.kind, tracker)
    return tables


def registrations(changes: list[LibraryChange]) -> dict[str, list[str]]:
    """``{kind: [names]}`` of the reported registries (every kind present, maybe empty)."""
    out: dict[str, list[str]] = {}
    for label, table in _reported().items():
        names = out.setdefault(label, [])
        names.extend(c.name for c in changes
                     if c.table is table and c.shown and c.name not in names)
    return out


def tag_operators(record: ExtensionLibrary) -> None:
    """Make custom operators registered by the library name it in their errors."""
    from ..compiler.ops.registry import OPS
    for name in record.operators:
        op = OPS.get(name)
        if op is not None and hasattr(op, "extension"):
            op.extension = record.name
            impl = getattr(op, "impl", None)
            if impl is not None:
                impl.extension = record.name


def report(record: ExtensionLibrary) -> str:
    """The verbose report of :func:`mxc.library.load` (MXNet's wording)."""
    labels = {"operators": "Op[{i}] {name}", "partitioners": "Partitioner[{i}] {name}",
              "graph passes": "Graph Pass [{i}] {name}"}
    tables = _reported()
    lines = [f"Loaded extension library {record.name!r} from {record.path or record.source}"]
    kinds = list(_REPORTED) + [k for k in record.registrations if k not in _REPORTED]
    for kind in kinds:
        names = record.registrations.get(kind, [])
        lines.append(f"Found {len(names)} {kind} in library")
        fmt = labels.get(kind, kind + "[{i}] {name}")
        table = tables.get(kind)
        for i, name in enumerate(names):
            lines.append("\t" + fmt.format(i=i, name=name))
            if table is not None:
                lines.extend("\t\t" + extra for extra in table.describe(name))
    return "\n".join(lines)
