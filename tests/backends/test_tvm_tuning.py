"""mxc's CPU pipeline (default schedules, channels-last, packed weights) and tuning.

Outputs only: speed belongs in ``bench/``.  The default pipeline must keep every
kernel's result equal to the reference executor; the tuning database must be
reused (a second tune of the same kernels measures nothing), resumed (a
partial database is topped up, not restarted) and applied by ``build_module``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm import build_module, function_input_names, lower_graph, run_module
from mxc.backends.tvm.build import use_database
from mxc.compiler.infer import infer_shapes
from mxc.errors import BackendError

RTOL, ATOL = 1e-4, 1e-4


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _params(graph, data_shapes, seed=0):
    rng = np.random.RandomState(seed)
    shapes = infer_shapes(graph, data_shapes)
    params = {}
    for n in graph.input_nodes():
        if n.name in data_shapes:
            continue
        shape = shapes[(n, 0)]
        if n.name.endswith("moving_var"):
            params[n.name] = rng.uniform(0.5, 2.0, shape).astype("float32")
        else:
            params[n.name] = rng.uniform(-0.5, 0.5, shape).astype("float32")
    return params


def _check(graph, data_shapes, *, stats=None, seed=1, **build_kwargs):
    """Compile *graph* (params bound) with the CPU pipeline and compare with the reference."""
    params = _params(graph, data_shapes)
    mod = lower_graph(graph, shapes=data_shapes, params=params)
    exe = build_module(mod, "llvm", stats=stats, **build_kwargs)
    rng = np.random.RandomState(seed)
    feeds = {k: rng.uniform(-1, 1, v).astype("float32") for k, v in data_shapes.items()}
    got = run_module(exe, [feeds[n] for n in function_input_names(mod)])
    want = run_graph(graph, {**feeds, **params})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return mod, params


def _cnn():
    """conv -> BatchNorm -> relu -> max pool -> conv (stride 2) -> avg pool -> FC."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv1")
    y = S.BatchNorm(y, fix_gamma=False, name="bn1")
    y = S.Activation(y, act_type="relu", name="relu1")
    y = S.Pooling(y, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool1")
    y = S.Convolution(y, kernel=(3, 3), num_filter=24, stride=(2, 2), pad=(1, 1), name="conv2")
    y = S.Activation(y, act_type="relu", name="relu2")
    y = S.Pooling(y, global_pool=True, kernel=(1, 1), pool_type="avg", name="gap")
    y = S.Flatten(y, name="flat")
    return S.FullyConnected(y, num_hidden=10, name="fc").graph


def _tiny_conv():
    """One small conv + relu: one tuning task, quick to measure."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv")
    return S.Activation(y, act_type="relu", name="relu").graph


TINY_SHAPE = {"data": (1, 4, 8, 8)}


# ---------------------------------------------------------------------------
# the default (untuned) CPU pipeline
# ---------------------------------------------------------------------------
def test_default_pipeline_cnn_matches_reference_and_schedules_every_kernel():
    stats = {}
    _check(_cnn(), {"data": (1, 3, 20, 20)}, stats=stats)
    assert stats, "no kernel went through the default schedules"
    assert None not in stats.values(), f"unscheduled kernels: {stats}"
    # convolutions, pooling and the dense layer use the register-blocked reduction rule
    assert sum(1 for r in stats.values() if r == "reduction") >= 4, stats


def test_depthwise_and_grouped_conv_match_reference():
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=12, pad=(1, 1), num_group=12,
                      no_bias=True, name="dw")                     # depthwise, stride 1
    y = S.Activation(y, act_type="relu", name="r1")
    y = S.Convolution(y, kernel=(3, 3), num_filter=12, stride=(2, 2), pad=(1, 1),
                      num_group=12, name="dw2")                   # depthwise, stride 2
    y = S.Convolution(y, kernel=(1, 1), num_filter=6, num_group=3, name="grouped")
    y = S.clip(y, a_min=0.0, a_max=6.0, name="relu6")
    stats = {}
    _check(y.graph, {"data": (1, 12, 13, 13)}, stats=stats)
    assert None not in stats.values(), stats


@pytest.mark.parametrize("channels,size,stride", [(3, 11, 2), (5, 7, 1), (40, 9, 1)])
def test_odd_shapes_match_reference(channels, size, stride):
    """Channel counts that are no multiple of the vector, pixel counts with a partial
    register block (predicated tail), strides and asymmetric pooling windows."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=channels + 2, stride=(stride, stride),
                      pad=(1, 1), name="c1")
    y = S.LeakyReLU(y, act_type="leaky", slope=0.1, name="lrelu")
    y = S.Pooling(y, kernel=(2, 2), stride=(1, 1), pool_type="avg", name="p1")
    y = S.Convolution(y, kernel=(1, 1), num_filter=channels, name="c2")
    _check(y.graph, {"data": (2, channels, size, size)})


