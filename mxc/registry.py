"""One registry abstraction for every "name -> definition" table in mxc.

Operators, TVM converters, host-only operators, graph passes, subgraph
backends, partitioners, CLI verbs, load-time weight-transform evaluators and
MXNet's Python custom operators (``mx.operator.register``) are each a
:class:`Registry`.  They share
one behaviour, so a newcomer learns it once:

* **register** (call or decorator form); a name already taken raises the
  registry's own error *naming the first registrant* (``module.Class
  (path/file.py:line)``) unless ``override=True``.  Re-registering the very
  same object is harmless (a module imported twice under two names).
* **lookup** with a did-you-mean: a miss raises the registry's typed error
  with the closest registered name.
* **lazy built-ins**: the registry is given the *names* of the modules that
  register its built-in entries and imports them on the first miss or
  iteration.  The registry therefore never imports its built-ins, only they
  import it -- no import cycle between a registry and its contents.  This is
  the one way built-ins are found (:func:`builtin_modules`): a name is a
  module, or a package standing for each of its public modules (a family
  directory: adding a file there adds its entries); no registry keeps its own
  scan, import list or module map.
* **snapshot / diff / restore**: :meth:`Registry.snapshot` records the
  content (and the state of mutable values that opt in with
  :class:`Revertible`); :meth:`Registry.changes_since` says what was added,
  replaced or removed since; :meth:`Registry.revert` undoes such changes.
  :mod:`mxc.library` attributes an extension's registrations this way and
  rolls them back, without touching any registry's private state.
* **listeners** (optional): ``subscribe(fn)`` calls ``fn(name, old, new)``
  whenever an entry changes (``mxc.sym`` drops its cached builder).

This module sits at the bottom of the layering (beside :mod:`mxc.errors`): it
imports nothing from mxc, so the compiler may use it.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import pkgutil
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Protocol, TypeVar

__all__ = ["Registry", "Entry", "Change", "Snapshot", "Revertible", "describe_origin",
           "all_registries", "same_token", "builtin_modules"]

T = TypeVar("T")

#: the folder holding the ``mxc`` package: origins inside it are shown relative to it
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Revertible(Protocol):
    """A mutable registered value whose later additions a snapshot can undo.

    A subgraph backend gains properties and a partitioner gains strategies
    after registration; ``registry_state()`` returns a small token of that
    (compared element by element by identity, ints by value) and
    ``restore_registry_state(token)`` brings the value back to it.
    """

    def registry_state(self) -> Any: ...

    def restore_registry_state(self, state: Any) -> None: ...


def describe_origin(obj: Any) -> str:
    """``module.qualname (path/file.py:line)`` of a class, function or instance.

    Read from the object itself (its ``__module__``, code object or source
    file), never from the call stack, so it names the definition however the
    registration call was routed.
    """
    if isinstance(obj, str):
        return obj
    target = obj if inspect.isclass(obj) or inspect.isroutine(obj) else type(obj)
    target = inspect.unwrap(target) if inspect.isroutine(target) else target
    module = getattr(target, "__module__", None) or "?"
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) \
        or repr(target)
    where = _location(target)
    return f"{module}.{qual}" + (f" ({where})" if where else "")


def _location(target: Any) -> str:
    code = getattr(target, "__code__", None)
    if code is not None:
        return f"{_short(code.co_filename)}:{code.co_firstlineno}"
    try:
        path = inspect.getsourcefile(target)
    except TypeError:
        return ""
    if not path:
        return ""
    try:
        line = inspect.getsourcelines(target)[1]
    except (TypeError, OSError):  # a class made by type(): its module's file only
        return _short(path)
    return f"{_short(path)}:{line}"


def _short(path: str) -> str:
    full = os.path.abspath(path)
    if full.startswith(_ROOT + os.sep):
        return os.path.relpath(full, _ROOT)
    return full


@dataclass(frozen=True, eq=False)
class Entry(Generic[T]):
    """One registration: *value* under *name* (*primary* is the name it was
    registered under; an alias entry has another *name*)."""

    name: str
    value: T
    primary: str
    source: Any = None      # an explicit origin string, or the object to describe
    builtin: bool = False   # registered while the registry imported its built-ins

    @property
    def is_alias(self) -> bool:
        return self.name != self.primary

    @property
    def origin(self) -> str:
        """Who registered it: ``module.qualname (file:line)`` (or the explicit origin)."""
        if self.source is None:
            return describe_origin(self.value)
        return describe_origin(self.source)


@dataclass(frozen=True)
class Change(Generic[T]):
    """One difference since a snapshot: *before*/*after* are entries or None (absent)."""

    registry: "Registry[T]"
    name: str
    before: Entry[T] | None
    after: Entry[T] | None
    before_state: Any = None


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """The content of one registry at one moment (see :meth:`Registry.snapshot`)."""

    registry: "Registry[T]"
    entries: Mapping[str, Entry[T]]
    states: Mapping[str, Any]


_NOTHING: Any = object()
_REGISTRIES: "list[weakref.ref[Registry]]" = []


def all_registries() -> list["Registry"]:
    """Every registry alive, in creation order."""
    alive = [(ref, ref()) for ref in _REGISTRIES]
    _REGISTRIES[:] = [ref for ref, reg in alive if reg is not None]
    return [reg for _, reg in alive if reg is not None]


def builtin_modules(names: Iterable[str]) -> list[str]:
    """The modules a registry's *builtins* stand for, in import order.

    A module name stands for itself.  A package name stands for the package
    and each of its public modules (names not starting with ``_``) in name
    order, subpackages expanded the same way in their place.  Packages are
    imported to be listed; modules are not.
    """
    out: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            out.append(name)
            continue
        out.append(name)
        for info in sorted(pkgutil.iter_modules(spec.submodule_search_locations),
                           key=lambda m: m.name):
            if not info.name.startswith("_"):
                out.extend(builtin_modules([f"{name}.{info.name}"]))
    return out


def _revertible(value: Any) -> bool:
    # looked up on the type: a value with a permissive __getattr__ is not Revertible
    kind = type(value)
    return callable(getattr(kind, "registry_state", None)) and \
        callable(getattr(kind, "restore_registry_state", None))


def same_token(a: Any, b: Any) -> bool:
    """How snapshots compare what they recorded: by identity, ints by value, tuples
    element by element (a registered object is "unchanged" only if it is the same one)."""
    if a is b:
        return True
    if type(a) is tuple and type(b) is tuple and len(a) == len(b):
        return all(same_token(x, y) for x, y in zip(a, b))
    return type(a) is int and type(b) is int and a == b


class Registry(Generic[T]):
    """A typed ``name -> value`` table with mxc's registration rules (module docstring).

    Parameters
    ----------
    kind:
        Plural label (``"operators"``), used in messages and reports.
    noun:
        What one entry is called in messages (``"operator"``, ``"pass"``).
    builtins:
        Names of the modules that register the built-in entries, imported in
        order on the first miss or iteration; a package name stands for each
        of its public modules (:func:`builtin_modules`).
    builtin_packages:
        Modules (and everything under them) whose registrations are
        built-in (default: the *builtins* themselves).  Any
        other registration imports the built-ins first, so that a clash with
        a built-in name is reported at once and names the built-in; a
        built-in module never does (it may be half-imported at that point).
    error:
        Exception type of a duplicate registration and of a miss.
    unknown:
        ``unknown(name) -> Exception`` for a miss, when the registry's error
        has its own shape (default: ``unknown {noun} 'x' (did you mean 'y'?);
        known {kind}: ...``).
    duplicate:
        ``duplicate(name, first: Entry) -> Exception`` for a taken name
        (default: ``{noun} 'x' is already registered (by <origin>); use
        override=True to replace it``).
    describe:
        ``describe(name, value) -> [lines]``: details for reports (``mxc.library``).
    """

    def __init__(self, kind: str, *, noun: str = "entry",
                 builtins: Iterable[str] = (),
                 builtin_packages: Iterable[str] | None = None,
                 error: Callable[[str], Exception] = KeyError,
                 unknown: Callable[[str], Exception] | None = None,
                 duplicate: Callable[[str, Entry[T]], Exception] | None = None,
                 describe: Callable[[str, T], list[str]] | None = None):
        self.kind = kind
        self.noun = noun
        names = () if isinstance(builtins, str) or callable(builtins) else tuple(builtins)
        if not names and builtins or not all(isinstance(n, str) for n in names):
            raise TypeError(f"Registry({kind!r}): builtins are module or package names, "
                            f"got {builtins!r}")
        self._builtins = names
        self._builtin_packages = tuple(builtin_packages if builtin_packages is not None
                                       else self._builtins)
        self._error = error
        self._unknown = unknown
        self._duplicate = duplicate
        self._describe = describe
        self._entries: dict[str, Entry[T]] = {}
        self._values: dict[str, T] = {}
        self._loaded = not self._builtins
        self._loading = False
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str, T | None, T | None], None]] = []
        _REGISTRIES.append(weakref.ref(self))

    def __repr__(self) -> str:
        return f"<Registry {self.kind}: {len(self._entries)} entries>"

    # -- registration -------------------------------------------------------------
    def register(self, name: str, value: Any = _NOTHING, *, override: bool = False,
                 origin: Any = None, aliases: Iterable[str] = ()) -> Any:
        """Register *value* under *name* (and *aliases*); returns *value*.

        Without *value*, returns a decorator registering what it decorates.
        *origin* is who registers (a string, or the class/function to
        describe); default: *value* itself.
        """
        if value is _NOTHING:
            def deco(obj: Any) -> Any:
                self.register(name, obj, override=override, origin=origin, aliases=aliases)
                return obj
            return deco
        keys = [name, *aliases]
        builtin = self._loading or self._is_builtin(origin if origin is not None else value)
        if not builtin:
            self.load_builtins()
        with self._lock:
            if not override:
                for key in keys:
                    self._check_free(key, value, origin)
            for key in keys:
                self._set(key, Entry(key, value, name, origin, builtin))
        return value

    def _is_builtin(self, source: Any) -> bool:
        if isinstance(source, str):
            return False
        module = getattr(source, "__module__", None)
        if not isinstance(module, str):
            module = getattr(type(source), "__module__", None) or ""
        return any(module == p or module.startswith(p + ".") for p in self._builtin_packages)

    def _check_free(self, key: str, value: Any, origin: Any) -> None:
        first = self._entries.get(key)
        if first is None:
            return
        mine = origin if origin is not None else value
        theirs = first.source if first.source is not None else first.value
        if mine is theirs or first.value is value:
            return  # the same definition again
        if self._duplicate is not None:
            raise self._duplicate(key, first)
        raise self._error(f"{self.noun} {key!r} is already registered (by {first.origin}); "
                          f"use override=True to replace it")

    def add_alias(self, name: str, *aliases: str) -> None:
        """Make *aliases* other names of the entry registered as *name*."""
        with self._lock:
            entry = self._entries.get(name) or self.lookup_entry(name)
            for alias in aliases:
                taken = self._entries.get(alias)
                if taken is not None and taken.value is not entry.value:
                    raise (self._duplicate(alias, taken) if self._duplicate is not None else
                           self._error(f"{self.noun} {alias!r} is already registered "
                                       f"(by {taken.origin})"))
                self._set(alias, Entry(alias, entry.value, entry.primary, entry.source,
                                       entry.builtin))

    def unregister(self, name: str) -> T | None:
        """Remove *name* (no error when absent); returns what was registered."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return None
            self._set(name, None)
            return entry.value

    def pop(self, name: str, default: Any = None) -> T | Any:
        """Remove *name*; returns its value, or *default* when it was absent."""
        with self._lock:
            if name not in self._entries:
                return default
            return self.unregister(name)

    def _set(self, name: str, entry: Entry[T] | None) -> None:
        old = self._values.get(name)
        if entry is None:
            self._entries.pop(name, None)
            self._values.pop(name, None)
        else:
            self._entries[name] = entry
            self._values[name] = entry.value
        for listener in list(self._listeners):
            listener(name, old, None if entry is None else entry.value)

    # -- lookup -------------------------------------------------------------------
    def get(self, name: str, default: Any = None) -> T | Any:
        """The value of *name* (loading the built-ins on a miss), else *default*."""
        value = self._values.get(name, _NOTHING)
        if value is _NOTHING and self.load_builtins():
            value = self._values.get(name, _NOTHING)
        return default if value is _NOTHING else value

    def lookup(self, name: str) -> T:
        """The value of *name*; a miss raises the registry's error with a did-you-mean."""
        value = self.get(name, _NOTHING)
        if value is _NOTHING:
            raise self.unknown_error(name)
        return value

    __getitem__ = lookup

    def lookup_entry(self, name: str) -> Entry[T]:
        """The registration record of *name*; a miss raises like :meth:`lookup`."""
        self.lookup(name)
        return self._entries[name]

    def entry(self, name: str) -> Entry[T] | None:
        """The registration record of *name* (no built-in loading), or None."""
        return self._entries.get(name)

    def __contains__(self, name: object) -> bool:
        if name in self._values:
            return True
        return self.load_builtins() and name in self._values

    def unknown_error(self, name: str) -> Exception:
        """The registry's error for an unknown *name*."""
        if self._unknown is not None:
            return self._unknown(name)
        hint = self.did_you_mean(name)
        return self._error(f"unknown {self.noun} {name!r}{hint}; known {self.kind}: "
                           f"{', '.join(sorted(self._values)) or 'none'}")

    def suggest(self, name: str, cutoff: float = 0.6) -> str | None:
        """The registered name closest to *name* (same letters in another case first)."""
        names = list(self._values)
        lower = {n.lower(): n for n in names}
        if name.lower() in lower:
            return lower[name.lower()]
        close = difflib.get_close_matches(name, names, n=1, cutoff=cutoff)
        return close[0] if close else None

    def did_you_mean(self, name: str) -> str:
        """`` (did you mean 'x'?)`` or the empty string."""
        close = self.suggest(name)
        return f" (did you mean {close!r}?)" if close else ""

    # -- iteration (loads the built-ins) ------------------------------------------
    def __iter__(self) -> Iterator[str]:
        self.load_builtins()
        return iter(list(self._values))

    def __len__(self) -> int:
        self.load_builtins()
        return len(self._values)

    def names(self) -> list[str]:
        return list(self)

    def items(self, *, load: bool = True) -> list[tuple[str, T]]:
        """``(name, value)`` pairs; ``load=False`` reads what is registered so far."""
        if load:
            self.load_builtins()
        return list(self._values.items())

    def values(self) -> list[T]:
        return [v for _, v in self.items()]

    def as_dict(self) -> dict[str, T]:
        return dict(self.items())

    def describe(self, name: str) -> list[str]:
        """Report lines about *name* (empty without a ``describe`` function)."""
        value = self._values.get(name)
        if self._describe is None or value is None:
            return []
        return self._describe(name, value)

    # -- lazy built-ins -----------------------------------------------------------
    @property
    def builtins_loaded(self) -> bool:
        return self._loaded

    def load_builtins(self) -> bool:
        """Import the built-in modules once; True when that registered something new.

        Reentrant calls (a built-in module looking something up while the
        built-ins are being imported) return False at once.  A failed import
        leaves the registry unloaded, so the next lookup retries it.
        """
        if self._loaded or self._loading:
            return False
        with self._lock:
            if self._loaded or self._loading:
                return False
            self._loading = True
            try:
                for module in builtin_modules(self._builtins):
                    importlib.import_module(module)
                self._loaded = True
            finally:
                self._loading = False
            return True

    # -- listeners ----------------------------------------------------------------
    def subscribe(self, listener: Callable[[str, T | None, T | None], None]) -> None:
        """Call ``listener(name, old value or None, new value or None)`` on every change."""
        self._listeners.append(listener)

    # -- snapshot / diff / restore ------------------------------------------------
    def snapshot(self) -> Snapshot[T]:
        """The current content (built-ins not loaded are not loaded by this)."""
        with self._lock:
            entries = dict(self._entries)
            return Snapshot(self, entries, {n: self._state(e.value) for n, e in entries.items()})

    def baseline(self) -> Snapshot[T]:
        """The built-in entries only: the state before anything else registered."""
        with self._lock:
            entries = {n: e for n, e in self._entries.items() if e.builtin}
            return Snapshot(self, entries, {n: self._state(e.value) for n, e in entries.items()})

    @staticmethod
    def _state(value: Any) -> Any:
        return value.registry_state() if _revertible(value) else None

    def changes_since(self, snap: Snapshot[T]) -> list[Change[T]]:
        """Every entry added, replaced, removed or (for a :class:`Revertible`) grown."""
        if snap.registry is not self:
            raise ValueError(f"snapshot of {snap.registry!r} given to {self!r}")
        out: list[Change[T]] = []
        with self._lock:
            now = dict(self._entries)
            for name, entry in now.items():
                old = snap.entries.get(name)
                if old is not entry or not same_token(snap.states.get(name),
                                                       self._state(entry.value)):
                    out.append(Change(self, name, old, entry, snap.states.get(name)))
            for name, old in snap.entries.items():
                if name not in now:
                    out.append(Change(self, name, old, None, snap.states.get(name)))
        return out

    def revert(self, changes: Iterable[Change[T]]) -> None:
        """Undo *changes* (newest first): each name gets its earlier entry and state back."""
        with self._lock:
            for change in reversed(list(changes)):
                if change.registry is not self:
                    raise ValueError(f"a change of {change.registry!r} given to {self!r}")
                if change.before is None:
                    if change.name in self._entries:
                        self._set(change.name, None)
                    continue
                if self._entries.get(change.name) is not change.before:
                    self._set(change.name, change.before)
                if _revertible(change.before.value):
                    change.before.value.restore_registry_state(change.before_state)

    def restore(self, snap: Snapshot[T]) -> None:
        """Bring the registry back to *snap* exactly."""
        self.revert(self.changes_since(snap))
