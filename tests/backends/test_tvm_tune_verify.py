"""Tuning that never loses: a kernel's best record is re-measured against mxc's default
schedule and ``build_module(db=...)`` applies it only when it was found faster.

Each case builds its database by hand (no search).  Which candidate is faster is
given to the decision by a measure function with known answers (:class:`_Timings`):
a record whose stored time is a lie (a naive, unscheduled kernel claiming to take a
nanosecond) is rejected when its re-measurement says it is slower, a record
re-measured faster is kept, and the build follows either verdict.  No test asserts
that one real kernel ran faster than another: how much faster a parallel kernel
measures depends on the machine and its load -- with a core taken by another
process, mxc's 0.04 ms scheduled convolution here measured ~3 ms (each fork-join of
TVM's two-thread pool waits for the scheduler to give the stolen core back), within
1.3x of the naive loop nest, as it did on a loaded Zen 3.  The real measurement
(MetaSchedule's builder and runner, as ``mxc tune`` uses) is checked by invariants
instead: a finite positive time per module per round, and a verdict that is the
decision on exactly those times.  Speed itself is ``bench/layers.py``'s.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm import build_module, lower_graph, run_module
from mxc.backends.tvm.tune.verify import (KEEP_MARGIN, VERDICT_FILE, VERIFY_ROUNDS,
                                          compare_models, interleaved_order, read_verdicts,
                                          verify_task)

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

RTOL, ATOL = 1e-4, 1e-4
#: a convolution with a register-blocked default schedule and a padded copy (one task)
SHAPE = {"data": (1, 32, 28, 28)}


def _conv():
    x = S.var("data")
    # stride 2: a direct convolution (no Winograd), one tuning task
    y = S.Convolution(x, kernel=(3, 3), num_filter=32, stride=(2, 2), pad=(1, 1), name="conv")
    return S.Activation(y, act_type="relu", name="relu").graph


def _params(graph):
    from mxc.compiler.infer import infer_shapes
    shapes = infer_shapes(graph, SHAPE)
    rng = np.random.RandomState(0)
    return {n.name: rng.uniform(-0.5, 0.5, shapes[(n, 0)]).astype("float32")
            for n in graph.input_nodes() if n.name not in SHAPE}


@pytest.fixture(scope="module")
def kernel():
    """(module, graph, params, target, the conv's tuning task)."""
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.tune import _tuning_target, extract_tasks
    graph = _conv()
    params = _params(graph)
    mod = lower_graph(graph, shapes=SHAPE, params=params)
    target = _tuning_target(resolve_target("llvm"))
    tasks = extract_tasks(mod, target)
    assert len(tasks) == 1
    return mod, graph, params, target, tasks[0]


def _database(db_dir, task, target, sch, secs: float):
    """A JSON database holding one record of *task*: schedule *sch*, claimed *secs*."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from mxc.backends.tvm.tune.database import open_database
    database = open_database(db_dir)
    task_mod = task.dispatched[0]
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(task_mod), [secs], target,
        ArgInfo.from_prim_func(task_mod["main"])))
    return database


def _naive(task):
    """The kernel as lowered, unscheduled (its trace only looks its blocks up: a
    database ignores records with an empty trace)."""
    from tvm import s_tir
    sch = s_tir.Schedule(task.dispatched[0])
    sch.get_child_blocks(sch.get_sblock("root"))
    return sch


def _mxc_default(task, target):
    from mxc.backends.tvm.schedules.cpu import default_schedule
    from mxc.backends.tvm.build_context import build_context
    _, sch = default_schedule(task.dispatched[0]["main"], build_context(target, record=False))
    assert sch is not None
    return sch


@pytest.fixture(scope="module")
def measure(kernel):
    """Real measurement: MetaSchedule's local builder and runner, as ``mxc tune`` uses."""
    from mxc.backends.tvm.tune import _runner
    from mxc.backends.tvm.tune.builder import pooled_builder
    from mxc.backends.tvm.tune.verify import runner_measure
    from mxc.backends.tvm.tune.workers import BUILD_FUNC, builder_init
    builder = pooled_builder(max_workers=1, timeout_sec=60, f_build=BUILD_FUNC,
                             initializer=builder_init)
    runner = _runner(None, 1, 60)
    yield runner_measure(builder, runner, kernel[3])
    for obj in (builder, runner):
        pool = getattr(obj, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False)


def _build_and_check(mod, graph, params, db):
    """Build with database *db*; outputs equal the reference; the default-scheduled
    kernels (the stats) returned."""
    stats: dict = {}
    exe = build_module(mod, "llvm", db=db, stats=stats)
    feed = np.random.RandomState(3).uniform(-1, 1, SHAPE["data"]).astype("float32")
    got = run_module(exe, [feed])[0]
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    return stats


def _conv_default_scheduled(stats) -> bool:
    return any("conv" in name for name in stats)


def test_a_record_that_lied_about_its_time_is_rejected(kernel, tmp_path):
    """The naive kernel claims 1 ns (it is the database's best record), so it is applied
    until verified; re-measured (known answers: twice the default's time) it is slower,
    and the build gives that kernel its default schedule."""
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _naive(task), 1e-9)
    stats = _build_and_check(mod, graph, params, db)
    assert not _conv_default_scheduled(stats), stats      # unverified: the record is applied
    timings = _Timings([2e-3] * VERIFY_ROUNDS, [1e-3] * VERIFY_ROUNDS)
    verdict = verify_task(task.task_name, task.dispatched[0], target, database, db, timings)
    assert verdict is not None and verdict.kept == "default", verdict
    assert (verdict.winner_ms, verdict.default_ms) == pytest.approx((2.0, 1.0)), verdict
    _assert_measured(timings, _naive(task).mod, _mxc_default(task, target).mod)
    stats = _build_and_check(mod, graph, params, db)
    assert _conv_default_scheduled(stats), stats
    stored = read_verdicts(db)
    assert [v["kept"] for v in stored.values()] == ["default"]