def test_relu_keeps_nan_with_the_default_pipeline():
    """Scalar constants become immediates in fused kernels; NaN still passes relu."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(1, 1), num_filter=8, name="conv")
    y = S.Activation(y, act_type="relu", name="relu")
    graph = y.graph
    params = _params(graph, {"data": (1, 8, 4, 4)})
    mod = lower_graph(graph, shapes={"data": (1, 8, 4, 4)}, params=params)
    feed = np.ones((1, 8, 4, 4), "float32")
    feed[0, :, 1, 2] = np.nan
    got = run_module(build_module(mod), [feed])[0]
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=RTOL, atol=ATOL)


def test_optimize_false_is_the_stock_pipeline():
    stats = {}
    _check(_tiny_conv(), TINY_SHAPE, stats=stats, optimize=False)
    assert stats == {}


def test_db_must_be_a_database(tmp_path):
    mod = lower_graph(_tiny_conv(), shapes=TINY_SHAPE,
                      params=_params(_tiny_conv(), TINY_SHAPE))
    with pytest.raises(BackendError, match="not a directory"):
        build_module(mod, db=tmp_path / "missing")
    with pytest.raises(BackendError, match="no tuning database"):
        build_module(mod, db=tmp_path)


# ---------------------------------------------------------------------------
# tuning
# ---------------------------------------------------------------------------
def _records(db: Path) -> int:
    path = db / "database_tuning_record.json"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) \
        if path.exists() else 0


def _tuned(tmp_path_factory, graph, shapes, name, **kwargs):
    """(module, graph, params, database, report): *graph* tuned to 2 trials per kernel
    (random search: quick)."""
    from mxc.backends.tvm.tune import tune
    params = _params(graph, shapes)
    mod = lower_graph(graph, shapes=shapes, params=params)
    db = tmp_path_factory.mktemp("tuning") / name
    # verify=False: these tests check that the database's best records are applied;
    # re-measurement (which may keep a kernel's default) is test_tvm_tune_verify.py's
    report = tune(mod, "llvm", 2, db, search="random", progress=False, verify=False, **kwargs)
    return mod, graph, params, db, report


@pytest.fixture(scope="module")
def tuned_db(tiny_conv_tuned):
    """(module, graph, params, database, report): the tiny conv tuned to 2 trials (the
    session's tune of it, conftest.py; test_tune_db_lines.py checks the same database)."""
    graph, params, mod, db, report = tiny_conv_tuned
    return mod, graph, params, db, report


def test_tune_fills_the_database(tuned_db):
    _, _, _, db, report = tuned_db
    assert len(report.tasks) == 1
    task = report.tasks[0]
    assert not task.skipped and task.trials_before == 0 and task.trials_run == 2
    assert task.best_ms is not None and task.best_ms > 0
    # the default schedule is measured and stored too: the best record is never worse
    assert task.default_ms is not None and task.best_ms <= task.default_ms
    assert _records(db) == 3
    assert "trial(s)" in report.summary()


CNN_SHAPE = {"data": (1, 3, 16, 16)}


@pytest.fixture(scope="module")
def tuned_cnn(tmp_path_factory):
    """The small CNN (five reduction kernels) tuned."""
    return _tuned(tmp_path_factory, _cnn(), CNN_SHAPE, "cnn", seed=3)


def test_every_kernel_is_tuned_no_worse_than_its_default_schedule(tuned_cnn):
    """The default schedule is a measured candidate of every task: each kernel's best
    record is at most its default's time, and the database build matches MXNet's
    reference and takes every reduction kernel from the database."""
    mod, graph, params, db, report = tuned_cnn
    assert len(report.tasks) >= 4
    for task in report.tasks:
        assert task.default_ms is not None, task
        assert task.best_ms is not None and task.best_ms <= task.default_ms, task
    stats = {}
    exe = build_module(mod, "llvm", db=db, stats=stats)
    tuned = {t.name for t in report.tasks}
    assert not tuned & set(stats), (tuned, stats)
    feed = np.random.RandomState(6).uniform(-1, 1, CNN_SHAPE["data"]).astype("float32")
    got = run_module(exe, [feed])[0]
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_default_schedule_gives_the_search_tile_sizes_to_vary(tuned_cnn):
    """The default schedule's trace samples its tiles (decided as the default), so the
    evolutionary search's tile mutator derives other valid schedules from it."""
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.schedules.cpu import default_schedule
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.tune import _tuning_target, extract_tasks
    mod = tuned_cnn[0]
    target = _tuning_target(resolve_target("llvm"))
    varied = 0
    for task in extract_tasks(mod, target):
        task_mod = task.dispatched[0]
        _, sch = default_schedule(task_mod["main"], build_context(target, record=False))
        tiles = [i for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"]
        assert tiles, task.task_name
        context = ms.TuneContext(mod=task_mod, target=target, space_generator="post-order-apply",
                                 search_strategy="evolutionary")
        mutator = ms.mutator.MutateTileSize()
        mutator._initialize_with_tune_context(context)  # noqa: SLF001
        for seed in range(1, 9):
            new = ms._ffi_api.MutatorApply(mutator, sch.trace, seed)  # noqa: SLF001
            if new is None:
                continue
            assert [str(new.decisions[i]) for i in new.insts if i in new.decisions] != \
                [str(sch.trace.decisions[i]) for i in sch.trace.insts if i in sch.trace.decisions]
            replay = s_tir.Schedule(task_mod)
            new.apply_to_schedule(replay, remove_postproc=True)
            varied += 1
    assert varied, "no default schedule had a tile the search could vary"


def test_second_tune_of_the_same_kernels_measures_nothing(tuned_db):
    from mxc.backends.tvm.tune import tune
    mod, _, _, db, _ = tuned_db
    before = _records(db)
    # verify=False: the module's database stays verdict-free (later tests apply it)
    report = tune(mod, "llvm", 2, db, search="random", progress=False, verify=False)
    assert report.trials_run == 0
    assert all(t.skipped for t in report.tasks)
    assert _records(db) == before


def test_build_with_the_database_uses_tuned_kernels(tuned_db):
    mod, graph, params, db, _ = tuned_db
    stats = {}
    exe = build_module(mod, "llvm", db=db, stats=stats)
    # the conv kernel came from the database: it is not among the default-scheduled ones
    assert not any("conv" in name for name in stats), stats
    feed = np.random.RandomState(5).uniform(-1, 1, TINY_SHAPE["data"]).astype("float32")
    got = run_module(exe, [feed])[0]
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    # the same through use_database() / $MXC_TUNING_DB (how mxc.compile picks it up)
    stats2 = {}
    with use_database(db):
        build_module(mod, "llvm", stats=stats2)
    assert stats2 == stats


@pytest.fixture(scope="module")
def resumed(tuned_db, tmp_path_factory):
    """(report, database, progress text): a copy of the tuned database cut to its first
    record (an interrupted run), tuned again to 3 trials with its progress captured."""
    import io

    from mxc.backends.tvm.tune import tune
    mod, _, _, db, _ = tuned_db
    partial = tmp_path_factory.mktemp("resumed") / "partial"
    shutil.copytree(db, partial)
    lines = (partial / "database_tuning_record.json").read_text().splitlines()
    (partial / "database_tuning_record.json").write_text(lines[0] + "\n")   # 1 of 2 kept
    out = io.StringIO()
    report = tune(mod, "llvm", 3, partial, search="random", progress=out)
    return report, partial, out.getvalue()


def test_interrupted_tuning_resumes_with_the_missing_trials(resumed):
    """A database holding fewer records than asked (an interrupted run) is topped up."""
    report, partial, _ = resumed
    task = report.tasks[0]
    assert task.trials_before == 1 and task.trials_run == 2 and task.trials == 3
    assert _records(partial) == 4          # + the re-measured default schedule


def test_tune_only_the_named_kernels(tmp_path):
    """only=[...] spends trials on the kernels named; the others are left untuned."""
    from mxc.backends.tvm.tune import tune
    graph = _cnn()
    mod = lower_graph(graph, shapes=CNN_SHAPE, params=_params(graph, CNN_SHAPE))
    report = tune(mod, "llvm", 1, tmp_path / "db", search="random", progress=False,
                  only=["max_pool"], verify=False, seed_default=False)
    assert len(report.tasks) >= 4
    tuned = [t for t in report.tasks if not t.skipped]
    # (its pooling reads the padding in place: schedules/pool_padding.py)
    assert [t.name for t in tuned] == ["max_pool2d_padded"] and tuned[0].trials_run == 1
    assert all(t.trials == 0 for t in report.tasks if t.skipped)
    assert _records(tmp_path / "db") == 1


def test_tune_progress_lines(resumed):
    text = resumed[2]
    assert "[mxc tune] 1 task(s)" in text
    assert "3/3 trials, best" in text and "ms" in text
    assert "[mxc tune] done" in text


def _write_model(tmp_path: Path):
    """The tiny conv as an MXNet checkpoint (symbol JSON + .params)."""
    from mxc.frontend.params import save_params
    graph = _tiny_conv()
    params = _params(graph, TINY_SHAPE)
    sym = S.Symbol.from_graph(graph) if hasattr(S, "Symbol") else None
    model = tmp_path / "tiny-symbol.json"
    if sym is not None and hasattr(sym, "save"):
        sym.save(str(model))
    else:  # pragma: no cover - older Symbol API
        from mxc.compiler.symbol import Symbol
        Symbol.from_graph(graph).save(str(model))
    save_params(str(tmp_path / "tiny-0000.params"), {f"arg:{k}": v for k, v in params.items()})
    return model, tmp_path / "tiny-0000.params", graph, params


def test_tune_cli_then_compile_with_the_database(tmp_path, capsys):
    from mxc.cli import main
    model, params_file, graph, params = _write_model(tmp_path)
    db = tmp_path / "db"
    rc = main(["tune", str(model), "--params", str(params_file), "--shape", "data=1,4,8,8",
               "--trials", "2", "--db", str(db), "--search", "random", "-q", "--no-verify"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "1 task(s)" in out and "trial(s)" in out
    assert _records(db) == 3
    rc = main(["tune", str(model), "--params", str(params_file), "--shape", "data=1,4,8,8",
               "--trials", "2", "--db", str(db), "--search", "random", "-q", "--no-verify"])
    assert rc == 0 and "already in the database" in capsys.readouterr().out
    assert _records(db) == 3
    # mxc.compile with the database: the kernel tune saw is the kernel compile builds
    from mxc.backends.tvm.compile import compile as compile_model
    from mxc.compiler.symbol import load
    stats = {}
    import mxc.backends.tvm.build as build
    real = build.build_module
    build.build_module = lambda mod, tgt, **kw: real(mod, tgt, stats=stats, **kw)
    try:
        with use_database(db):
            compiled = compile_model(load(str(model)), params, {"data": (1, 4, 8, 8)})
    finally:
        build.build_module = real
    assert stats and not any("conv" in name for name in stats), stats
    feed = np.random.RandomState(7).uniform(-1, 1, (1, 4, 8, 8)).astype("float32")
    got = compiled.run({"data": feed})
    got = got[0] if isinstance(got, (list, tuple)) else next(iter(got.values()))
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=ATOL)


def test_lower_model_gives_the_module_compile_builds():
    """``mxc tune`` tunes lower_model's module: built, it computes the model (the
    reference interpreter is the oracle) and has the functions compile's plan calls."""
    from mxc.backends.tvm.compile import compile as compile_model
    from mxc.backends.tvm.lower import lower_model
    graph = _tiny_conv()
    params = _params(graph, TINY_SHAPE)
    lowered = lower_model(graph, params, TINY_SHAPE)
    assert lowered.module is not None and lowered.target.kind.name == "llvm"
    model = compile_model(graph, params, TINY_SHAPE)
    functions = {gv.name_hint for gv in lowered.module.get_global_vars()}
    assert set(model.plan.functions()) <= functions
    (region,) = lowered.regions
    fname = lowered.functions[region.name][0].name
    exe = build_module(lowered.module, lowered.target)
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(exe, tvm.cpu())
    feed = np.random.RandomState(3).uniform(-1, 1, TINY_SHAPE["data"]).astype("float32")
    got = vm[fname](tvm.runtime.tensor(feed))[0].numpy()   # a region returns a tuple
    want = run_graph(graph, {"data": feed, **params})[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------
# measuring through TVM's RPC tracker (loopback only, bounded time)
# ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen) -> None:
    """Stop *proc* and the processes it started (its own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):     # SIGKILL: whatever is left
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _group_members(pgid: int) -> list[int]:
    """The live processes of process group *pgid* (zombies excluded)."""
    import psutil
    members = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return members


def _wait_for_port(port: int, timeout_s: float) -> None:
    """Until something listens on 127.0.0.1:*port* (or *timeout_s* passed)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)


@pytest.mark.slow
def test_tune_measures_through_an_rpc_tracker(tmp_path):
    pytest.importorskip("tornado")     # TVM's RPC tracker needs it
    from mxc.backends.tvm.tune import tune
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    tracker = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
         "--port", str(port), "--port-end", str(port + 1)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    server = None
    try:
        _wait_for_port(port, 60)    # the server registers with the tracker as it starts
        server = subprocess.Popen(
            [sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
             "--tracker", f"127.0.0.1:{port}", "--key", "mxc-test"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        from tvm import rpc
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                summary = rpc.connect_tracker("127.0.0.1", port).summary()
                if any(q.get("key") == "mxc-test" or "mxc-test" in str(q)
                       for q in summary.get("queue_info", {}).values()) or \
                        "mxc-test" in json.dumps(summary.get("queue_info", {})):
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.1)
        graph = _tiny_conv()
        mod = lower_graph(graph, shapes=TINY_SHAPE, params=_params(graph, TINY_SHAPE))
        report = tune(mod, "llvm", 2, tmp_path / "db", rpc=("127.0.0.1", port, "mxc-test"),
                      search="random", progress=False, timeout_s=60)
        assert report.trials_run == 2
        assert report.tasks[0].best_ms is not None
    finally:
        for proc in (server, tracker):
            if proc is not None:
                _stop_group(proc)
    # the server's worker process outlived the server (an orphan per run) before its
    # whole process group was stopped
    for proc in (server, tracker):
        deadline = time.time() + 10                  # a killed process takes a moment
        while _group_members(proc.pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not _group_members(proc.pid), proc.args
