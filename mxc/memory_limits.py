"""How much memory this process may still allocate, and a size check against it.

Array shapes read from files a user may not trust (``__shape__``,
``_zeros(shape=...)``, an artifact's parameters) are checked before the array is
allocated, so a hostile or corrupt file gets a clear error instead of the OOM
killer.  The limit that matters is the smallest of the address-space limit, the
container's cgroup limit and the kernel's available-memory estimate, not the
machine's RAM (which ``ulimit -v`` or a container may never let us use).  The
compiler's interpreter, the Symbol API and the runtime all check sizes, so
this module sits at the top of the package.  Stdlib only.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

__all__ = ["physical_memory_bytes", "allocation_limits", "allocatable_bytes", "checked_nbytes"]


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
