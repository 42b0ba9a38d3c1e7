"""Tuning that never loses: re-measure each kernel's winner against mxc's default.

MetaSchedule keeps, per kernel, the candidate with the lowest measured time.
On a loaded machine one measurement is noisy, so the "best" record can be a
candidate that only got lucky -- a tuned build then runs *slower* than the
untuned one (resnet18 came out 1.12x slower that way).  After a kernel is
tuned, :func:`verify_task` measures its best record and mxc's default schedule
again, *interleaved* (A B B A ... over several rounds, with the runner
MetaSchedule measured them with) and keeps the tuned schedule only when the
median of the per-round ratios and the ratio of the medians both say it is
faster by at least :data:`KEEP_MARGIN`.  Otherwise the kernel keeps the default schedule.

The decision is a *verdict* stored beside the records in the database
directory (:data:`VERDICT_FILE`, keyed by the kernel's structural hash and
naming the record it judged).  The records themselves are left untouched
(they are honest measurements); what ``mxc compile --db`` applies is
:func:`applied_database`: every kernel's best record unless a verdict rejected
exactly that record -- then the kernel is not taken from the database and gets
its default schedule, as in an untuned build.  A later tuning run that finds
a new best record re-verifies it.

:func:`compare_models` is the whole-model check of ``mxc tune --check-model``:
untuned and tuned builds run interleaved, medians reported.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..options import KEEP_MARGIN  # defined with TuneOptions, whose default it is

log = logging.getLogger(__name__)

#: interleaved measurement rounds per candidate when verifying a kernel
VERIFY_ROUNDS = 5
#: the verdicts of a database directory: JSON ``{kernel hash: verdict}``
VERDICT_FILE = "mxc-verdicts.json"

#: ``measure(modules, rounds)``: per module, its run time (seconds) in each round,
#: the modules measured alternately so that load changes hit them all alike
Measure = Callable[[Sequence[Any], int], list[list[float]]]


@dataclass
class Verdict:
    """The re-measurement of one kernel's best record against its default schedule."""

    task: str
    kept: str                 # "tuned" or "default"
    winner_ms: float | None   # median re-measured time of the best record
    default_ms: float | None  # median re-measured time of the default schedule
    ratio: float | None       # median over rounds of winner / default
    rounds: int
    record: str = ""          # the judged record (:func:`record_id`)
    when: str = ""
    key: str = ""             # the kernel (:func:`kernel_key`)
    reason: str = "re-measured"  # or "model check": reverted by :func:`revert_to_default`

    def describe(self) -> str:
        if self.reason != "re-measured":
            return f"kept {self.kept} ({self.reason})"
        if self.winner_ms is None or self.default_ms is None:
            return f"kept {self.kept}"
        return (f"re-measured tuned {self.winner_ms:.4f} ms vs default {self.default_ms:.4f} ms "
                f"(x{self.ratio:.3f}, {self.rounds} rounds): kept {self.kept}")


# ---------------------------------------------------------------------------
# kernel identity
# ---------------------------------------------------------------------------
def kernel_key(task_mod) -> str:
    """The key of a kernel in :data:`VERDICT_FILE`: its structural hash (what the
    database itself matches kernels by)."""
    import tvm_ffi
    return str(tvm_ffi.structural_hash(task_mod))


def record_id(record) -> str:
    """Which record a verdict judged: a digest of its trace (instructions and
    decisions, as printed)."""
    return hashlib.sha256(str(record.trace).encode()).hexdigest()[:32]


def read_verdicts(db_dir: str | os.PathLike) -> dict[str, dict]:
    path = Path(db_dir) / VERDICT_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def write_verdict(db_dir: str | os.PathLike, key: str, verdict: Verdict) -> None:
    """Store *verdict* for kernel *key* (replacing an older one), atomically."""
    path = Path(db_dir) / VERDICT_FILE
    data = read_verdicts(db_dir)
    data[key] = asdict(verdict)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def rejected(verdict: dict | None, record) -> bool:
    """Whether *verdict* rejected exactly *record* (a newer best record is not judged)."""
    return bool(verdict and verdict.get("kept") == "default"
                and verdict.get("record") == record_id(record))


