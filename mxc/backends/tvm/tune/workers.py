"""What MetaSchedule's builder workers (and the tuning process) need registered.

MetaSchedule builds candidates in worker processes that call a build function
by its registered name: :data:`BUILD_FUNC` builds with mxc's TIR pipeline (as
``build_module`` will), :data:`PROXY_BUILD_FUNC` does the same for this CPU
(measuring a target this CPU cannot execute).  Its schedule rules for x86 and
ARM look up TVM's CPU tensor intrinsics by name (``dot_16x4_vnni``,
``dot_16x4_avx512`` ...): :func:`register_cpu_tensor_intrinsics` registers those
without the GPU tables.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator


def _build(mod, target, _params):
    """Build a measured candidate with mxc's TIR pipeline (as ``build_module`` will)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    from ..schedules.tir_pipeline import tir_pipeline
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.tirx.build(mod, target=target, pipeline=tir_pipeline())


#: the build function MetaSchedule's builder workers call (registered by _builder_init)
BUILD_FUNC = "mxc.tune.build"
#: the same, building for this CPU: measuring a target this CPU cannot execute
PROXY_BUILD_FUNC = "mxc.tune.build_on_host"


def _build_on_host(mod, _target, params):
    """Build a candidate for this CPU instead of the tuning target (proxy measurement:
    the target's code would not run here; see :func:`measurement_target`)."""
    from ..targets import resolve_target
    return _build(mod, resolve_target("llvm"), params)


def builder_init() -> None:
    """Builder worker set-up: register :data:`BUILD_FUNC` (and its host-proxy variant)
    and the CPU tensor intrinsics MetaSchedule's builder would import with all the others."""
    import tvm

    from ..schedules.base.int8_steps import register_dot_intrinsics
    register_cpu_tensor_intrinsics()
    register_dot_intrinsics()      # mxc's int8 kernels' vpdpbusd (their default schedules)
    tvm.register_global_func(BUILD_FUNC, _build, override=True)
    tvm.register_global_func(PROXY_BUILD_FUNC, _build_on_host, override=True)


#: the CPU families of TVM's tensor intrinsics (x86: VNNI, AVX-512, AMX; arm: NEON, SDOT ...)
CPU_INTRIN_MODULES = ("x86", "arm_cpu", "riscv_cpu")


def register_cpu_tensor_intrinsics() -> None:
    """Register TVM's CPU tensor intrinsics (``dot_16x4_vnni``, ``dot_16x4_avx512`` ...),
    which MetaSchedule's x86/ARM schedule rules look up, without the GPU tables.

    Importing ``tvm.s_tir.tensor_intrin`` builds every table (CUDA, ROCm, Hexagon,
    Metal: about 25 s); the CPU modules alone take about 2 s.  When the package is
    not imported yet, it is put in ``sys.modules`` as a plain package over TVM's own
    directory (its ``__init__`` not run) and the CPU modules are imported from it;
    MetaSchedule's own ``import tvm.s_tir.tensor_intrin`` then finds it.  A later
    real import for a GPU target (:func:`tensor_intrinsics_for`) runs the package's
    ``__init__``, which reuses the CPU modules already imported.
    """
    import importlib
    import importlib.util
    import types
    name = "tvm.s_tir.tensor_intrin"
    if name not in sys.modules:
        spec = importlib.util.find_spec(name)
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations or [])
        package.__package__ = name
        package.__spec__ = spec
        package._mxc_cpu_only = True
        sys.modules[name] = package
    for family in CPU_INTRIN_MODULES:
        importlib.import_module(f"{name}.{family}")


def tensor_intrinsics_for(target) -> None:
    """Register the tensor intrinsics MetaSchedule's rules for *target* need."""
    import importlib
    name = "tvm.s_tir.tensor_intrin"
    if target.kind.name == "llvm":
        register_cpu_tensor_intrinsics()
        return
    if getattr(sys.modules.get(name), "_mxc_cpu_only", False):
        del sys.modules[name]          # let the real package __init__ run
    importlib.import_module(name)


@contextlib.contextmanager
def workers_deaf_to_ctrl_c() -> Iterator[None]:
    """MetaSchedule's builder and runner worker processes started in the block never see
    SIGINT, and the worker pools the block leaves behind are shut down as it ends.

    A terminal sends Ctrl-C to the whole foreground process group: the workers
    (``python -m tvm.exec.popen_worker``) died with a ``KeyboardInterrupt``
    traceback each, mid-import or mid-measurement, and the tuning process saw
    failed candidates instead of an interruption.  Only the tuning process should
    answer Ctrl-C.  A worker starts from one of its pool's threads, not the main
    thread, so it cannot be started with SIGINT ignored; it is started with SIGINT
    *blocked* in the starting thread instead, a mask the child inherits through
    fork and exec (Python never unblocks it).

    An interruption may also abandon a pool with its work in flight (TVM's
    ``LocalBuilder.build`` made one per batch; the runner's, or a verification's,
    still can); the last reference then dies in one of the pool's own
    threads, whose ``__del__`` cannot join itself ("Exception ignored ... cannot join
    current thread").  Every pool made in the block is shut down here, in this
    thread, its workers killed.
    """
    try:
        from tvm.support.popen_pool import PopenPoolExecutor, PopenWorker
    except ImportError:  # pragma: no cover - another TVM layout: workers as they are
        yield
        return
    start, init = PopenWorker._start, PopenPoolExecutor.__init__
    pools: list = []

    def start_blocked(self):
        if not hasattr(signal, "pthread_sigmask"):   # pragma: no cover - Windows
            return start(self)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return start(self)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def init_tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        pools.append(self)

    PopenWorker._start, PopenPoolExecutor.__init__ = start_blocked, init_tracked
    try:
        yield
    finally:
        PopenWorker._start, PopenPoolExecutor.__init__ = start, init
        for pool in pools:
            if not getattr(pool, "_shutdown", True):
                try:
                    pool.shutdown(wait=True)
                except Exception:  # noqa: BLE001 - cleaning up after the run
                    pass
