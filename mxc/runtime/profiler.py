"""Per-kernel times of a session, as tvmc's profiler prints them.

:func:`profile_kernels` runs a session a few times with an instrument on
the Relax VM (TVM's hook called before and after every call the VM makes:
each compiled kernel and each VM builtin), adds the host nodes' times from
:meth:`Session.run`'s step profile, and returns one row per kernel or host
node, sorted by total time.  Warm-up runs are not counted.  The VM is a
fresh one used only for profiling, so the session's own stays uninstrumented.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping

from . import _tvm


@dataclass(frozen=True)
class KernelTime:
    name: str          # kernel symbol, host node name, or "VM builtins"
    kind: str          # "kernel", "host" or "vm"
    calls: int         # per run
    seconds: float     # per run, summed over its calls


@dataclass(frozen=True)
class KernelProfile:
    rows: tuple[KernelTime, ...]
    runs: int
    total: float       # wall time per run, mean
    threads: int | None = None  # CPU threads of the compiled kernels

    def __str__(self) -> str:
        width = max([len(r.name) for r in self.rows] + [6])
        head = (f"{'name':<{width}}  {'kind':<6}  {'calls':>5}  {'ms/run':>10}  {'%':>6}\n")
        whole = sum(r.seconds for r in self.rows) or 1.0
        body = "\n".join(f"{r.name:<{width}}  {r.kind:<6}  {r.calls:>5}  "
                         f"{r.seconds * 1e3:>10.4f}  {100 * r.seconds / whole:>6.1f}"
                         for r in self.rows)
        return (head + body + f"\n{'total (wall, per run)':<{width}}  {'':<6}  {'':>5}  "
                f"{self.total * 1e3:>10.4f}\n({self.runs} run(s) after warm-up"
                + (f", {self.threads} thread(s)" if self.threads else "") + ")")


def profile_kernels(session, feeds: Mapping[str, Any], *, repeat: int = 10,
                    warmup: int = 1) -> KernelProfile:
    """Warm up, then run *repeat* times, timing every kernel and host node."""
    from .session import _ThreadState
    repeat = max(1, int(repeat))
    for _ in range(max(0, warmup)):
        session.run(feeds)
    if not session._has_regions:  # noqa: SLF001 - host nodes only
        return _rows({}, session, feeds, repeat)
    vm = _tvm.create_vm(session._module, session._kind, 0)  # noqa: SLF001
    open_calls: list[float] = []
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    sync_dev = None if session._cpu else session._dev  # noqa: SLF001

    def instrument(_func, name, before, _ret, *_args):
        if before:
            open_calls.append(time.perf_counter())
        else:
            if sync_dev is not None:
                _tvm.sync(sync_dev)
            entry = totals[str(name)]
            entry[0] += 1
            entry[1] += time.perf_counter() - open_calls.pop()
        return 0

    vm["set_instrument"](_tvm.ffi().convert(instrument))
    fns = {name: vm[name] for name in session._functions}  # noqa: SLF001
    saved = getattr(session._tls, "state", None)  # noqa: SLF001
    session._tls.state = _ThreadState(vm, fns)  # noqa: SLF001
    try:
        session.run(feeds)           # the fresh VM's first call (allocations) is a warm-up
        totals.clear()
        return _rows(totals, session, feeds, repeat)
    finally:
        session._tls.state = saved  # noqa: SLF001


def _rows(totals, session, feeds, repeat) -> KernelProfile:
    host: dict[str, list] = defaultdict(lambda: [0, 0.0])
    wall = 0.0
    for _ in range(repeat):
        _, prof = session.run(feeds, profile=True)
        wall += prof.total
        for step in prof.steps:
            if step.kind == "host":
                entry = host[f"{step.name} ({step.what})"]
                entry[0] += 1
                entry[1] += step.seconds
    rows = []
    builtin_calls, builtin_s = 0, 0.0
    for name, (calls, secs) in totals.items():
        if name.startswith("vm.builtin."):
            builtin_calls += calls
            builtin_s += secs
        else:
            rows.append(KernelTime(name, "kernel", calls // repeat, secs / repeat))
    if builtin_calls:
        rows.append(KernelTime("VM builtins", "vm", builtin_calls // repeat, builtin_s / repeat))
    rows += [KernelTime(n, "host", c // repeat, s / repeat) for n, (c, s) in host.items()]
    rows.sort(key=lambda r: -r.seconds)
    return KernelProfile(tuple(rows), repeat, wall / repeat, session.threads)
