"""Small helpers shared across mxc (no dependencies beyond the stdlib)."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import resource
import shutil
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Iterator


#: what ``-o -`` means: standard output (as mlir-opt and most Unix tools)
STDOUT = "-"
_TMP_SUFFIX = ".tmp"


def is_stdout(path: str | os.PathLike | None) -> bool:
    """``-`` (and ``/dev/stdout``, written through this process's own descriptor 1)."""
    return path is not None and os.fspath(path) in (STDOUT, "/dev/stdout")


def check_output_path(path: str | os.PathLike, what: str = "output") -> None:
    """Refuse, before any work starts, an output path that cannot be written.

    ``-`` (standard output) and existing non-regular files (``/dev/stdout``, a
    FIFO) are fine; otherwise the directory must exist and be writable, and
    the path must not be a directory.  The error names the directory the user
    gave, never a temporary file.
    """
    if is_stdout(path):
        return
    target = Path(path)
    if target.exists() and not target.is_dir() and not target.is_file():
        return  # a device or FIFO: written in place
    from .errors import OutputError
    parent = target.parent
    if target.is_dir():
        raise OutputError(f"{what} {path}: is a directory; give a file name")
    if not parent.exists():
        raise OutputError(f"{what} {path}: directory {str(parent)!r} does not exist; create it "
                          f"first")
    if not parent.is_dir():
        raise OutputError(f"{what} {path}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {path}: directory {str(parent)!r} is not writable")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def clean_stale(directory: str | os.PathLike, pattern: str, *, min_age_s: float = 60.0) -> int:
    """Remove files/dirs in *directory* matching *pattern* whose owner process is gone.

    Temporary names carry the writer's pid as their second-to-last dotted or
    dashed field (``.NAME.PID.HEX.tmp``, ``mxc-lib-PID-XXXX``), so what a killed
    run (SIGKILL, a crash inside dlopen) left behind is recognised and removed
    by the next run.  Entries younger than *min_age_s* are kept: a process in
    another PID namespace sharing the directory may still be using them.
    Returns how many were removed.
    """
    removed = 0
    try:
        candidates = list(Path(directory).glob(pattern))
    except OSError:
        return 0
    now = time.time()
    for p in candidates:
        m = re.search(r"[.-](\d+)[.-][0-9a-zA-Z_]+(?:\.tmp)?$", p.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            if now - p.lstat().st_mtime < min_age_s:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def _temp_beside(target: Path, mode: int | None) -> tuple[Path, int]:
    clean_stale(target.parent, f".{glob.escape(target.name)}.*{_TMP_SUFFIX}")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}{_TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    if mode is not None:
        os.fchmod(fd, mode)
    return tmp, fd


def _in_place(path: str | os.PathLike) -> bool:
    """True for paths written directly: standard output, devices, FIFOs, anything under
    ``/dev`` or ``/proc`` (a rename there would replace a device node or a link)."""
    if is_stdout(path) or os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """Open *path* for binary writing so readers never see a partial file.

    Writes go to a temporary file beside *path* (created with the permissions
    ``open()`` would give, or *mode*), which is flushed to disk and renamed over
    *path* when the block exits normally.  On any error, Ctrl-C included, the
    temporary file is removed and *path* keeps its previous content.
    ``-`` is standard output, and an existing device or FIFO (``/dev/stdout``)
    is written in place: atomic replacement applies to regular files only.
    """
    if _in_place(path):
        if is_stdout(path):
            out = sys.stdout.buffer
            yield out
            out.flush()
        else:
            with open(path, "wb") as fh:
                yield fh
        return
    check_output_path(path)
    target = Path(path)
    tmp, fd = _temp_beside(target, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class OutputSet:
    """Several output files that change together (``opt -o J --params-out P``).

    :meth:`add` only records the content; :meth:`commit` first writes every
    file to its temporary (fsynced), then renames them all with SIGINT and
    SIGTERM held back, so an interrupt leaves either every old file or every
    new one.  Temporaries of a killed run are removed by the next one
    (:func:`clean_stale`).  Standard output and devices are written last, in
    place.
    """

    def __init__(self) -> None:
        self._items: list[tuple[str | os.PathLike, bytes, int | None]] = []

    def add(self, path: str | os.PathLike, data: bytes | str, *, mode: int | None = None
            ) -> None:
        check_output_path(path)
        self._items.append((path, data.encode("utf-8") if isinstance(data, str) else data, mode))

    def commit(self) -> None:
        staged: list[tuple[Path, Path]] = []
        direct = []
        try:
            for path, data, mode in self._items:
                if _in_place(path):
                    direct.append((path, data))
                    continue
                target = Path(path)
                tmp, fd = _temp_beside(target, mode)
                staged.append((tmp, target))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            with _signals_held():
                for tmp, target in staged:
                    os.replace(tmp, target)
        except BaseException:
            for tmp, _ in staged:
                tmp.unlink(missing_ok=True)
            raise
        for path, data in direct:
            with atomic_open(path) as fh:
                fh.write(data)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    sigs = {signal.SIGINT, signal.SIGTERM}
    main = threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs) if main else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def physical_memory_bytes() -> int:
    """Total RAM of this machine (a generous fallback where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo(field: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _vm_size() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def allocation_limits() -> dict[str, int]:
    """What this process may still allocate, by source (bytes; sources that apply only).

    * ``address space``: ``RLIMIT_AS`` (``ulimit -v``) minus the current virtual size;
    * ``cgroup``: the container's memory limit (cgroup v2 ``memory.max`` or v1
      ``memory.limit_in_bytes``) minus its current usage;
    * ``available memory``: the kernel's ``MemAvailable`` estimate.

    Physical RAM is only the fallback when none of these can be read.
    """
    limits: dict[str, int] = {}
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits["address space"] = max(soft - _vm_size(), 0)
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)
        if limit is not None and limit < 1 << 60:
            limits["cgroup"] = max(limit - (_read_int(usage_file) or 0), 0)
            break
    available = _meminfo("MemAvailable")
    if available is not None:
        limits["available memory"] = available
    if not limits:
        limits["physical memory"] = physical_memory_bytes()
    return limits


def allocatable_bytes() -> tuple[int, str]:
    """The smallest of :func:`allocation_limits` and its source."""
    limits = allocation_limits()
    source = min(limits, key=limits.__getitem__)
    return limits[source], source


def checked_nbytes(shape, itemsize: int, what: str) -> int:
    """Bytes an array of *shape* needs; refuses more than this process may allocate.

    Declared sizes come from files a user may not trust (``__shape__``,
    ``_zeros(shape=...)``): check before allocating rather than after, against
    the address-space limit, the cgroup limit and available memory (not the
    machine's RAM, which a container or ``ulimit -v`` may never let us use).
    """
    n = itemsize
    for d in shape:
        n *= int(d)
    from .errors import ExecutionError
    if any(int(d) < 0 for d in shape):
        raise ExecutionError(f"{what}: shape {tuple(shape)} has a negative dimension")
    if n > (64 << 20):  # small allocations are not worth reading /proc for
        limit, source = allocatable_bytes()
        if n > limit:
            raise ExecutionError(f"{what}: shape {tuple(shape)} needs {n:,} bytes, more than "
                                 f"this process may allocate ({limit:,} bytes: {source})")
    return n


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int | None = None
                       ) -> None:
    """Write *data* to *path* atomically (see :func:`atomic_open`)."""
    with atomic_open(path, mode=mode) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