# ---------------------------------------------------------------------------
# what compile applies
# ---------------------------------------------------------------------------
def applied_database(db_dir: str | os.PathLike):
    """The records ``compile --db`` applies: each kernel's best record of the JSON
    database in *db_dir*, except those a verdict rejected (those kernels keep mxc's
    default schedule).  An in-memory MetaSchedule database."""
    from tvm.s_tir import meta_schedule as ms
    source = ms.database.JSONDatabase(work_dir=os.fspath(db_dir), allow_missing=False,
                                      module_equality="structural")
    verdicts = read_verdicts(db_dir)
    out = ms.database.MemoryDatabase(module_equality="structural")
    seen: set = set()    # workloads (the records of one kernel share its Workload object)
    for rec in source.get_all_tuning_records():
        if rec.workload in seen:
            continue
        seen.add(rec.workload)
        key = kernel_key(rec.workload.mod)
        top = source.get_top_k(rec.workload, 1)
        if not top:                       # only failed candidates
            continue
        if rejected(verdicts.get(key), top[0]):
            log.info("kernel %s: tuned record rejected by re-measurement; default schedule",
                     verdicts[key].get("task"))
            continue
        best = top[0]
        workload = out.commit_workload(rec.workload.mod)
        out.commit_tuning_record(ms.database.TuningRecord(
            best.trace, workload, best.run_secs, best.target, best.args_info))
    return out


# ---------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------
def interleaved_order(count: int, rounds: int) -> list[int]:
    """Which candidate to run at each step: rounds alternate forward and backward
    (A B, B A, A B ...) so that neither candidate always runs first after a change."""
    order: list[int] = []
    for r in range(rounds):
        step = list(range(count))
        order += step if r % 2 == 0 else step[::-1]
    return order


