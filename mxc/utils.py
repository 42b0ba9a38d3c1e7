"""Small helpers shared across mxc (no dependencies beyond the stdlib)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO, Iterator


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open *path* for binary writing so readers never see a partial file.

    Writes go to a temporary file beside *path* (created with the permissions
    ``open()`` would give), which is flushed to disk and renamed over *path*
    when the block exits normally.  On any error, Ctrl-C included, the
    temporary file is removed and *path* keeps its previous content.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def physical_memory_bytes() -> int:
    """Total RAM of this machine (a generous fallback where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def checked_nbytes(shape, itemsize: int, what: str) -> int:
    """Bytes an array of *shape* needs; refuses sizes larger than this machine's RAM.

    Declared sizes come from files a user may not trust (``__shape__``,
    ``_zeros(shape=...)``): check before allocating rather than after.
    """
    n = itemsize
    for d in shape:
        n *= int(d)
    if n > physical_memory_bytes():
        from .errors import ExecutionError
        raise ExecutionError(f"{what}: shape {tuple(shape)} needs {n:,} bytes, more than this "
                             f"machine's memory ({physical_memory_bytes():,} bytes)")
    return n


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write *data* to *path* atomically (see :func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