def test_a_genuinely_faster_record_is_kept(kernel, tmp_path):
    """mxc's scheduled kernel against the naive loop nest standing in for the default:
    re-measured (known answers: a quarter of the default's time) it is faster, so it is
    kept and the build applies it."""
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _mxc_default(task, target), 1e-3)
    naive = _naive(task).mod
    timings = _Timings([0.25e-3] * VERIFY_ROUNDS, [1e-3] * VERIFY_ROUNDS)
    verdict = verify_task(task.task_name, task.dispatched[0], target, database, db, timings,
                          default_mod=naive)
    assert verdict is not None and verdict.kept == "tuned", verdict
    assert verdict.ratio == pytest.approx(0.25) and verdict.rounds == VERIFY_ROUNDS, verdict
    _assert_measured(timings, _mxc_default(task, target).mod, naive)
    stats = _build_and_check(mod, graph, params, db)
    assert not _conv_default_scheduled(stats), stats


def _assert_measured(timings, tuned_mod, default_mod):
    """*timings* was asked once, for the best record's kernel and then the default's
    (the order its answers are read in)."""
    import tvm_ffi
    assert len(timings.asked) == 1, timings.asked
    got = timings.asked[0]
    assert tvm_ffi.structural_equal(got[0], tuned_mod)
    assert tvm_ffi.structural_equal(got[1], default_mod)


def test_real_measurement_gives_every_module_a_time_in_every_round(kernel, measure):
    """MetaSchedule's builder and runner, two kernels interleaved: one finite, positive
    time per module and round (which of them is faster is the machine's business)."""
    _, _, _, target, task = kernel
    times = measure([_mxc_default(task, target).mod, _naive(task).mod], 3)
    assert len(times) == 2 and all(len(t) == 3 for t in times), times
    assert all(np.isfinite(x) and x > 0 for t in times for x in t), times


def test_runner_measure_gives_each_module_its_own_times(kernel):
    """Through a builder and runner with known answers (each built module runs in a time
    of its own): the modules run interleaved, and each gets the times of its runs."""
    from types import SimpleNamespace

    from mxc.backends.tvm.tune.verify import runner_measure
    _, _, _, target, task = kernel
    secs = {"/nonexistent/tuned.so": 2e-3, "/nonexistent/default.so": 5e-3}
    ran: list[str] = []

    class Builder:
        def build(self, inputs):
            return [SimpleNamespace(error_msg=None, artifact_path=path)
                    for path, _ in zip(secs, inputs)]

    class Runner:
        def run(self, inputs):
            ran.extend(i.artifact_path for i in inputs)
            return [SimpleNamespace(result=lambda p=i.artifact_path: SimpleNamespace(
                error_msg=None, run_secs=[secs[p]])) for i in inputs]
    mods = [_mxc_default(task, target).mod, _naive(task).mod]
    times = runner_measure(Builder(), Runner(), target)(mods, 4)
    assert times == [[2e-3] * 4, [5e-3] * 4]
    assert ran == [list(secs)[i] for i in interleaved_order(2, 4)]


def test_a_verdict_is_the_decision_on_what_was_measured(kernel, measure, tmp_path):
    """Verified with the real runner, the lying record gets a verdict drawn from the
    times measured (whichever way they fall on this machine), and the build follows it."""
    from mxc.backends.tvm.tune.verify import _decide
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _naive(task), 1e-9)
    seen: list = []

    def recorded(mods, rounds):
        seen.append(measure(mods, rounds))
        return seen[-1]
    verdict = verify_task(task.task_name, task.dispatched[0], target, database, db, recorded)
    assert len(seen) == 1 and verdict is not None and verdict.rounds == VERIFY_ROUNDS, verdict
    assert all(len(t) == VERIFY_ROUNDS and min(t) > 0 for t in seen[0]), seen
    keep, w_med, d_med, ratio = _decide(seen[0], KEEP_MARGIN)
    assert verdict.kept == ("tuned" if keep else "default"), (verdict, seen)
    assert (verdict.winner_ms, verdict.default_ms, verdict.ratio) == \
        pytest.approx((1e3 * w_med, 1e3 * d_med, ratio)), verdict
    stats = _build_and_check(mod, graph, params, db)
    assert _conv_default_scheduled(stats) == (verdict.kept == "default"), (verdict, stats)


