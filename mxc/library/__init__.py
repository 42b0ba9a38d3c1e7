"""Extension libraries: Python modules that add operators, partitioners and passes.

This is mxc's counterpart of MXNet's ``mx.library.load``.  An MXNet extension
library is a compiled ``.so`` exporting ``initialize`` and ``REGISTER_OP`` /
``REGISTER_PARTITIONER`` / ``REGISTER_PASS`` tables; an mxc extension library
is a Python file (``my_ops.py``) or package directory (``my_ext/`` with an
``__init__.py``) that registers its components with mxc's ordinary
registration functions while it is imported or inside its ``initialize``::

    # my_ops.py
    import mxc

    @mxc.register_custom_op("my_gemm")
    class MyGemm(mxc.CustomOp):
        ...

    def initialize(version):          # optional; version is mxc.library.version()
        return version >= 100         # False (or raising) refuses the library

    >>> rec = mxc.library.load("my_ops.py")
    Found 1 operators in library
        Op[0] my_gemm
    Found 0 partitioners in library
    Found 0 graph passes in library

What :func:`load` does, in order:

1. validates the path before running any code (it exists; it is a ``.py``
   file or a directory with ``__init__.py``) and raises
   :class:`~mxc.errors.ExtensionError` otherwise;
2. returns the existing record if that file was loaded before (loading twice
   is a no-op);
3. imports it under a unique module name (``_mxc_ext_<stem>_<hash>``);
4. calls ``initialize(version)`` when the module defines it;
5. records every operator, partitioner (subgraph backend) and graph pass that
   appeared in mxc's registries during steps 3-4.  If the import raises, or
   ``initialize`` raises or returns ``False``, everything registered during
   the attempt is removed again and the error names the library.

Extensions installed with pip advertise themselves in the entry-point group
``mxc.extensions`` and are loaded by :func:`load_entry_points` (explicitly;
:func:`ensure_entry_points_loaded` is the run-once form meant for a registry
to call on its first miss).

Errors raised *inside* extension code at run time (an operator's
``forward``, a partitioner's ``supported_ops``, a pass) are reported with
:func:`guard`, which turns any exception into an
:class:`~mxc.errors.ExtensionError` naming the extension, the function and
the node, and keeps the extension's own message and traceback (``__cause__``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any, Callable

from ..errors import ExtensionError

__all__ = ["load", "loaded", "unload", "load_entry_points", "ensure_entry_points_loaded",
           "guard", "extension_error", "extension_of", "current_library", "version",
           "track_registry", "ExtensionLibrary", "ENTRY_POINT_GROUP", "MISSING"]

#: The entry-point group pip-installed extensions register under.
ENTRY_POINT_GROUP = "mxc.extensions"

# ---------------------------------------------------------------------------
# version
# ---------------------------------------------------------------------------
def version() -> int:
    """mxc's version as the integer passed to an extension's ``initialize``.

    Encoded as MXNet encodes ``MXNET_VERSION`` (1.9.1 -> 10901):
    ``major * 10000 + minor * 100 + patch``, so mxc 0.1.0 is ``100``.  An
    extension compares it with the oldest mxc it supports
    (``return version >= 100``).
    """
    from .. import __version__
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", __version__)
    if m is None:  # pragma: no cover - our own version string is well formed
        raise ExtensionError(f"cannot encode mxc version {__version__!r} as an integer")
    major, minor, patch = (int(g or 0) for g in m.groups())
    return major * 10000 + minor * 100 + patch


# ---------------------------------------------------------------------------
# errors raised inside extension code, and the loaded-library records: in
# mxc.compiler.extension_guard (the compiler uses them); the library record and
# the registry tracking: in mxc.library.registrations; all re-exported here
# ---------------------------------------------------------------------------
from ..compiler.extension_guard import (  # noqa: E402,F401
    RECORDS, current_library, extension_error, extension_of, guard, loaded)
from .registrations import (  # noqa: E402,F401
    MISSING, ExtensionLibrary, track_registry)
from . import registrations as _registrations  # noqa: E402
from .transaction import ExtensionTransaction, forget_modules  # noqa: E402


# ---------------------------------------------------------------------------
# load from a path
# ---------------------------------------------------------------------------
def _check_path(path: Any) -> Path:
    """Validate *path* without running anything; returns the file or package dir."""
    if not isinstance(path, (str, os.PathLike)):
        raise ExtensionError(f"load path must be a str or os.PathLike, got "
                             f"{type(path).__name__}")
    p = Path(os.path.expanduser(os.fspath(path)))
    if not p.exists():
        raise ExtensionError(f"load path {os.fspath(path)} does NOT exist")
    p = p.resolve()
    if p.is_dir():
        if not (p / "__init__.py").is_file():
            raise ExtensionError(f"load path {p} is a directory without __init__.py; an mxc "
                                 f"extension library is a .py file or a Python package "
                                 f"directory")
        return p
    if p.name == "__init__.py":
        return p.parent
    if p.suffix == ".pyd":
        raise ExtensionError(f"load path {p} is a compiled Python module; mxc loads Python "
                             f"extensions from .py files or package directories and MXNet "
                             f"extension libraries from .so/.dll/.dylib files")
    if p.suffix != ".py":
        raise ExtensionError(f"load path {p} is NOT an extension library (expected a .py file "
                             f"or a package directory with __init__.py)")
    if not p.is_file():
        raise ExtensionError(f"load path {p} is not a regular file")
    return p


def _module_name(p: Path) -> str:
    stem = re.sub(r"\W", "_", p.stem if p.is_file() else p.name) or "lib"
    digest = hashlib.sha1(str(p).encode("utf-8")).hexdigest()[:8]
    return f"_mxc_ext_{stem}_{digest}"


def load(path: str | os.PathLike, verbose: bool = True, *, mxnet_version: int | None = None,
         lib_api_versions: Any = None) -> ExtensionLibrary:
    """Load an extension library and register what it provides.

    Parameters
    ----------
    path:
        A ``.py`` file or a package directory (with ``__init__.py``), or a
        compiled MXNet extension library (``.so``/``.dll``/``.dylib`` built
        against ``lib_api.h``, see :mod:`mxc.library.native`); relative paths
        are taken from the current directory.
    verbose:
        True (the default, as in MXNet) prints what was found: ``Found 2
        operators in library`` followed by one line per component (on
        stderr for a compiled library, as MXNet logs it).
    mxnet_version, lib_api_versions:
        Compiled libraries only: the version ``initialize`` receives
        (default 10901, MXNet 1.9.1) and the lib_api versions accepted
        (default 7, 8, 10 and 11).

    Returns
    -------
    ExtensionLibrary
        The record of the library; loading the same path again returns the
        same record without running anything.

    Raises
    ------
    ExtensionError
        The path does not exist or is not a Python file/package; importing
        the module raised; ``initialize`` raised or returned ``False`` (the
        library is refused and nothing it registered is kept).
    """
    if isinstance(path, (str, os.PathLike)):
        from .native.loader import is_native_path, load_native
        if is_native_path(path):
            from .native.abi import MXNET_VERSION
            return load_native(path, verbose, mxnet_version=mxnet_version or MXNET_VERSION,
                               lib_api_versions=lib_api_versions)
    p = _check_path(path)
    key = str(p)
    with RECORDS.lock:
        existing = RECORDS.get(key)
        if existing is not None:
            return existing
        if RECORDS.is_loading(key):
            raise ExtensionError(f"extension library {p} loads itself while it is being "
                                 f"loaded")
        module_name = _module_name(p)
        init_file = p / "__init__.py" if p.is_dir() else p

        def importer() -> types.ModuleType:
            spec = importlib.util.spec_from_file_location(
                module_name, init_file,
                submodule_search_locations=[str(p)] if p.is_dir() else None)
            if spec is None or spec.loader is None:  # pragma: no cover - .py always has one
                raise ImportError(f"no import spec for {init_file}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return module

        display = p.stem if p.is_file() else p.name
        record = ExtensionLibrary(name=display, path=p, module_name=module_name, _key=key)
        return _load(record, importer, verbose, where=str(p))


def _load(record: ExtensionLibrary, importer: Callable[[], Any], verbose: bool,
          where: str) -> ExtensionLibrary:
    with ExtensionTransaction(record):
        try:
            obj = importer()
        except Exception as exc:
            raise ExtensionError(f"extension library {record.name!r} ({where}) failed to "
                                 f"import: {type(exc).__name__}: {exc}") from exc
        module, init = _module_and_initialize(obj, record, where)
        record.module = module
        custom_name = getattr(module, "EXTENSION_NAME", None) if module is not None else None
        if isinstance(custom_name, str) and custom_name:
            record.name = custom_name
        if init is not None:
            _initialize(init, record, where)
    if verbose:
        print(_registrations.report(record), flush=True)
    return record


def _module_and_initialize(obj: Any, record: ExtensionLibrary, where: str):
    if isinstance(obj, types.ModuleType):
        init = getattr(obj, "initialize", None)
        if init is not None and not callable(init):
            raise ExtensionError(f"extension library {record.name!r} ({where}): 'initialize' "
                                 f"is {type(init).__name__}, not a function")
        return obj, init
    if callable(obj):  # an entry point naming the initialize function itself
        return sys.modules.get(getattr(obj, "__module__", ""), None), obj
    raise ExtensionError(f"extension {record.name!r} ({where}) names a "
                         f"{type(obj).__name__}; an entry point must name a module or its "
                         f"initialize function")


def _initialize(init: Callable, record: ExtensionLibrary, where: str) -> None:
    v = version()
    try:
        ok = init(v)
    except Exception as exc:
        raise ExtensionError(f"extension library {record.name!r} ({where}) failed to "
                             f"initialize: initialize({v}) raised {type(exc).__name__}: "
                             f"{exc}") from exc
    if ok is False or (type(ok) is int and ok == 0):
        from .. import __version__
        raise ExtensionError(f"extension library {record.name!r} ({where}) refused to load: "
                             f"initialize({v}) returned {ok!r} (mxc {__version__} is version "
                             f"{v}); nothing it registered was kept")


def unload(library: ExtensionLibrary | str | os.PathLike) -> None:
    """Undo :func:`load`: remove what the library registered and forget it.

    MXNet cannot unload a library; mxc can, which is mostly useful in tests
    and interactive sessions.  Registrations the library replaced (with
    ``override=True``) are restored.  *library* is a record, a path, or a
    library name.
    """
    with RECORDS.lock:
        record = _find(library)
        _registrations.undo(record._changes)
        forget_modules(record.module_name)
        RECORDS.pop(record._key)


def _find(library: Any) -> ExtensionLibrary:
    if isinstance(library, ExtensionLibrary):
        if RECORDS.get(library._key) is library:
            return library
        raise ExtensionError(f"extension library {library.name!r} is not loaded")
    if isinstance(library, (str, os.PathLike)):
        text = os.fspath(library)
        for rec in RECORDS.values():
            if rec.name == text:
                return rec
        p = Path(text).expanduser()
        if p.exists():
            p = p.resolve()
            key = str(p.parent if p.name == "__init__.py" else p)
            found = RECORDS.get(key)
            if found is not None:
                return found
    known = ", ".join(repr(r.name) for r in RECORDS.values()) or "none"
    raise ExtensionError(f"no loaded extension library matches {library!r}; loaded: {known}")


# ---------------------------------------------------------------------------
# entry points (pip-installed extensions)
# ---------------------------------------------------------------------------
def load_entry_points(group: str = ENTRY_POINT_GROUP, *, verbose: bool = False,
                      strict: bool = False) -> list[ExtensionLibrary]:
    """Load every extension advertised in entry-point group *group*.

    A distribution declares its extension in ``pyproject.toml``::

        [project.entry-points."mxc.extensions"]
        my_ext = "my_package.mxc_ext"              # a module (its initialize is called)
        other  = "other_pkg.ext:initialize"        # or the initialize function itself

    Each entry point is loaded once per process (later calls return the same
    records).  mxc never runs this by itself at import time: call it when
    you want installed extensions, or use :func:`ensure_entry_points_loaded`.

    Parameters
    ----------
    verbose:
        Print the ``Found N operators ...`` report for each library.
    strict:
        False (default): an extension that fails to load is skipped with a
        :class:`RuntimeWarning` naming it; True: its :class:`ExtensionError`
        is raised.

    Returns
    -------
    list[ExtensionLibrary]
        The records of the entry points that are loaded, in discovery order.
    """
    records: list[ExtensionLibrary] = []
    for ep in importlib.metadata.entry_points(group=group):
        key = f"entry point {group}:{ep.name}={ep.value}"
        with RECORDS.lock:
            existing = RECORDS.get(key)
            if existing is not None:
                records.append(existing)
                continue
            dist = getattr(ep, "dist", None)
            record = ExtensionLibrary(
                name=ep.name, path=None, module_name=ep.value.split(":")[0].strip(),
                source=f"entry point {group}:{ep.name}",
                distribution=getattr(dist, "name", None) if dist is not None else None,
                _key=key)
            where = f"entry point {ep.name} = {ep.value!r}" + (
                f" of {record.distribution}" if record.distribution else "")

            def importer(ep=ep):
                return ep.load()

            try:
                record = _load(record, importer, verbose, where=where)
            except ExtensionError as exc:
                if strict:
                    raise
                warnings.warn(f"skipping mxc extension: {exc}", RuntimeWarning, stacklevel=2)
                continue
            module = record.module
            file = getattr(module, "__file__", None) if module is not None else None
            if file:
                f = Path(file)
                record.path = f.parent if f.name == "__init__.py" else f
            records.append(record)
    return records


_ENTRY_POINTS_DONE = False


def ensure_entry_points_loaded() -> bool:
    """Run :func:`load_entry_points` once per process (quietly, non-strict).

    Returns True the first time (when it ran), False afterwards.  Meant to
    be called lazily, e.g. by a registry the first time a name is missing,
    so installed extensions cost nothing until they may be needed.
    """
    global _ENTRY_POINTS_DONE
    with RECORDS.lock:
        if _ENTRY_POINTS_DONE:
            return False
        _ENTRY_POINTS_DONE = True
    load_entry_points()
    return True
