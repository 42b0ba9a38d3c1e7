"""Per-kernel times of a session, as tvmc's profiler prints them.

:func:`profile_kernels` runs a session once with an instrument on a fresh
Relax VM (TVM's hook called before and after every call the VM makes) to
record each compiled kernel call and its arguments, then times every call
alone with TVM's C++ time evaluator on those arguments.  Timing inside the
hook distorts: the Python callback between kernels lets the thread pool's
workers sleep, and each parallel kernel then paid their wake-up (10-36 us a
kernel on a 0.6 ms mobilenet, whose hook-timed kernels summed to 0.78 ms).
Timed alone, a kernel runs with warm caches, so the uninstrumented wall time
minus the kernels and the host nodes (timed by :meth:`Session.run`'s step
profile) is reported as one row, "rest of the run": the VM's builtins and
allocation, and the weights and activations that come from memory in a real
run (ResNet-18: 1.6 of 11.8 ms).  The VM is a fresh one used only for
profiling, so the session's own stays uninstrumented.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping


#: the row of what the kernels timed alone and the host nodes leave of the wall time
REST = "rest of the run"


@dataclass(frozen=True)
class KernelTime:
    name: str          # kernel symbol, host node name, or REST
    kind: str          # "kernel", "host" or "vm"
    calls: int         # per run (the overhead row: VM builtin calls)
    seconds: float     # per run, summed over its calls


@dataclass(frozen=True)
class KernelProfile:
    rows: tuple[KernelTime, ...]
    runs: int
    total: float       # wall time per run, median, uninstrumented
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
                + (f", {self.threads} thread(s)" if self.threads else "") + "; kernels "
                "timed alone on their recorded inputs, warm; '" + REST + "': the VM's "
                "builtins (its calls column), allocation, memory traffic)")


def profile_kernels(session, feeds: Mapping[str, Any], *, repeat: int = 10,
                    warmup: int = 1, min_ms: float = 1.0) -> KernelProfile:
    """Warm up, record one run's kernel calls, then time each *repeat* times (the
    median of figures of at least *min_ms* each) and the whole run *repeat* times."""
    repeat = max(1, int(repeat))
    for _ in range(max(0, warmup)):
        session.run(feeds)
    if not session.regions:  # host nodes only
        return _rows({}, 0, session, feeds, repeat)
    # on the thread (an executor) and thread pool where the session's calls run
    return session.submit_call(_profile_regions, session, feeds, repeat, min_ms).result()


def _profile_regions(session, feeds: Mapping[str, Any], repeat: int,
                     min_ms: float) -> KernelProfile:
    calls: list[tuple[str, list]] = []
    builtins = [0]

    def instrument(_func, name, before, _ret, *args):
        if before:
            name = str(name)
            if name.startswith("vm.builtin."):
                builtins[0] += 1
            else:
                calls.append((name, list(args)))
        return 0

    with session.instrumented(instrument):
        session.run(feeds)           # the fresh VM's first call (allocations) is a warm-up
        calls.clear()
        builtins[0] = 0
        session.run(feeds)
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for name, args in calls:
        times = session.time_kernel(name, args, repeat=repeat, min_ms=min_ms)
        entry = totals[name]
        entry[0] += 1
        entry[1] += statistics.median(times)
    del calls
    return _rows(totals, builtins[0], session, feeds, repeat)


def _rows(kernels, builtin_calls, session, feeds, repeat) -> KernelProfile:
    host: dict[str, list] = defaultdict(lambda: [0, 0.0])
    walls = []
    for _ in range(repeat):
        _, prof = session.run(feeds, profile=True)
        walls.append(prof.total)
        for step in prof.steps:
            if step.kind == "host":
                entry = host[f"{step.name} ({step.what})"]
                entry[0] += 1
                entry[1] += step.seconds
    wall = statistics.median(walls)
    rows = [KernelTime(n, "kernel", c, s) for n, (c, s) in kernels.items()]
    rows += [KernelTime(n, "host", c // repeat, s / repeat) for n, (c, s) in host.items()]
    rest = wall - sum(r.seconds for r in rows)
    if kernels:
        rows.append(KernelTime(REST, "vm", builtin_calls, max(0.0, rest)))
    rows.sort(key=lambda r: -r.seconds)
    return KernelProfile(tuple(rows), repeat, wall, session.threads)
