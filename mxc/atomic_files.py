"""Files written so that readers never see half of one: ``atomic_open`` and friends.

An artifact, a ``.params`` file or a drawing that a crash, a full disk or Ctrl-C
cut short must not be left behind looking valid, so every file mxc writes goes
to a temporary file beside its target and is renamed over it once complete
(:func:`atomic_open`, :func:`atomic_write_bytes`); files that must change
together (``opt -o J --params-out P``) are renamed together (:class:`OutputSet`).
Temporaries of a killed run are removed by the next one (:func:`clean_stale`).
The runtime, the frontend, the Symbol API, the backends and the CLI all write
files, so this module sits at the top of the package with no dependencies
beyond the stdlib (and :mod:`mxc.output_paths`: what ``-`` and a writable path mean).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Iterator

from .output_paths import check_output_path, is_stdout

__all__ = ["atomic_open", "atomic_write_bytes", "atomic_write_text", "OutputSet",
           "clean_stale"]

_TMP_SUFFIX = ".tmp"


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


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, mode: int | None = None
                       ) -> None:
    """Write *data* to *path* atomically (see :func:`atomic_open`)."""
    with atomic_open(path, mode=mode) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write *text* (UTF-8) to *path* atomically (see :func:`atomic_open`)."""
    atomic_write_bytes(path, text.encode("utf-8"))
