"""C++ exceptions thrown inside a library become errors, not ``std::terminate``.

lib_api's trampolines are C++ functions with C linkage: an exception thrown
by the library's code (``std::stoi`` on a bad attribute, ``.at()`` on a
missing key) unwinds through them into the caller.  MXNet catches it in C++;
a ctypes caller cannot, and the process aborts.  So, when a C++ compiler is
available, every entry point is called through a small generated shim::

    extern "C" int mxcg_<name>_<sig>(char* err, int errlen, void* fn, <args>) {
      try { return fn(<args>); } catch (const std::exception& e) { <copy e.what()> } ...
    }

compiled once per machine into ``$MXC_CACHE_DIR`` (default
``~/.cache/mxc``).  The cache is not trusted: beside the shim lies a record
of the hashes of its source, of the compiler (path and version) and of the
library itself, and the shim is loaded only when the record matches, both
files belong to this user and nobody else may write them; otherwise it is
built again (a corrupt, foreign or planted file is never ``dlopen``-ed).  Both the shim and the library use the system's
libstdc++, so the exception is caught where it belongs.  Without a compiler
the entry points are called directly (a throwing library then aborts, as it
would in any C host); :func:`available` says which.  Crashes (a segfault in
the library) cannot be guarded in-process.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from ctypes import c_char_p, c_int, c_int64, c_size_t, c_uint, c_void_p
from pathlib import Path
from typing import Any, Callable

from ...errors import ExtensionError
from .signatures import SIGNATURES

__all__ = ["available", "guarded", "NativeException"]

log = logging.getLogger("mxc.library")


class NativeException(ExtensionError):
    """A C++ exception escaped from a library entry point (caught by the guard shim)."""


_C_TYPES = {c_int: "int", c_uint: "unsigned", c_int64: "long long", c_size_t: "size_t"}


def _ctype(t: Any) -> str:
    return _C_TYPES.get(t, "void*")  # pointers, strings, callbacks: all pointer-sized


def _symbol(name: str, restype: Any, argtypes: tuple) -> str:
    sig = _ctype(restype) if restype is not None else "void"
    sig += "(" + ",".join(_ctype(a) for a in argtypes) + ")"
    return f"mxcg_{name}_{hashlib.sha1(sig.encode()).hexdigest()[:8]}"


def _wrapper(name: str, restype: Any, argtypes: tuple) -> str:
    params = ", ".join(f"{_ctype(t)} a{i}" for i, t in enumerate(argtypes))
    args = ", ".join(f"a{i}" for i in range(len(argtypes)))
    ret = _ctype(restype) if restype is not None else "void"
    fn_t = f"{ret} (*)({', '.join(_ctype(t) for t in argtypes)})"
    call = f"return (int)(({fn_t})fn)({args});" if restype is not None else \
        f"(({fn_t})fn)({args}); return 0;"
    sep = ", " if params else ""
    return (f'extern "C" int {_symbol(name, restype, argtypes)}(char* err, int errlen, '
            f'void* fn{sep}{params}) {{\n'
            f'  try {{ {call} }}\n'
            f'  catch (const std::exception& e) {{ std::snprintf(err, errlen, "%s: %s", '
            f'typeid(e).name(), e.what()); }}\n'
            f'  catch (...) {{ std::snprintf(err, errlen, "a C++ exception that is not a '
            f'std::exception"); }}\n'
            f'  return 0;\n}}\n')


def _source() -> str:
    seen, parts = set(), ["#include <cstdio>\n#include <exception>\n#include <typeinfo>\n"
                          "#include <cstddef>\n"]
    for table in SIGNATURES.values():
        for name, sig in table.items():
            sym = _symbol(name, sig.restype, sig.argtypes)
            if sym not in seen:
                seen.add(sym)
                parts.append(_wrapper(name, sig.restype, sig.argtypes))
    return "\n".join(parts)


_LOCK = threading.Lock()
_SHIM: Any = None
_TRIED = False


def _compiler_identity(compiler: str) -> str:
    """The compiler's path and its ``--version`` banner: a new compiler means a new shim."""
    try:
        banner = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                timeout=60).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError):
        banner = []
    return f"{os.path.realpath(compiler)} {' '.join(banner)}".strip()


def _cache_dir() -> Path:
    return Path(os.environ.get("MXC_CACHE_DIR") or Path.home() / ".cache" / "mxc")


