"""One explicit build context per compile (:mod:`mxc.backends.tvm.build_context`).

The Winograd mode, the precision, the tuning database and the records they
produce travel in the context each compile makes, not in process or thread
state: two compiles with different settings running at once in two threads
must each produce what it produces alone.  Oracle: the same compile run alone
(outputs bit for bit, the manifest's ``winograd``/``precision``/``tuning``
records), and the reference interpreter for the outputs' values.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc import sym as S  # noqa: E402
from mxc.backends.reference import run_graph  # noqa: E402
from mxc.backends.tvm.compile import compile_with  # noqa: E402
from mxc.backends.tvm.options import CompileOptions  # noqa: E402
from mxc.backends.tvm.targets import resolve_target  # noqa: E402

SHAPES = {"data": (1, 16, 16, 16)}


def _model():
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=32, no_bias=True, name="a")
    y = S.Activation(y, act_type="relu")
    y = S.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=32, no_bias=True, name="b")
    rng = np.random.RandomState(0)
    params = {"a_weight": rng.uniform(-1, 1, (32, 16, 3, 3)).astype("float32"),
              "b_weight": rng.uniform(-1, 1, (32, 32, 3, 3)).astype("float32")}
    return y, params


def _compile(options: CompileOptions, feed) -> tuple[dict, np.ndarray]:
    y, params = _model()
    model = compile_with(y, params, SHAPES, options=options)
    m = model.manifest
    tuning = m.get("tuning_db") or {}
    records = {"winograd": m.get("winograd"), "precision": m.get("precision"),
               "tuning": (tuning.get("path"), tuning.get("tuned"))}
    return records, model.run(feed)[0]


def _database(db_dir: str, winograd: str, precision: str) -> None:
    """A database holding one record: the first kernel ``mxc tune`` would extract under
    these settings, with its default schedule (as ``mxc tune`` seeds it)."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from mxc.backends.tvm.build_context import options_context
    from mxc.backends.tvm.converter import lower_graph
    from mxc.backends.tvm.options import TuneOptions
    from mxc.backends.tvm.schedules.cpu import default_schedule
    from mxc.backends.tvm.tune import _tuning_target, extract_tasks
    from mxc.backends.tvm.tune.database import open_database
    y, params = _model()
    mod = lower_graph(y.graph, shapes=SHAPES, params=params)
    tgt = _tuning_target(resolve_target("llvm"))
    ctx = options_context(TuneOptions(winograd=winograd, precision=precision), tgt)
    task_mod = extract_tasks(mod, tgt, ctx=ctx)[0].dispatched[0]
    _, sch = default_schedule(task_mod["main"], ctx)
    database = open_database(db_dir)
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(task_mod), [1e-3], tgt,
        ArgInfo.from_prim_func(task_mod["main"])))


def _settings(tmp_path) -> list[CompileOptions]:
    from mxc.backends.tvm.schedules.base.microarch import cpu_features
    bf16 = "bf16" if cpu_features(resolve_target("llvm")).bf16_dot else "fp32"   # the host's
    db = str(tmp_path / "db")
    _database(db, "off", bf16)
    return [CompileOptions(winograd="on", precision="fp32"),
            CompileOptions(winograd="off", precision=bf16, db=db)]


def test_two_compiles_in_two_threads_build_what_each_builds_alone(tmp_path):
    feed = {"data": np.random.RandomState(1).uniform(-1, 1, SHAPES["data"])
            .astype("float32")}
    settings = _settings(tmp_path)
    alone = [_compile(o, feed) for o in settings]
    # the settings differ where it shows: one transforms its convolutions, the other not
    assert alone[0][0]["winograd"]["convolutions"] == 2
    assert alone[1][0]["winograd"]["convolutions"] == 0
    # what is tuned is what is compiled: the kernel tuned under these settings is used
    assert alone[0][0]["tuning"] == (None, None) and len(alone[1][0]["tuning"][1]) == 1
    y, params = _model()
    want = run_graph(y.graph, {**params, **feed})[0]
    for _, out in alone:
        np.testing.assert_allclose(out, want, rtol=2e-2, atol=2e-2 * float(np.abs(want).max()))

    results: list = [None, None]
    errors: list = []
    start = threading.Barrier(2)

    def work(i):
        try:
            start.wait()
            results[i] = _compile(settings[i], feed)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (rec_alone, out_alone), (rec_together, out_together) in zip(alone, results):
        assert rec_together == rec_alone
        np.testing.assert_array_equal(out_together, out_alone)


def test_each_build_fills_its_own_records():
    """Two contexts for the same target never share their records."""
    from mxc.backends.tvm.build_context import build_context
    tgt = resolve_target("llvm")
    a, b = build_context(tgt, winograd="on"), build_context(tgt, precision="bf16")
    a.records.winograd["convolutions"] += 1
    assert b.records.winograd["convolutions"] == 0
    assert (a.winograd, a.precision, b.winograd, b.precision) == ("on", "fp32", "auto", "bf16")


def _broken_rule(func, info):
    raise RuntimeError("deliberately broken")


def _conv_module():
    from mxc.backends.tvm.converter import lower_graph
    x = S.var("data")
    y = S.Convolution(x, kernel=(1, 1), num_filter=32, no_bias=True, name="c")
    params = {"c_weight": np.random.RandomState(2).uniform(-1, 1, (32, 16, 1, 1))
              .astype("float32")}
    return y, params, lower_graph(y.graph, shapes=SHAPES, params=params)


