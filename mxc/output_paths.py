"""What an output path means: ``-`` is standard output, and a path is checked before work.

``mxc compile -o -``, ``mxc opt -o -`` and friends write to standard output as
mlir-opt and most Unix tools do, and a run that would fail to write its output
after minutes of compiling is refused before it starts (:func:`check_output_path`).
The CLI verbs use these directly, but so does :func:`mxc.atomic_files.atomic_open`,
which the runtime and the frontend use to write artifacts; so they live here,
at the top of the package, not in :mod:`mxc.cli` (nothing below the CLI may
import it).  Stdlib only.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STDOUT", "is_stdout", "check_output_path"]


#: what ``-o -`` means: standard output (as mlir-opt and most Unix tools)
STDOUT = "-"


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