def test_the_default_schedule_as_best_record_needs_no_verdict(kernel, tmp_path):
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _mxc_default(task, target), 1e-3)

    def measure(_mods, _rounds):
        raise AssertionError("nothing to measure: the best record is the default")
    assert verify_task(task.task_name, task.dispatched[0], target, database, db, measure) is None
    assert not (db / VERDICT_FILE).exists()


class _Timings:
    """A measure() that returns given times (seconds per round) and records what it was
    asked to measure."""

    def __init__(self, winner, default):
        self.times = [list(winner), list(default)]
        self.asked: list = []

    @property
    def calls(self) -> int:
        return len(self.asked)

    def __call__(self, mods, rounds):
        assert len(mods) == 2
        self.asked.append(list(mods))
        return [t[:rounds] for t in self.times]


@pytest.mark.parametrize("winner,kept", [
    ([0.98] * 5, "default"),                       # 2 % faster: within the margin
    ([1.2, 0.5, 1.2, 0.5, 1.2], "default"),        # faster in 2 rounds of 5 only
    ([0.9, 0.9, 0.95, 0.9, 2.0], "tuned"),         # one disturbed round does not matter
])
def test_decision_needs_a_margin_in_the_medians(kernel, tmp_path, winner, kept):
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _naive(task), 1e-9)
    timings = _Timings(winner, [1.0] * 5)
    verdict = verify_task(task.task_name, task.dispatched[0], target, database, db, timings)
    assert verdict.kept == kept and timings.calls == 1
    assert verdict.ratio == pytest.approx(sorted(w / 1.0 for w in winner)[2])
    # the same best record again: the stored verdict, nothing measured
    again = verify_task(task.task_name, task.dispatched[0], target, database, db, timings)
    assert again.kept == kept and timings.calls == 1
    assert 0 < KEEP_MARGIN < 0.1


def test_a_new_best_record_is_judged_again(kernel, tmp_path):
    """A verdict names the record it judged: a better record found later is applied
    until it is verified itself."""
    mod, graph, params, target, task = kernel
    db = tmp_path / "db"
    database = _database(db, task, target, _naive(task), 1e-6)
    verify_task(task.task_name, task.dispatched[0], target, database, db,
                _Timings([2.0] * 5, [1.0] * 5))
    assert _conv_default_scheduled(_build_and_check(mod, graph, params, db))
    # a (different) record claiming to be faster still: not judged yet, so it is applied
    from tvm.s_tir import meta_schedule as ms

    from mxc.backends.tvm.tune.database import open_database
    sch = _naive(task)
    sch.parallel(sch.get_loops(sch.get_child_blocks(sch.get_sblock("root"))[-1])[0])
    database = open_database(db)
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(task.dispatched[0]), [1e-7], target, None))
    assert not _conv_default_scheduled(_build_and_check(mod, graph, params, db))
    verdicts = json.loads((db / VERDICT_FILE).read_text())
    assert len(verdicts) == 1


def test_interleaved_order_alternates_which_runs_first():
    assert interleaved_order(2, 4) == [0, 1, 1, 0, 0, 1, 1, 0]


def test_compare_models_reports_interleaved_medians():
    """A fake clock: the 'tuned' callable takes 2 units, the untuned 3."""
    now = [0.0]
    calls: list[str] = []

    def untuned():
        calls.append("u")
        now[0] += 3.0

    def tuned():
        calls.append("t")
        now[0] += 2.0
    check = compare_models(untuned, tuned, budget_s=0, min_rounds=4, warmup=1,
                           clock=lambda: now[0])
    assert check.rounds == 4
    assert check.untuned_ms == 3000.0 and check.tuned_ms == 2000.0
    assert check.speedup == pytest.approx(1.5)
    assert calls[2:] == ["u", "t", "t", "u", "u", "t", "t", "u"]
    assert "faster" in check.describe()


@pytest.mark.parametrize("untuned_ms,tuned_ms,kept", [
    (11.0, 10.0, True),      # faster: the tuned build stays
    (11.044, 11.257, False),  # 1.9% slower (inside the kernels' 3% margin): reverted
    (5.0, 5.0, False),       # a tie is not a win
])
def test_the_model_check_keeps_a_tuned_build_only_when_it_is_faster(untuned_ms, tuned_ms, kept):
    from mxc.backends.tvm.tune.verify import ModelCheck
    assert ModelCheck(untuned_ms, tuned_ms, 100).keeps_tuned is kept