def _broken_context(strict: bool):
    import dataclasses

    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.schedules.cpu import RULES, ScheduleRule
    ctx = build_context(resolve_target("llvm"), record=False, strict=strict)
    return dataclasses.replace(ctx, rules=(ScheduleRule("broken_rule", _broken_rule), *RULES))


def test_a_broken_schedule_rule_fails_a_strict_build_with_its_name():
    from mxc.backends.tvm.build import build_module
    from mxc.errors import BackendError
    _, _, mod = _conv_module()
    with pytest.raises(BackendError, match="schedule rule 'broken_rule' failed on kernel "
                                           ".*RuntimeError: deliberately broken"):
        build_module(mod, "llvm", ctx=_broken_context(strict=True))


def test_a_broken_schedule_rule_is_logged_by_name_and_the_next_rule_used(caplog):
    from mxc.backends.tvm.build import build_module
    from mxc.backends.tvm.run import run_module
    y, params, mod = _conv_module()
    stats: dict = {}
    with caplog.at_level("WARNING", logger="mxc.backends.tvm.schedules.cpu"):
        exe = build_module(mod, "llvm", ctx=_broken_context(strict=False), stats=stats)
    assert any("'broken_rule' failed" in r.getMessage() and "deliberately broken"
               in r.getMessage() for r in caplog.records), caplog.records
    assert "reduction" in stats.values() and "broken_rule" not in stats.values(), stats
    feed = np.random.RandomState(3).uniform(-1, 1, SHAPES["data"]).astype("float32")
    want = run_graph(y.graph, {**params, "data": feed})[0]
    np.testing.assert_allclose(run_module(exe, [feed])[0], want, rtol=1e-4, atol=1e-4)


def test_the_test_suite_builds_strictly():
    from mxc.backends.tvm.build_context import build_context
    assert build_context(resolve_target("llvm")).strict


# ---------------------------------------------------------------------------
# settings resolved once, before the build (issue 36): like TVM's PassContext
# ---------------------------------------------------------------------------
class _RecordingEnviron(dict):
    """``os.environ`` as the options layer sees it, noting which MXC_ variables are read
    while *phase* says the build stage is running."""

    def __init__(self, data, phase):
        super().__init__(data)
        self.phase, self.late = phase, []

    def _note(self, key):
        if self.phase["build"] and str(key).startswith("MXC_"):
            self.late.append(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)


def test_the_environment_is_read_before_the_build_stage_and_never_during_it(
        monkeypatch, tmp_path):
    """Oracle: the same compile with nothing changed.  Changing every build variable
    (and entering a use_database block) once the build stage has started must not
    reach the build: no MXC_ variable is read then, the manifest says what the options
    resolved, and the outputs are those of the unchanged compile."""
    import os
    import types
    from pathlib import Path

    import mxc
    from mxc.backends.tvm import build_stage, options
    from mxc.backends.tvm.options import use_database

    mlp = Path(__file__).resolve().parents[2] / "examples" / "mlp"
    sym, args, aux = mxc.load_checkpoint(str(mlp / "mlp"), 0)
    feed = {"data": np.load(mlp / "input.npz")["data"]}
    for var in ("MXC_TUNING_DB", "MXC_WINOGRAD", "MXC_EMULATE_AMX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MXC_STRICT_SCHEDULES", "1")
    want = mxc.compile(sym, (args, aux), {"data": feed["data"].shape})

    phase = {"build": False}
    environ = _RecordingEnviron(os.environ, phase)
    proxy = types.SimpleNamespace(**{k: getattr(os, k) for k in ("fspath", "PathLike")},
                                  environ=environ)
    monkeypatch.setattr(options, "os", proxy)
    real = build_stage.build_lowered

    def late_changes(lowered, opts, prog):
        phase["build"] = True
        environ.update({"MXC_TUNING_DB": str(tmp_path / "none"), "MXC_WINOGRAD": "on",
                        "MXC_EMULATE_AMX": "1", "MXC_STRICT_SCHEDULES": "0"})
        try:
            with use_database(tmp_path / "none-either"):
                return real(lowered, opts, prog)
        finally:
            phase["build"] = False

    monkeypatch.setattr(build_stage, "build_lowered", late_changes)
    got = mxc.compile(sym, (args, aux), {"data": feed["data"].shape})
    assert environ.late == []
    m = got.manifest
    assert m["tuning_db"] is None and m["environment"] == {}
    assert "emulated" not in m["target"].get("host", {})
    assert m["precision"] == want.manifest["precision"]
    np.testing.assert_array_equal(got.run(feed)[0], want.run(feed)[0])


def test_amx_helpers_follow_the_entered_context_not_the_environment(monkeypatch):
    from mxc.backends.tvm.build_context import build_context, current_context
    from mxc.backends.tvm.schedules.base import amx_steps
    monkeypatch.setenv("MXC_EMULATE_AMX", "1")        # set, but no context says so
    target = resolve_target("llvm")
    real, emulated = (build_context(target, record=False, emulate=e) for e in (False, True))
    assert current_context() is None
    assert "x86_amx" in amx_steps.helper_ir("tdpbf16ps")            # no build: the real steps
    with real:
        assert current_context() is real
        assert "x86_amx" in amx_steps.helper_ir("tdpbf16ps")
        with emulated:
            assert "x86_amx" not in amx_steps.helper_ir("tdpbf16ps")
        assert current_context() is real
    assert current_context() is None
