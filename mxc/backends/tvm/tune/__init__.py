"""Tune a model's kernels with MetaSchedule into a persistent database.

:func:`tune` takes a lowered Relax module (or an mxc graph plus shapes and
params), runs mxc's CPU graph passes (the ones :func:`build_module` runs, so
the kernels match exactly), extracts one MetaSchedule task per distinct fused
kernel and tunes them into a ``JSONDatabase`` in *db_dir*.  Then::

    build_module(mod, target, db=db_dir)          # or: mxc compile ... --db DIR

uses the tuned schedule of every kernel the database knows; the rest keep
mxc's default schedules.

The database is shared: across compiles and across models, keyed by the
kernel itself (its TIR, structurally), so the same workload is never tuned
twice -- a task whose database records already number at least the
requested trials is skipped, and a task with fewer (an interrupted run) gets
only the missing ones.  Records are appended after every measured batch, so
an interrupted tuning loses at most one batch.

Every :func:`tune` call appends one line to :data:`TUNE_LOG` in the
database directory (model, target, trials, tasks, wall seconds; read it with
:func:`read_tune_log`): what tuning a model cost, which
``bench/bench_models.py --db`` reports beside the tuned latencies.

Measurement is local by default; ``rpc=(host, port, key)`` measures on the
devices registered with a TVM RPC tracker under *key* (``python -m
tvm.exec.rpc_tracker`` + ``python -m tvm.exec.rpc_server --tracker ...``),
building locally -- see ``docs/performance.md``.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ....errors import BackendError
from ....interrupts import check as check_interrupt
from ....interrupts import watch_interrupts
from .database import (RECORD_FILE, TUNE_LOG, WORKLOAD_FILE, append_tune_log,  # noqa: F401
                      best_latency_ms, check_database, foreign_records_message, open_database,
                      read_tune_log, record_cpus, trials_done)
from ..options import TuneOptions
from .logs import metaschedule_logs, task_logger, tune_context
from .progress import TuneProgress, progress_callback
from .rpc import check_tracker
from ..targets import host_cpu_name, missing_on_host
from .verify import KEEP_MARGIN, ModelCheck, Verdict  # noqa: F401 - re-exported
from .workers import tensor_intrinsics_for, workers_deaf_to_ctrl_c

# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclass
class TaskReport:
    """One tuning task: a distinct fused kernel of the model."""

    name: str
    weight: int                    # how many times the model calls it
    trials_before: int             # records in the database before this run
    trials_run: int = 0            # trials measured by this run
    best_ms: float | None = None   # best measured latency (database, after the run)
    default_ms: float | None = None  # mxc's default schedule, measured by this run
    skipped: bool = False          # already tuned enough
    #: the re-measurement of the best record against the default schedule
    #: (:mod:`.verify`); None: the best record is the default, or not verified
    verdict: Verdict | None = None

    @property
    def trials(self) -> int:
        return self.trials_before + self.trials_run


@dataclass
class TuneReport:
    """What :func:`tune` did."""

    db_dir: str
    target: str
    tasks: list[TaskReport] = field(default_factory=list)
    seconds: float = 0.0
    #: untuned vs tuned whole-model latency (``mxc tune --check-model``), when measured
    model_check: ModelCheck | None = None

    @property
    def trials_run(self) -> int:
        return sum(t.trials_run for t in self.tasks)

    def summary(self) -> str:
        tuned = [t for t in self.tasks if not t.skipped]
        lines = [f"{len(self.tasks)} task(s), {len(tuned)} tuned now, "
                 f"{len(self.tasks) - len(tuned)} already in the database; "
                 f"{self.trials_run} trial(s) in {self.seconds:.0f} s; database {self.db_dir}"]
        for t in self.tasks:
            best = f"{t.best_ms:.4f} ms" if t.best_ms is not None else "-"
            state = "skipped" if t.skipped else f"+{t.trials_run}"
            default = f" (default schedule {t.default_ms:.4f} ms)" if t.default_ms else ""
            lines.append(f"  {t.name}: x{t.weight}, {t.trials} trial(s) ({state}), "
                         f"best {best}{default}")
            if t.verdict is not None:
                lines.append(f"    {t.verdict.describe()}")
        if self.model_check is not None:
            lines.append(self.model_check.describe())
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# task extraction
# ---------------------------------------------------------------------------
def _to_module(mod_or_graph, shapes, params, dtypes):
    import tvm
    if isinstance(mod_or_graph, tvm.IRModule):
        return mod_or_graph
    from ..converter import lower_graph
    graph = getattr(mod_or_graph, "graph", mod_or_graph)   # a Symbol or a Graph
    if callable(graph):
        graph = graph()
    return lower_graph(graph, shapes=shapes, dtypes=dtypes, params=params)


def fused_module(mod, target, ctx=None):
    """*mod* after mxc's graph passes: the fused kernels :func:`build_module` schedules
    in the build context *ctx* (default: a module built on its own for *target*)."""
    import tvm

    from ..build_context import build_context
    from ..schedules.pipeline import graph_passes
    if ctx is None:
        ctx = build_context(target, record=False)
    with target:
        return tvm.transform.Sequential(graph_passes(ctx))(mod)


def _is_tunable(func) -> bool:
    """Kernels worth measuring: those with a reduction (conv, dense, pooling ...)."""
    from tvm import s_tir, tirx
    try:
        sch = s_tir.Schedule(func)
        root = sch.get_sblock("root")
        blocks = _all_blocks(sch, root)
    except Exception:  # noqa: BLE001
        return True
    return any(any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(b).iter_vars)
               for b in blocks)


def _all_blocks(sch, root):
    out = []
    for b in sch.get_child_blocks(root):
        out.append(b)
        out.extend(_all_blocks(sch, b))
    return out


def extract_tasks(mod, target, *, all_kernels: bool = False, ctx=None):
    """MetaSchedule tasks of *mod*'s fused kernels (reductions only unless *all_kernels*),
    fused in the build context *ctx* (see :func:`fused_module`)."""
    from tvm.s_tir import meta_schedule as ms
    fused = fused_module(mod, target, ctx)
    tasks = ms.relax_integration.extract_tasks(fused, target)
    if not all_kernels:
        tasks = [t for t in tasks if _is_tunable(t.dispatched[0]["main"])]
    return tasks


# ---------------------------------------------------------------------------
# tune
# ---------------------------------------------------------------------------
def tune(mod_or_graph: Any, target: Any = "llvm", trials: int = 64,
         db_dir: str | os.PathLike = "mxc-tuning", *,
         shapes: Mapping[str, Sequence[int]] | None = None,
         params: Mapping[str, Any] | None = None,
         dtypes: Mapping[str, str] | None = None,
         **settings: Any) -> TuneReport:
    """Tune every kernel of a model to at least *trials* measured trials.

    mod_or_graph:
        a Relax module (:func:`~mxc.backends.tvm.lower.lower_model`'s ``module``,
        or :func:`lower_graph`'s), or an mxc Graph/Symbol (then *shapes*, *params*
        and *dtypes* are passed to :func:`lower_graph`).
    target, trials, db_dir, settings:
        the :class:`~mxc.backends.tvm.options.TuneOptions` fields (``rpc=``,
        ``search=``, ``progress=``, ``winograd=`` ...), documented there.
    """
    options = TuneOptions.from_env(target=target, trials=trials, db_dir=db_dir, **settings)
    return tune_model(_to_module(mod_or_graph, shapes, params, dtypes), options)


def tune_model(mod: Any, options: TuneOptions) -> TuneReport:
    """Tune every kernel of the Relax module *mod* as *options* say (``mxc tune``)."""
    from ..build_context import options_context
    from ..targets import resolve_target

    stream = sys.stderr if options.progress is True else (options.progress or None)
    start = time.time()
    tgt = _tuning_target(resolve_target(options.target))
    if options.rpc is not None:   # before any work: TVM's client would wait for it forever
        check_tracker(*options.rpc)
    proxy = measures_on_host_proxy(tgt, options.rpc)
    tensor_intrinsics_for(tgt)
    # the context mxc.compile builds from the same options: the kernels tuned are the
    # kernels compiled
    ctx = options_context(options, tgt)
    try:
        with watch_interrupts():
            tasks = extract_tasks(mod, tgt, all_kernels=options.all_kernels, ctx=ctx)
    except Exception as exc:
        raise BackendError(f"extracting tuning tasks failed: {type(exc).__name__}: {exc}") \
            from exc
    trials, only = options.trials, options.only
    db_dir = os.fspath(options.db_dir)
    database = open_database(db_dir)
    report = TuneReport(db_dir=db_dir, target=str(tgt))

    pending: dict[int, list] = {}      # remaining trials -> [(report, extracted task)]
    judged: list = []                  # tasks already tuned: (report, extracted task)
    for task in tasks:
        task_mod = task.dispatched[0]
        done = trials_done(database, task_mod)
        rep = TaskReport(name=task.task_name, weight=int(task.weight), trials_before=done)
        report.tasks.append(rep)
        if done >= trials or (only and not any(part in task.task_name for part in only)):
            rep.skipped = True
            judged.append((rep, task))
            continue
        pending.setdefault(trials - done, []).append((rep, task))

    if stream is not None and proxy:
        print(f"[mxc tune] this CPU ({host_cpu_name()}) lacks {', '.join(proxy)} that {tgt} "
              f"code uses: candidates are measured built for this CPU (a proxy); measure on "
              f"the real device with --rpc for exact times", file=stream, flush=True)
    if stream is not None:
        todo = sum(len(v) for v in pending.values())
        print(f"[mxc tune] {len(tasks)} task(s) for {tgt}, {todo} to tune "
              f"({len(tasks) - todo} already in {db_dir}), {trials} trial(s) each",
              file=stream, flush=True)

    names = [r.name for r in report.tasks if not r.skipped]
    goal = {r.name: trials for r in report.tasks}
    prog = TuneProgress(stream, names, goal, {r.name: r.trials_before for r in report.tasks})
    workers = options.max_workers or _cpu_count()
    status = "failed"
    try:
        # Ctrl-C: the task in flight ends after its batch (progress_callback) and the run
        # with KeyboardInterrupt (a second Ctrl-C: at once); the worker processes leave it
        # to this one
        with watch_interrupts(defer=True), \
                metaschedule_logs(db_dir, console=options.verbose), workers_deaf_to_ctrl_c():
            _tune_groups(pending, tgt, database, prog, options, workers, ctx, bool(proxy),
                         verify=judged if options.verify and tgt.kind.name == "llvm" else None)
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        prog.close()
        info = dict(options.model_info or {})
        rpc = options.rpc
        append_tune_log(db_dir, {
            "model": info.pop("model", None), **info,
            "target": str(tgt), "trials": int(trials),
            "trials_run": sum(prog.run_counts.values()), "tasks": len(report.tasks),
            "tasks_tuned": len(names), "task_names": [r.name for r in report.tasks],
            "search": options.search,
            "rpc": None if rpc is None else f"{rpc[0]}:{rpc[1]}:{rpc[2]}",
            "started": datetime.datetime.fromtimestamp(
                start, datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - start, 3), "status": status,
            "verdicts": {r.name: _verdict_log(r.verdict) for r in report.tasks
                         if r.verdict is not None}})

    for rep, task in zip(report.tasks, tasks):
        rep.best_ms = best_latency_ms(database, task.dispatched[0])
    report.seconds = time.time() - start
    if stream is not None:
        print(f"[mxc tune] done: {report.trials_run} trial(s) in {report.seconds:.0f} s, "
              f"database {db_dir}", file=stream, flush=True)
    return report


def _verdict_log(verdict: Verdict) -> dict:
    """A verdict as the tuning log records it (without the judged trace)."""
    return {"kept": verdict.kept, "winner_ms": verdict.winner_ms,
            "default_ms": verdict.default_ms, "rounds": verdict.rounds}


def _tune_groups(pending, tgt, database, prog, options: TuneOptions, workers: int, ctx,
                 proxy: bool = False, *, verify: list | None = None) -> None:
    """Tune the pending tasks one at a time, as *options* say, in the build context *ctx*.

    With *verify* (a list, possibly empty, of tasks tuned before this run), each
    task tuned now and each of those gets its best record re-measured against the
    default schedule (:func:`.verify.verify_task`).

    One ``tune_tasks`` call per task (sharing one builder and runner): MetaSchedule
    commits a task's records when it joins its measurements, and its gradient
    scheduler joins nothing until every task has had a first batch -- per task,
    the database grows batch by batch and an interruption loses one batch at most.
    """
    from tvm.s_tir import meta_schedule as ms

    from .builder import RunWorkers, pooled_builder
    from .verify import runner_measure
    from .workers import BUILD_FUNC, PROXY_BUILD_FUNC, builder_init
    db_dir, search, timeout_s = os.fspath(options.db_dir), options.search, options.timeout_s
    keep_margin = options.keep_margin
    # one pool of build workers for the whole run (TVM's LocalBuilder starts one per batch)
    run = RunWorkers(
        lambda: pooled_builder(max_workers=workers, timeout_sec=max(timeout_s, 30),
                               f_build=PROXY_BUILD_FUNC if proxy else BUILD_FUNC,
                               initializer=builder_init),
        lambda: _runner(options.rpc, options.rpc_workers, timeout_s))

    def measure(mods, rounds):
        return runner_measure(run.builder, run.runner, tgt)(mods, rounds)

    try:
        for remaining, group in sorted(pending.items(), reverse=True):
            for rep, task in group:
                check_interrupt()
                prog.begin(rep.name)
                if task.mod.attrs.get("tirx.is_scheduled", False):
                    continue   # scheduled already: nothing to search (as TVM skips it)
                if options.seed_default:
                    rep.default_ms = _measure_default(task, tgt, database, run.builder,
                                                      run.runner, ctx)
                    if rep.default_ms is not None:   # a record too: progress shows it as best
                        prog.best[rep.name] = rep.default_ms / 1e3
                    check_interrupt()
                callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
                callbacks.append(progress_callback(prog, [rep.name]))
                try:
                    with task_logger(db_dir, rep.name) as logger:
                        ms.tune_tasks(
                            tasks=[tune_context(task, logger, _strategy(search, remaining),
                                                workers, options.seed)],
                            task_weights=[float(task.weight)], work_dir=db_dir,
                            max_trials_global=remaining, max_trials_per_task=remaining,
                            num_trials_per_iter=max(1, min(options.trials_per_iter,
                                                           remaining)),
                            builder=run.builder, runner=run.runner, database=database,
                            measure_callbacks=callbacks, task_scheduler="round-robin",
                            # random search consults no cost model: no xgboost needed
                            cost_model="random" if search == "random" else "xgb")
                except Exception as exc:
                    raise BackendError(f"tuning {rep.name} failed: {type(exc).__name__}: "
                                       f"{exc}") from exc
                rep.trials_run = prog.run_counts.get(rep.name, 0)
                check_interrupt()
                if verify is not None:
                    _verify(rep, task, tgt, database, db_dir, measure, prog.stream, keep_margin,
                            ctx)
        for rep, task in verify or ():
            check_interrupt()
            _verify(rep, task, tgt, database, db_dir, measure, prog.stream, keep_margin, ctx)
    finally:
        run.close()


def _verify(rep, task, target, database, db_dir, measure, stream, keep_margin, ctx) -> None:
    """Re-measure *task*'s best record against its default schedule (into *rep*)."""
    from .verify import verify_task
    rep.verdict = verify_task(rep.name, task.dispatched[0], target, database, db_dir, measure,
                              margin=keep_margin, ctx=ctx)
    if rep.verdict is not None and stream is not None:
        print(f"[mxc tune] {rep.name}: {rep.verdict.describe()}", file=stream, flush=True)


