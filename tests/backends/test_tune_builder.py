"""A tuning run's build workers start once, not once per batch (tune/builder.py).

TVM's LocalBuilder started a pool of worker processes for its constructor's
check and again for every batch, each worker importing TVM and registering
mxc's build functions (about 2 s); ``mxc tune`` now keeps one pool per run,
replacing each worker after a bounded number of builds.  Counted here: the
worker processes started (TVM's ``PopenWorker._start``), the candidates built
(artifacts that exist), and that no worker outlives the run.
"""

from __future__ import annotations

import os

import psutil
import pytest

pytest.importorskip("tvm")

from conftest import tiny_conv  # noqa: E402


def _module():
    """conftest's one-kernel tiny convolution, lowered."""
    return tiny_conv()[2]


@pytest.fixture
def build_worker_starts(monkeypatch):
    """A list that gets one entry per build worker process started (workers with
    mxc's builder initializer; the runner's are not counted)."""
    from tvm.support.popen_pool import PopenWorker

    from mxc.backends.tvm.tune.workers import builder_init
    starts: list[int] = []
    real = PopenWorker._start

    def counting(self):
        if self._initializer is builder_init:
            starts.append(1)
        return real(self)

    monkeypatch.setattr(PopenWorker, "_start", counting)
    return starts


def _popen_workers() -> set[int]:
    """The TVM worker processes this process started (directly or not) that still live."""
    found = set()
    for p in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "tvm.exec.popen_worker" in " ".join(p.cmdline()) and \
                    p.status() != psutil.STATUS_ZOMBIE:
                found.add(p.pid)
        except psutil.Error:
            pass
    return found


def test_a_tune_of_several_batches_starts_one_build_worker(build_worker_starts, tmp_path):
    """One worker (max_workers=1) builds the default schedule and three one-candidate
    batches; LocalBuilder started five (its check, the default, each batch)."""
    from mxc.backends.tvm.tune import tune
    before = _popen_workers()           # other tests' pools (none, normally)
    report = tune(_module(), "llvm", 3, tmp_path / "db", search="random", progress=False,
                  verify=False, max_workers=1, trials_per_iter=1)
    (task,) = report.tasks
    assert task.trials_run == 3 and task.default_ms is not None
    assert len(build_worker_starts) == 1
    assert not _popen_workers() - before, "a worker process outlived the tune"


def _kernel():
    """A PrimFunc module of the tiny conv's kernel, with mxc's default schedule."""
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.schedules.cpu import default_schedule
    from mxc.backends.tvm.targets import resolve_target
    from mxc.backends.tvm.tune import _tuning_target, extract_tasks
    target = _tuning_target(resolve_target("llvm"))
    task = extract_tasks(_module(), target)[0]
    _, sch = default_schedule(task.dispatched[0]["main"], build_context(target, record=False))
    return sch.mod, target


def test_a_worker_is_replaced_after_its_share_of_builds(build_worker_starts, monkeypatch):
    """With two builds per worker: the constructor's check and the first build use the
    first worker, builds two and three a second; every build yields its artifact."""
    from tvm.s_tir import meta_schedule as ms

    from mxc.backends.tvm.tune import builder as tune_builder
    from mxc.backends.tvm.tune.workers import BUILD_FUNC, builder_init
    monkeypatch.setattr(tune_builder, "MAX_BUILDS_PER_WORKER", 2)
    mod, target = _kernel()
    before = _popen_workers()
    builder = tune_builder.pooled_builder(max_workers=1, timeout_sec=60, f_build=BUILD_FUNC,
                                          initializer=builder_init)
    try:
        for _ in range(3):
            (result,) = builder.build([ms.builder.BuilderInput(mod, target)])
            assert result.error_msg is None, result.error_msg
            assert os.path.isfile(result.artifact_path)
            os.remove(result.artifact_path)
    finally:
        builder.pool.shutdown()
    assert len(build_worker_starts) == 2
    assert not _popen_workers() - before


def test_a_build_that_fails_is_reported_and_the_next_one_builds(monkeypatch):
    """A worker whose build raises reports the error as LocalBuilder does; the pool
    goes on building."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from mxc.backends.tvm.tune import builder as tune_builder
    from mxc.backends.tvm.tune.workers import BUILD_FUNC, builder_init
    mod, target = _kernel()
    builder = tune_builder.pooled_builder(max_workers=1, timeout_sec=60, f_build=BUILD_FUNC,
                                          initializer=builder_init)
    # a GPU warp intrinsic: LLVM's CPU code generator refuses it
    warp = tvm.tirx.call_intrin("float32", "tirx.tvm_warp_activemask")
    broken = tvm.IRModule({"main": tvm.tirx.PrimFunc([], tvm.tirx.Evaluate(warp))
                           .with_attr("global_symbol", "main")})
    try:
        bad, good = builder.build([ms.builder.BuilderInput(broken, target),
                                   ms.builder.BuilderInput(mod, target)])
        assert bad.artifact_path is None and "An exception occurred" in bad.error_msg
        assert "unknown intrinsic" in bad.error_msg
        assert good.error_msg is None and os.path.isfile(good.artifact_path)
        os.remove(good.artifact_path)
    finally:
        builder.pool.shutdown()
