"""How many CPU threads compiled code runs on.

TVM's runtime sizes its thread pool once per process, from ``TVM_NUM_THREADS``
or, when that is unset, from a guess at the number of *physical* cores that
halves the logical count: on a 2-core cloud VM it picks one thread and pins
the calling Python thread to core 0.  A user would get half the machine.

mxc therefore decides the pool size itself, before TVM first creates the
pool: every core this process may use, which is the smaller of its CPU
affinity mask and its cgroup CPU quota (a container limited to 1.5 CPUs gets
2 threads, one limited to 1 CPU gets 1).  An explicit ``TVM_NUM_THREADS``
(or ``OMP_NUM_THREADS``, which TVM also honours) always wins.  A session may
use fewer threads than the pool holds (``_tvm.use_threads``, ``Session(threads=)``,
``mxc run --threads``), never more.

This is the one place mxc writes ``os.environ`` (``TVM_NUM_THREADS`` and the two
below, once, under a lock, before TVM's library is loaded).  TVM 0.27 keeps one pool per calling thread,
created on first use with ``MaxConcurrency()`` workers: a thread-local override that
only ``runtime.config_threadpool`` *with an explicit CPU list* sets (which also pins
or re-binds every worker: an affinity policy mxc does not want to impose), else
``getenv("TVM_NUM_THREADS")``, else the physical-core guess above.  So no API sizes
the pools of threads mxc does not control (a user's thread pool calling
``Session.run``, TVM's constant folding at compile time, MetaSchedule's builder and
runner processes, which inherit only the environment); the variable does.

Two more of TVM's variables are set here when the user has not set them, for the
same reason (TVM reads them with ``getenv`` when a pool first starts):

* ``TVM_BIND_THREADS=0``: TVM otherwise pins worker *i* of *every* pool to core
  *i* (counted over the whole machine, not the process's affinity mask), so the
  pools of mxc's concurrent executors (:mod:`mxc.runtime.executors`) would all
  crowd onto the same first cores while the others idle;
* ``TVM_THREAD_POOL_SPIN_COUNT`` (:data:`SPIN_COUNT`): after every task a worker
  busy-waits this many ``sched_yield`` calls before sleeping; TVM's default of
  300,000 burns about 0.1-0.2 s of a core per worker after each call (far more on
  a loaded machine), an idle server's CPU.  Gaps between the kernels of one call
  are microseconds, well inside the shorter spin.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from pathlib import Path

from ..errors import ExecutionError

log = logging.getLogger(__name__)

#: environment variables TVM reads for its pool size, in the order it reads them
POOL_VARIABLES = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")
#: yields a TVM worker spins after a task before it sleeps (TVM's default: 300,000)
SPIN_COUNT = 20000
#: other pool settings mxc makes unless the environment already has them
POOL_DEFAULTS = {"TVM_BIND_THREADS": "0", "TVM_THREAD_POOL_SPIN_COUNT": str(SPIN_COUNT)}

_LOCK = threading.Lock()
_pool_size: int | None = None


def cgroup_cpu_limit(root: str | os.PathLike = "/sys/fs/cgroup") -> float | None:
    """The CPU quota of this process's cgroup in CPUs (``1.5``), or None when unlimited.

    Reads cgroup v2's ``cpu.max`` (``"150000 100000"`` or ``"max 100000"``) and
    falls back to v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``.
    """
    root = Path(root)
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
        if quota == "max":
            return None
        return int(quota) / int(period or 100000)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def allowed_cores() -> int:
    """The number of cores this process may run on: affinity mask, capped by the cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, max(1, math.ceil(limit)))
    return max(1, cores)


def configure_pool() -> int:
    """Fix the process's pool size before TVM creates its pool; returns it.

    Called by the runtime before it loads TVM's library.  When the user set
    ``TVM_NUM_THREADS``/``OMP_NUM_THREADS`` that value is kept; otherwise the
    pool gets :func:`allowed_cores` threads.  The variable is written once,
    under a lock, before any TVM thread exists (TVM reads it with ``getenv``
    when it first builds the pool).
    """
    global _pool_size
    with _LOCK:
        if _pool_size is None:
            for var in POOL_VARIABLES:
                value = os.environ.get(var, "").strip()
                if value.isdigit() and int(value) > 0:
                    _pool_size = int(value)
                    log.debug("thread pool: %d threads from %s", _pool_size, var)
                    break
            else:
                _pool_size = allowed_cores()
                os.environ["TVM_NUM_THREADS"] = str(_pool_size)
                log.debug("thread pool: %d threads (allowed cores)", _pool_size)
            for var, value in POOL_DEFAULTS.items():
                os.environ.setdefault(var, value)
        return _pool_size


def pool_size() -> int:
    """The number of threads compiled code may use in this process."""
    return configure_pool()


def check_threads(threads: int | None) -> int:
    """Validate a requested thread count: None means the whole pool."""
    size = pool_size()
    if threads is None:
        return size
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ExecutionError(f"threads must be a positive integer, not {threads!r}")
    if threads > size:
        log.warning("threads=%d exceeds the %d threads of this process's pool (set "
                    "TVM_NUM_THREADS before the first model loads to grow it); using %d",
                    threads, size, size)
        return size
    return threads
