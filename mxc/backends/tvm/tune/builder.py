"""A MetaSchedule builder whose worker processes serve a whole tuning run.

TVM's ``LocalBuilder`` starts a fresh pool of worker processes for every batch
of candidates, and one more in its constructor only to check that the build
function exists.  Each worker imports TVM and runs mxc's initializer (the build
functions and the CPU tensor intrinsics, :func:`.workers.builder_init`):
about 2 s of start-up per worker, per batch, where building one small kernel
takes a fraction of a second.  A tune builds a model's default schedules, one
batch or more per kernel and the verification candidates, so start-up was most
of a short tune's time (a one-kernel, two-trial tune: 13 s, of which about 7 s
were three pool start-ups).

:func:`pooled_builder` keeps one pool for the builder's life (one
:func:`mxc.backends.tvm.tune._tune_groups` call): the constructor's check runs on it and every
batch reuses its warm workers.  TVM restarts its pools because workers were seen
to leak memory over long use; here each worker process is replaced after
:data:`MAX_BUILDS_PER_WORKER` builds, which bounds that, and a worker that dies
or times out is restarted on its next build (``PopenWorker`` does this).  The
pool is the builder's ``pool`` attribute, which ``_tune_groups`` shuts down.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

#: builds one worker process serves before it is replaced by a fresh one (bounds
#: the memory long-lived TVM build workers accumulate)
MAX_BUILDS_PER_WORKER = 128


def pooled_builder(*, max_workers: int, timeout_sec: float, f_build: str,
                   initializer) -> Any:
    """A ``LocalBuilder`` (same arguments) whose worker pool lives as long as it does."""
    return _pooled_builder_class()(max_workers=max_workers, timeout_sec=timeout_sec,
                                   f_build=f_build, initializer=initializer)


@lru_cache(maxsize=None)
def _pooled_builder_class():
    """The builder class, made on first use: importing TVM is deferred until a tune."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, LocalBuilder
    from tvm.s_tir.meta_schedule.builder import local_builder
    from tvm.s_tir.meta_schedule.utils import get_global_func_with_default_on_worker
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    def check_functions(f_build, f_export) -> None:
        """Run in a worker: fails when the build or export function is not registered."""
        get_global_func_with_default_on_worker(name=f_build, default=None)
        get_global_func_with_default_on_worker(name=f_export, default=None)

    @derived_object
    class PooledBuilder(LocalBuilder._cls):  # noqa: SLF001 - TVM's way to extend it
        """``LocalBuilder`` with one worker pool for all its batches."""

        pool = None

        def _sanity_check(self) -> None:
            # LocalBuilder's constructor calls this: start the pool kept for the batches
            # and check the functions on it (its first worker is then warm; the others
            # start with the first batch that needs them)
            self.pool = PopenPoolExecutor(max_workers=self.max_workers,
                                          timeout=self.timeout_sec,
                                          initializer=self.initializer,
                                          maximum_process_uses=MAX_BUILDS_PER_WORKER)
            self.pool.submit(check_functions, self.f_build, self.f_export).result()

        def build(self, build_inputs):
            jobs = [(self.f_build, self.f_export, item.mod, item.target,
                     local_builder._serialize_params(item.params))  # noqa: SLF001
                    for item in build_inputs]
            results = []
            for outcome in self.pool.map_with_error_catching(
                    lambda job: local_builder._worker_func(*job), jobs):  # noqa: SLF001
                if outcome.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(outcome.value, None))
                elif outcome.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(
                        None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds"))
                else:
                    results.append(BuilderResult(
                        None, f"LocalBuilder: An exception occurred\n{outcome.value}"))
            return results

    return PooledBuilder


class RunWorkers:
    """The builder and runner of one tuning run, each made on first use.

    Both start worker processes as they are made; a run with nothing to build
    (every kernel tuned and verified already: a second ``mxc tune`` of a model)
    then starts none.  :meth:`close` shuts down the pools of those made.
    """

    def __init__(self, make_builder: Callable[[], Any], make_runner: Callable[[], Any]):
        self._makers = {"builder": make_builder, "runner": make_runner}
        self._made: dict[str, Any] = {}

    def _get(self, kind: str) -> Any:
        if kind not in self._made:
            self._made[kind] = self._makers[kind]()
        return self._made[kind]

    @property
    def builder(self) -> Any:
        return self._get("builder")

    @property
    def runner(self) -> Any:
        return self._get("runner")

    def close(self) -> None:
        for made in self._made.values():
            pool = getattr(made, "pool", None)
            if pool is not None:
                try:
                    pool.shutdown(wait=False)
                except Exception:  # noqa: BLE001 - cleaning up after the run
                    pass
