"""Compile a lowered Relax module into a VM executable.

:func:`build_module` runs mxc's pipeline for the target:

* CPU (``llvm``): :func:`mxc.backends.tvm.schedules.pipeline.cpu_pipeline` --
  numpy constant folding, channels-last convolutions with weights packed at
  compile time, fusion, tuned kernels from a database (``db=``, see
  :mod:`mxc.backends.tvm.tune`) and mxc's default schedules for the rest
  (parallel, vectorised, register-blocked); then TVM's TIR lowering plus one
  pass keeping small buffers on the stack (``schedules/tir_pipeline.py``).
  ``optimize=False`` gives TVM's stock ``relax.get_default_pipeline`` instead.
  ``docs/performance.md`` describes it.
* GPU: TVM's CUDA passes with the ``tvm.s_tir.dlight`` default schedules
  (Matmul, GEMV, Reduction, GeneralReduction, Fallback) so every kernel gets
  thread bindings; nvcc compiles the kernels into a fatbin with SASS and PTX
  for the target's architecture (:mod:`mxc.backends.tvm.cuda_binary`).

Targets are TVM 0.27 dicts or ``tvm.target.Target``s; the strings ``"llvm"``
(or ``"cpu"``) and ``"cuda"`` are shorthands: ``"llvm"`` is the host CPU with
its features detected (``{"kind": "llvm", "mcpu": <host cpu>}``), ``"cuda"``
the visible GPU's architecture (or ``$MXC_CUDA_ARCH``, default ``sm_75``, the
oldest architecture nvcc 13 still supports, when no GPU is visible, so
modules can be compiled on GPU-less build machines).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ...runtime.threads import configure_pool

configure_pool()  # size TVM's thread pool before tvm can create it
import tvm  # noqa: E402
from tvm import relax

from ...errors import BackendError
from ...interrupts import watch_interrupts
# the database block lives with the options (no TVM needed); importable from here as before
from .options import ENV_TUNING_DB as DB_ENV  # noqa: E402,F401 - read by the options layer
from .options import use_database  # noqa: E402,F401

# target resolution lives in targets.py (tune and its workers use it without importing
# this module); the names stay importable from here
from .cuda_binary import device_compiler  # noqa: E402
from .targets import (  # noqa: E402,F401
    DEFAULT_CUDA_ARCH, host_target, is_gpu_target, resolve_target)


class _Guarded:
    """A dlight schedule rule whose failures mean "not applicable" (try the next rule).

    Every rule builds its schedule from the unmodified function, so falling
    through to the next rule (``Fallback`` last) is safe.  Two TVM 0.27
    problems are avoided: a rule raising on a kernel it claims, and the
    (General)Reduction rules claiming convolutions that ``Matmul`` does not
    recognise (grouped ``conv2d``): their cross-thread-reduction schedule
    fails later in TIR lowering ("reduction-related loops ... are not the
    deepest").
    """

    def __init__(self, rule, skip_convolutions: bool = False):
        self.rule = rule
        self.skip_convolutions = skip_convolutions

    def apply(self, func, target, tunable):
        try:
            if self.skip_convolutions and _has_conv_block(func):
                return None
            return self.rule.apply(func, target, tunable)
        except Exception:  # a rule bug, not a property of the model
            return None


def _has_conv_block(func) -> bool:
    from tvm import s_tir
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    infos = normalize_prim_func(s_tir.Schedule(func)) or []
    return any("conv" in info.name for info in infos)


def _guard(rule, skip_convolutions: bool = False):
    from tvm.s_tir import dlight as dl

    guarded = _Guarded(rule, skip_convolutions)
    return dl.ScheduleRule.from_callable(f"guarded_{type(rule).__name__}")(guarded.apply)


def gpu_schedule_pass():
    """dlight's default GPU schedules (Matmul, GEMV, Reduction, GeneralReduction, Fallback)."""
    from tvm.s_tir import dlight as dl

    return dl.ApplyDefaultSchedule(
        _guard(dl.gpu.Matmul()), _guard(dl.gpu.GEMV()),
        _guard(dl.gpu.Reduction(), skip_convolutions=True),
        _guard(dl.gpu.GeneralReduction(), skip_convolutions=True),
        _guard(dl.gpu.Fallback()))


def relax_pipeline(target: tvm.target.Target, *, optimize: bool = True,
                   stats: dict | None = None, ctx=None):
    """The Relax pipeline mxc compiles *target* with, in the build context *ctx* (its
    tuning database ``ctx.db``, resolved when the build began; None: none).

    CPU (``optimize=True``, the default): mxc's CPU pipeline
    (:func:`mxc.backends.tvm.schedules.pipeline.cpu_pipeline`: numpy constant
    folding, channels-last convolutions, fusion, tuned schedules from the database
    when there is one, default schedules for every other kernel).  ``optimize=False``:
    TVM's stock ``relax.get_default_pipeline`` (unscheduled kernels).  GPUs:
    TVM's CUDA passes with guarded dlight default schedules (and the database's tuned
    kernels first when there is one).
    """
    db = ctx.db if ctx is not None else None
    if not is_gpu_target(target):
        if not optimize:
            return relax.get_default_pipeline(target)
        from .schedules.pipeline import cpu_pipeline
        return cpu_pipeline(target, stats=stats, ctx=ctx)
    from tvm.relax.backend.cuda import pipeline as cuda

    @tvm.transform.module_pass(opt_level=0, name="MxcGpuPipeline")
    def _pipeline(mod, _ctx):
        with target:
            passes = (cuda.library_dispatch_passes(target)
                      + [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                         relax.transform.FoldConstant(), relax.transform.FuseOps(),
                         relax.transform.FuseTIR()]
                      + ([relax.transform.MetaScheduleApplyDatabase(db)]
                         if db is not None else [])
                      + [gpu_schedule_pass()]
                      + cuda.dataflow_lower_passes(target)
                      + cuda.finalize_passes(target))
            return tvm.transform.Sequential(passes)(mod)

    return _pipeline


def build_module(mod: tvm.IRModule, target: Any = "llvm", *,
                 db: str | os.PathLike | None = None,
                 optimize: bool = True,
                 stats: dict | None = None,
                 ctx=None) -> relax.VMExecutable:
    """Compile a Relax module (from :func:`lower_graph`) for *target*.

    Returns the Relax VM executable; run it with :func:`mxc.backends.tvm.run_module`
    or ``relax.VirtualMachine(exe, device)``.  Raises
    :class:`~mxc.errors.BackendError` when TVM fails.

    db:
        a tuning database directory (``mxc tune --db``, :func:`mxc.backends.tvm.tune.tune`):
        kernels it holds a tuned schedule for use it, the others get the default
        schedules.  Default: the :func:`use_database` block's, else none, looked up now,
        once, into the build's context.  A directory without a database is an error.
        Only for a module built on its own: a *ctx* carries its own ``db``.
    optimize:
        False compiles with TVM's stock pipeline (no layout change, no default
        schedules: slow code, for debugging the optimisations).
    stats:
        a dict to fill with ``{kernel name: rule}`` -- which default schedule
        each kernel got (``None``: none applied; kernels tuned from *db* are absent).
    ctx:
        the build's :class:`~mxc.backends.tvm.build_context.BuildContext` (Winograd
        mode, precision, tuning database, load-time lifting, the records they fill);
        default: a module built on its own, with the defaults (``mxc.compile`` passes
        its own).  The build runs with it entered (``with ctx:``), so code that cannot
        be handed it reads :func:`~.build_context.current_context`.
    """
    from .tvm_threads import per_thread_block_builders
    per_thread_block_builders()   # legalization builds Relax in this thread
    tgt = resolve_target(target)
    if ctx is None:   # a module built on its own: its settings resolved here, once
        from .build_context import build_context
        from .options import resolve_database
        db = resolve_database(db)
        if db is not None:
            from .tune import check_database
            db = check_database(db)
        ctx = build_context(tgt, db=db, record=False)
    elif db is not None:
        raise BackendError("build_module: give db= or a ctx (which carries its db), "
                           "not both")
    pipeline = relax_pipeline(tgt, optimize=optimize, stats=stats, ctx=ctx)
    tir = "default"
    if optimize and not is_gpu_target(tgt):
        from .schedules.tir_pipeline import tir_pipeline
        tir = tir_pipeline()
    device = (device_compiler(str(tgt.attrs.get("arch", DEFAULT_CUDA_ARCH)))
              if tgt.kind.name == "cuda" else contextlib.nullcontext())
    # a Ctrl-C reaching TVM's C++ code comes back as whatever TVM makes of it (often an
    # empty RuntimeError): the watch turns the failure it causes into KeyboardInterrupt
    with watch_interrupts(), ctx:
        return _compile(mod, tgt, pipeline, tir, device, optimize, stats, ctx)


def _compile(mod, tgt, pipeline, tir, device, optimize, stats, ctx):
    """``tvm.compile``, once more without vectorisation if an intrinsic has no vector form."""
    try:
        with device:
            return tvm.compile(mod, target=tgt, relax_pipeline=pipeline, tir_pipeline=tir)
    except BackendError:
        raise
    except Exception as exc:
        if tir != "default" and "unknown intrinsic" in str(exc):
            # an intrinsic without a vector lowering in a vectorised kernel: build again
            # with vectorisation off rather than fail (slower, but correct)
            try:
                cur = tvm.transform.PassContext.current()
                config = {**dict(cur.config), "tirx.disable_vectorize": True}
                with tvm.transform.PassContext(opt_level=cur.opt_level, config=config,
                                               required_pass=cur.required_pass,
                                               disabled_pass=cur.disabled_pass,
                                               instruments=list(cur.instruments)):
                    pipeline = relax_pipeline(tgt, optimize=optimize, stats=stats, ctx=ctx)
                    return tvm.compile(mod, target=tgt, relax_pipeline=pipeline,
                                       tir_pipeline=tir)
            except Exception:  # noqa: BLE001 - report the first error
                pass
        raise BackendError(f"TVM compilation for {tgt.kind.name} failed: "
                           f"{type(exc).__name__}: {exc}") from exc
