"""``mxc.library.load`` for compiled MXNet extension libraries (``.so``/``.dll``/``.dylib``).

What MXNet's ``MXLoadLib`` does, driven from Python with :mod:`ctypes`:

1. check the path (exists, a library file by name), refuse an ELF file
   shorter than its headers say (:mod:`.elf`: ``dlopen`` would die of SIGBUS)
   and ``dlopen`` it;
2. read ``_opVersion`` (through the exception guard, like every call) and pick the signature table of that lib_api version
   (:mod:`.abi`; versions 7, 8, 10 and 11), failing if an entry point is
   missing;
3. call ``initialize(10901)`` (MXNet 1.9.1's version number; libraries
   check ``version >= 10700`` or similar) -- a refusal is an error with the
   library's messages;
4. register its operators (:mod:`.ops`), partitioners (:mod:`.partitioners`)
   and graph passes (:mod:`.passes`) in mxc's registries, and print MXNet's
   verbose report (``Found 2 operators in library`` ...) on stderr.

Anything that fails after the library was opened undoes every registration
made during the attempt.  Loading a library again does what MXNet does: runs
``initialize`` again, prints the report again and registers its components
again (same names, same functions).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from ctypes import byref, c_char_p, c_int, c_void_p
from pathlib import Path

from ...errors import ExtensionError
from .abi import MXNET_VERSION, SUPPORTED_VERSIONS, Abi, read_messages
from .calls import OpEntry
from .elf import check_elf_extent
from .guard import guarded
from .handle import NativeLibrary, library_text, sha256_of
from .ops import make_custom_op
from .partitioners import read_partitioners, register_partitioners
from .passes import read_passes, register_passes

__all__ = ["NATIVE_SUFFIXES", "is_native_path", "open_library", "load_native", "op_entry"]

log = logging.getLogger("mxc.library")

#: File names MXNet accepts as libraries.
NATIVE_SUFFIXES = (".so", ".dll", ".dylib")

_OPEN: dict[str, NativeLibrary] = {}


def is_native_path(path) -> bool:
    return Path(os.fspath(path)).suffix in NATIVE_SUFFIXES


def op_entry(name: str) -> OpEntry | None:
    """The library entry of operator *name* if a compiled library registered it."""
    from ...compiler.ops.registry import get_op, has_op
    if not has_op(name):
        return None
    return getattr(getattr(get_op(name), "impl", None), "native", None)


def _opened(p: Path, lib_api_versions) -> NativeLibrary:
    where = f"extension library {p.name!r} ({p})"
    try:
        check_elf_extent(p)
    except OSError as exc:
        raise ExtensionError(f"Error loading library: '{p}'\n{exc}") from None
    try:
        cdll = ctypes.CDLL(str(p), mode=getattr(os, "RTLD_LOCAL", 0))
    except OSError as exc:
        raise ExtensionError(f"Error loading library: '{p}'\n{exc}") from None
    try:
        version_fn = cdll._opVersion
    except AttributeError:
        raise ExtensionError(f"{where} is not an MXNet extension library: it does not export "
                             f"_opVersion (lib_api.h's entry points)") from None
    version_fn.restype, version_fn.argtypes = c_int, []
    # the first call into the library already goes through the exception guard: a
    # throwing _opVersion is an error, as in MXNet, not std::terminate
    version = int(guarded("_opVersion", version_fn, c_int, (), where)())
    allowed = tuple(lib_api_versions) if lib_api_versions else SUPPORTED_VERSIONS
    if version not in allowed:
        if lib_api_versions and len(allowed) == 1:
            raise ExtensionError(f"Library version ({version}) does not match MXNet version "
                                 f"({allowed[0]})")
        raise ExtensionError(f"{where}: lib_api version {version} is not supported "
                             f"(supported: {', '.join(map(str, allowed))})")
    abi = Abi(cdll, version, where)
    return NativeLibrary(p, cdll, abi, sha256_of(p))


def open_library(path, lib_api_versions=None) -> NativeLibrary:
    """Validate *path* as MXNet does and open the library (once per file)."""
    text = os.fspath(path)
    p = Path(os.path.expanduser(text))
    if not p.exists():
        raise ExtensionError(f"load path {text} does NOT exist")
    if p.suffix not in NATIVE_SUFFIXES or not p.is_file():
        raise ExtensionError(f"load path {text} is NOT a library file")
    p = p.resolve()
    lib = _OPEN.get(str(p))
    if lib is None or lib.sha256 != sha256_of(p):
        lib = _opened(p, lib_api_versions)
        _OPEN[str(p)] = lib
    elif lib_api_versions and lib.version not in tuple(lib_api_versions):
        _opened(p, lib_api_versions)  # raises MXNet's mismatch error
    return lib


def _initialize(lib: NativeLibrary, mxnet_version: int) -> None:
    init = lib.abi.initialize
    before = len(read_messages(lib.abi))
    if not init(int(mxnet_version)):
        messages = read_messages(lib.abi)
        err = lib.fail(f"initialize({mxnet_version})", "Library failed to initialize")
        err.new_messages = messages[before:]
        raise err


def _read_ops(lib: NativeLibrary) -> list[OpEntry]:
    abi = lib.abi
    entries = []
    for i in range(abi._opRegSize()):
        name, is_sg = c_char_p(), c_int(0)
        ctx = [ctypes.POINTER(c_char_p)() for _ in range(3)]
        fps = [ctypes.POINTER(c_void_p)() for _ in range(3)]
        counts = [c_int(0) for _ in range(3)]
        hooks = [c_void_p() for _ in range(5)]
        abi._opRegGet(i, byref(name), byref(is_sg),
                      byref(ctx[0]), byref(fps[0]), byref(counts[0]),
                      byref(ctx[1]), byref(fps[1]), byref(counts[1]),
                      byref(ctx[2]), byref(fps[2]), byref(counts[2]),
                      *[byref(h) for h in hooks])
        op_name = library_text(name.value, lib.name, f"the name of operator {i}")
        entry = OpEntry(lib, op_name, bool(is_sg.value))
        for kind, c, f, n in zip(("forward", "backward", "create_op"), ctx, fps, counts):
            devices = [library_text(c[j], lib.name, f"operator {op_name!r} {kind} device {j}")
                       for j in range(n.value)]
            entry.contexts[kind] = devices
            for j, dev in enumerate(devices):
                if dev == "cpu":
                    setattr(entry, kind, f[j] or 0)
        (entry.parse, entry.infer_type, entry.infer_stype, entry.infer_shape,
         entry.mutate) = (h.value or 0 for h in hooks)
        entries.append(entry)
    return entries


def _report(ops, partitioners, passes) -> str:
    lines = [f"Found {len(ops)} operators in library"]
    for i, e in enumerate(ops):
        lines.append(f"\tOp[{i}] {e.name}")
        if e.is_subgraph_op:
            lines.append("\t\tisSubgraphOp")
    lines.append(f"Found {len(partitioners)} partitioners in library")
    for i, (pname, strategies) in enumerate(partitioners):
        lines.append(f"\tPartitioner[{i}] {pname}")
        for j, (sname, op, _) in enumerate(strategies):
            lines.append(f"\t\tStrategy[{j}] {sname} subgraphOp: '{op}'")
    lines.append(f"Found {len(passes)} graph passes in library")
    for i, (name, _) in enumerate(passes):
        lines.append(f"\tGraph Pass [{i}] {name}")
    return "\n".join(lines)


def _register_ops(entries: list[OpEntry], record) -> None:
    from ...compiler.custom_op import register_custom_op
    for entry in entries:
        if not (entry.forward or entry.create_op or entry.is_subgraph_op):
            log.warning("operator %r of %s has no CPU forward (contexts: %s); it is registered "
                        "for graph building, but mxc runs operators on the host, so running "
                        "it fails", entry.name, entry.lib.name, entry.contexts)
        if not entry.is_subgraph_op and not (entry.parse and entry.infer_shape):
            missing = "parseAttrs" if not entry.parse else "inferShape"
            raise ExtensionError(f"extension library {entry.lib.name!r}: operator "
                                 f"{entry.name!r} lacks {missing}, which every operator that "
                                 f"is not a subgraph operator must set")
        op = make_custom_op(entry)
        register_custom_op(entry.name, op, override=True)
        op.extension = record.name


def load_native(path, verbose: bool = True, *, mxnet_version: int = MXNET_VERSION,
                lib_api_versions=None):
    """Load a compiled library; returns its :class:`~mxc.library.ExtensionLibrary` record.

    *mxnet_version* is what ``initialize`` receives (MXNet's encoding,
    1.9.1 = 10901); *lib_api_versions* restricts the accepted ABI versions
    (``mxc.mxnet`` passes ``(11,)`` to refuse what MXNet 1.9.1 refuses).
    """
    from .. import registrations
    from ...compiler.extension_guard import RECORDS
    from ..transaction import ExtensionTransaction

    lib = open_library(path, lib_api_versions)
    key = f"native:{lib.path}"
    with RECORDS.lock:
        record = RECORDS.get(key) or registrations.ExtensionLibrary(
            name=lib.name, path=lib.path, module_name="", source="native", _key=key)
        record.native = lib
        with ExtensionTransaction(record) as tx:
            _initialize(lib, mxnet_version)
            ops = _read_ops(lib)
            partitioners = read_partitioners(lib)
            passes = read_passes(lib)
            _register_ops(ops, record)
            register_partitioners(partitioners)
            register_passes(passes)
            tx.registrations = {"operators": [e.name for e in ops],
                                "partitioners": [p for p, _ in partitioners],
                                "graph passes": [n for n, _ in passes]}
    if verbose:
        print(_report(ops, partitioners, passes), file=sys.stderr, flush=True)
    return record