def _owned_file(path: Path) -> tuple[int, os.stat_result] | None:
    """An open descriptor of *path* when it is a regular file of this user that nobody
    else may write (no symlink followed), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    st = os.fstat(fd)
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        log.warning("the exception guard %s is not a file of this user that only it may "
                    "write (uid %d, mode %o); building it again", path, st.st_uid,
                    stat.S_IMODE(st.st_mode))
        os.close(fd)
        return None
    return fd, st


def _read_fd(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _verified(target: Path, record: Path, expect: dict) -> int | None:
    """A descriptor of *target* when it and the record beside it (*record*: the hashes of
    the shim's source, its compiler and the library) match *expect*, else None."""
    opened = _owned_file(record)
    if opened is None:
        return None
    try:
        doc = json.loads(_read_fd(opened[0]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    finally:
        os.close(opened[0])
    if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in expect.items()):
        log.warning("the record %s of the exception guard does not match this mxc and "
                    "compiler; building it again", record)
        return None
    opened = _owned_file(target)
    if opened is None:
        return None
    fd = opened[0]
    if hashlib.sha256(_read_fd(fd)).hexdigest() != doc.get("library_sha256"):
        log.warning("the exception guard %s does not match the sha256 recorded beside it; "
                    "building it again", target)
        os.close(fd)
        return None
    return fd


def _compile(compiler: str, src: str, target: Path, record: Path, expect: dict) -> None:
    cache = target.parent
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cc = Path(tmp) / "guard.cc"
        cc.write_text(src)
        out = Path(tmp) / target.name
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", str(cc), "-o", str(out)],
                       check=True, capture_output=True, timeout=300)
        os.chmod(out, 0o755)
        meta = Path(tmp) / record.name
        meta.write_text(json.dumps({**expect, "library_sha256":
                                    hashlib.sha256(out.read_bytes()).hexdigest()}))
        os.chmod(meta, 0o644)
        os.replace(out, target)
        os.replace(meta, record)


def _dlopen(fd: int, target: Path) -> Any:
    """``dlopen`` the very file that was verified (through its descriptor where the
    platform allows), so a swap after the check is not what gets loaded."""
    by_fd = f"/proc/self/fd/{fd}"
    try:
        return ctypes.CDLL(by_fd if os.path.exists(by_fd) else str(target))
    except OSError as exc:
        raise ExtensionError(f"the C++ exception guard {target} cannot be loaded ({exc}); "
                             f"delete it to have it built again, or set MXC_NO_GUARD=1")\
            from None
    finally:
        os.close(fd)


def _build() -> Any:
    """The guard shim: from the cache when it verifies (:func:`_verified`), else built."""
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if compiler is None or os.environ.get("MXC_NO_GUARD"):
        log.info("no C++ compiler: library entry points are called without the exception "
                 "guard")
        return None
    src = _source()
    expect = {"source_sha256": hashlib.sha256(src.encode()).hexdigest(),
              "compiler": _compiler_identity(compiler)}
    digest = hashlib.sha256(json.dumps(expect, sort_keys=True).encode()).hexdigest()[:16]
    target = _cache_dir() / f"libmxc_libapi_guard_{digest}.so"
    record = target.with_suffix(".json")
    fd = _verified(target, record, expect)
    if fd is None:
        try:
            _compile(compiler, src, target, record, expect)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("could not build the C++ exception guard (%s); library entry points "
                        "are called directly", exc)
            return None
        fd = _verified(target, record, expect)
        if fd is None:
            raise ExtensionError(f"the C++ exception guard {target} does not verify right "
                                 f"after it was built (another process writing "
                                 f"{target.parent}?); set MXC_NO_GUARD=1 to load libraries "
                                 f"without it")
    return _dlopen(fd, target)


def _shim() -> Any:
    global _SHIM, _TRIED
    if not _TRIED:
        with _LOCK:
            if not _TRIED:
                _SHIM = _build()
                _TRIED = True
    return _SHIM


def available() -> bool:
    """True when entry points are called through the exception guard."""
    return _shim() is not None


_ERR = threading.local()


def guarded(name: str, fn: Any, restype: Any, argtypes: tuple, where: str) -> Callable:
    """*fn* (a typed ctypes function) wrapped so a C++ exception raises :class:`NativeException`."""
    shim = _shim()
    if shim is None:
        return fn
    g = getattr(shim, _symbol(name, restype, argtypes))
    g.restype = c_int
    g.argtypes = [c_char_p, c_int, c_void_p, *argtypes]
    target = ctypes.cast(fn, c_void_p)

    def call(*args):
        buf = getattr(_ERR, "buf", None)
        if buf is None:
            buf = _ERR.buf = ctypes.create_string_buffer(1024)
        buf[0] = b"\0"
        result = g(buf, 1024, target, *args)
        if buf[0] != b"\0":
            raise NativeException(f"{where}: {name} threw a C++ exception: "
                                  f"{buf.value.decode('utf-8', 'replace')}")
        return result

    call.__name__ = name
    return call