def _measure_default(task, target, database, builder, runner, ctx) -> float | None:
    """Measure mxc's default schedule of *task* and commit it as a tuning record."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from ..schedules.cpu import default_schedule
    task_mod = task.dispatched[0]
    func = task_mod["main"]
    try:
        _, sch = default_schedule(func, ctx)
        if sch is None:
            return None
        args_info = ArgInfo.from_prim_func(func)
        built = builder.build([ms.builder.BuilderInput(sch.mod, target)])[0]
        if built.error_msg is not None:
            return None
        result = runner.run([ms.runner.RunnerInput(built.artifact_path, "cpu", args_info)])[0]
        result = result.result()
        if result.error_msg is not None or not result.run_secs:
            return None
        secs = [float(x) for x in result.run_secs]
        workload = database.commit_workload(task_mod)
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, secs, target, args_info))
        return 1e3 * sum(secs) / len(secs)
    except Exception as exc:  # noqa: BLE001 - the search still runs without it
        logging.getLogger(__name__).warning("measuring the default schedule of %s failed: %s",
                                            task.task_name, exc)
        return None


def measures_on_host_proxy(target, rpc) -> list[str]:
    """The ISA features CPU *target* needs that this CPU lacks when measuring locally
    ([]: candidates run as built).  Non-empty: they are built for this CPU instead."""
    if rpc is not None or target.kind.name != "llvm":
        return []
    return missing_on_host(target)


def _strategy(search: str, trials: int):
    from tvm.s_tir import meta_schedule as ms
    if search == "random":
        return ms.search_strategy.ReplayTrace()
    if search != "evolutionary":
        raise BackendError(f"unknown search {search!r} (evolutionary or random)")
    # MetaSchedule's default population (512) costs about a minute of search per batch on a
    # small machine whatever the budget; scale it with the trials asked for
    population = int(min(512, max(64, 4 * trials)))
    return ms.search_strategy.EvolutionarySearch(
        population_size=population, init_min_unmeasured=min(50, population // 2))


def _tuning_target(target):
    """MetaSchedule wants ``num-cores`` on CPU targets (its parallel-loop rules use it)."""
    import tvm
    if target.kind.name != "llvm" or target.attrs.get("num-cores"):
        return target
    spec = dict(target.export())
    spec["num-cores"] = _cpu_count()
    return tvm.target.Target(spec)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except Exception:  # pragma: no cover
        return os.cpu_count() or 1


def _runner(rpc, workers: int, timeout_s: float):
    from tvm.s_tir import meta_schedule as ms
    evaluator = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100,
                                          enable_cpu_cache_flush=False)
    if rpc is None:
        return ms.runner.LocalRunner(timeout_sec=timeout_s, evaluator_config=evaluator)
    host, port, key = rpc
    config = ms.runner.RPCConfig(tracker_host=host, tracker_port=int(port), tracker_key=key,
                                 session_timeout_sec=int(max(timeout_s, 10)))
    return ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator,
                               max_workers=max(1, workers))