def runner_measure(builder, runner, target) -> Measure:
    """A :data:`Measure` with MetaSchedule's *builder* and *runner* (those the search
    measured with): each module built once, then run interleaved."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    def measure(mods: Sequence[Any], rounds: int) -> list[list[float]]:
        built = builder.build([ms.builder.BuilderInput(m, target) for m in mods])
        for b in built:
            if b.error_msg is not None:
                raise RuntimeError(f"build failed: {b.error_msg.splitlines()[0]}")
        args = [ArgInfo.from_prim_func(m["main"]) for m in mods]
        order = interleaved_order(len(mods), rounds)
        results = runner.run([ms.runner.RunnerInput(built[i].artifact_path, "cpu", args[i])
                              for i in order])
        times: list[list[float]] = [[] for _ in mods]
        for i, fut in zip(order, results):
            res = fut.result()
            if res.error_msg is not None or not res.run_secs:
                raise RuntimeError(f"run failed: {(res.error_msg or 'no time').splitlines()[0]}")
            times[i].append(statistics.median(float(s) for s in res.run_secs))
        for b in built:
            _remove_artifact(b.artifact_path)
        return times

    return measure


def _remove_artifact(path: str | None) -> None:
    """Delete a built candidate (the builder leaves it in a temporary directory)."""
    if not path:
        return
    try:
        os.remove(path)
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass


def _decide(times: list[list[float]], margin: float) -> tuple[bool, float, float, float]:
    """(keep the winner, winner median, default median, median per-round ratio).

    Kept only when both the median of the per-round ratios (paired: robust to
    load that drifts over the rounds) and the ratio of the medians (robust to a
    few disturbed rounds) say it is faster by *margin*."""
    winner, default = times
    ratio = statistics.median(w / d for w, d in zip(winner, default))
    w_med, d_med = statistics.median(winner), statistics.median(default)
    keep = ratio <= 1.0 - margin and w_med <= (1.0 - margin) * d_med
    return keep, w_med, d_med, ratio


# ---------------------------------------------------------------------------
# verifying one kernel
# ---------------------------------------------------------------------------
def default_module(func, target, ctx=None):
    """*func* with mxc's default schedule in the build context *ctx* (default: one
    for *target*; unscheduled when no rule fits: what an untuned build compiles)."""
    from tvm import s_tir

    from ..build_context import build_context
    from ..schedules.cpu import default_schedule
    if target.kind.name == "llvm":
        _, sch = default_schedule(func, ctx or build_context(target, record=False))
        if sch is not None:
            return sch.mod
    return s_tir.Schedule(func).mod


def verify_task(task_name: str, task_mod, target, database, db_dir: str | os.PathLike,
                measure: Measure, *, rounds: int = VERIFY_ROUNDS, margin: float = KEEP_MARGIN,
                default_mod=None, ctx=None) -> Verdict | None:
    """Re-measure the best record of kernel *task_mod* against its default schedule.

    Returns None when there is nothing to decide: no successful record, or the
    best record *is* the default schedule.  Otherwise the verdict, also written
    to :data:`VERDICT_FILE` in *db_dir*.  A verdict already stored for the same
    best record is returned as it is (a re-run measures nothing new).  When the
    re-measurement fails the kernel keeps its default schedule: only a tuned
    schedule shown faster is used.
    """
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    if not database.has_workload(task_mod):
        return None
    top = database.get_top_k(database.commit_workload(task_mod), 1)
    if not top:
        return None
    best = top[0]
    key = kernel_key(task_mod)
    stored = read_verdicts(db_dir).get(key)
    if stored and stored.get("record") == record_id(best):
        known = {f.name for f in fields(Verdict)}
        return Verdict(**{k: v for k, v in stored.items() if k in known})
    # the best record's kernel exactly as compile --db will build it (the same query)
    just_best = ms.database.MemoryDatabase(module_equality="structural")
    just_best.commit_tuning_record(ms.database.TuningRecord(
        best.trace, just_best.commit_workload(task_mod), best.run_secs, best.target,
        best.args_info))
    tuned_mod = just_best.query_ir_module(task_mod, target, task_name)
    if default_mod is None:
        default_mod = default_module(task_mod["main"], target, ctx)
    if tuned_mod is None or tvm_ffi.structural_equal(tuned_mod, default_mod):
        return None
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    started = time.time()
    try:
        times = measure([tuned_mod, default_mod], rounds)
        keep, w_ms, d_ms, ratio = _decide(times, margin)
        verdict = Verdict(task_name, "tuned" if keep else "default", 1e3 * w_ms, 1e3 * d_ms,
                          ratio, rounds, record_id(best), when, key)
    except Exception as exc:  # noqa: BLE001 - undecided: keep what is known to be safe
        log.warning("re-measuring %s failed (%s): it keeps its default schedule", task_name, exc)
        verdict = Verdict(task_name, "default", None, None, None, 0, record_id(best), when, key)
    log.info("%s: %s (%.1f s)", task_name, verdict.describe(), time.time() - started)
    write_verdict(db_dir, key, verdict)
    return verdict


def revert_to_default(db_dir: str | os.PathLike, verdicts: Sequence[Verdict],
                      reason: str = "model check") -> list[Verdict]:
    """Turn the verdicts that kept a tuned schedule into "default" ones (for
    *reason*): ``compile --db`` then gives those kernels their default schedule.
    Returns the verdicts changed."""
    changed = []
    for v in verdicts:
        if v.kept != "tuned" or not v.key:
            continue
        new = Verdict(**{**asdict(v), "kept": "default", "reason": reason})
        write_verdict(db_dir, v.key, new)
        changed.append(new)
    return changed


# ---------------------------------------------------------------------------
# the whole-model check
# ---------------------------------------------------------------------------
@dataclass
class ModelCheck:
    """Untuned and tuned builds of one model, run interleaved."""

    untuned_ms: float
    tuned_ms: float
    rounds: int

    @property
    def speedup(self) -> float:
        return self.untuned_ms / self.tuned_ms

    @property
    def keeps_tuned(self) -> bool:
        """Whether the tuned build earned its place: its median is below the untuned one's.

        The kernels already passed their own re-measurement with a margin; at the model
        level any loss, however small, sends them back to the defaults, so a model's
        tuned build is never the slower one as measured here (issue: tuned <= untuned)."""
        return self.tuned_ms < self.untuned_ms

    def describe(self) -> str:
        return (f"model: untuned {self.untuned_ms:.3f} ms, tuned {self.tuned_ms:.3f} ms "
                f"(median of {self.rounds} interleaved rounds, tuned x{self.speedup:.3f} "
                f"{'faster' if self.speedup >= 1 else 'slower'})")


def compare_models(untuned: Callable[[], Any], tuned: Callable[[], Any], *,
                   budget_s: float = 30.0, min_rounds: int = 5, max_rounds: int = 10000,
                   warmup: int = 2, clock: Callable[[], float] = time.perf_counter) -> ModelCheck:
    """Median latency of the callables *untuned* and *tuned* (one inference each),
    run alternately (A B, B A ...) for about *budget_s* seconds (at least
    *min_rounds*, at most *max_rounds* rounds) after *warmup* calls each."""
    for _ in range(warmup):
        untuned()
        tuned()
    runs: list[list[float]] = [[], []]
    fns = (untuned, tuned)
    deadline = time.time() + budget_s
    rounds = 0
    while rounds < max_rounds and (rounds < min_rounds or time.time() < deadline):
        for i in interleaved_order(2, rounds + 1)[-2:]:
            t0 = clock()
            fns[i]()
            runs[i].append(clock() - t0)
        rounds += 1
    return ModelCheck(1e3 * statistics.median(runs[0]), 1e3 * statistics.median(runs[1]),
                      rounds)
