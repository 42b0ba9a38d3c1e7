"""Resident memory of the current process (standard library only: the peers' runners use it).

``peak_rss_bytes()`` is the process's high-water mark: everything it has
held at once so far, the interpreter and the imported libraries included.
On Linux it is ``VmHWM`` of ``/proc/self/status``, not ``getrusage``'s
``ru_maxrss``: Linux carries ``ru_maxrss`` across ``fork``/``exec``, so a
subprocess of a harness holding 200 MiB would report at least 200 MiB
whatever it used itself.  ``current_rss_bytes()`` is the resident size now
(``/proc/self/statm``), taken after the imports to tell the libraries' share
from the model's.
"""

from __future__ import annotations

import os
import sys


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size so far, in bytes (None where unknown)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    value, unit = line.split()[1:3]
                    return int(value) * {"kB": 1024, "mB": 2 ** 20}.get(unit, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def current_rss_bytes() -> int | None:
    """The resident set size now, in bytes (Linux; None elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def memory_report() -> dict:
    """``{"peak_rss_bytes": ..., "rss_bytes": ...}`` for a runner's JSON."""
    return {"peak_rss_bytes": peak_rss_bytes(), "rss_bytes": current_rss_bytes()}


def fmt_bytes(n: int | float | None) -> str:
    """``123 MiB`` / ``1.4 GiB`` (``–`` for None)."""
    if n is None:
        return "–"
    mib = n / 2 ** 20
    if mib >= 1024:
        return f"{mib / 1024:.2f} GiB"
    return f"{mib:.0f} MiB" if mib >= 10 else f"{mib:.1f} MiB"
