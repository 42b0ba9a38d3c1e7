"""The build stage of a compile: one ``tvm.compile`` of the lowered module.

:func:`build_lowered` builds a :class:`~.lower.LoweredModel`'s module for its
target in the build context made from the compile's options (their tuning
database, resolved when the compile began -- :class:`TunedKernels` notes which
kernels it supplied --, Winograd mode, precision, AMX emulation), and reports
TVM's passes to the progress display.  Nothing here looks a setting up again.  :func:`~mxc.backends.tvm.build.build_module` does the
compiling; this module decides what it is given.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from .compile_progress import CompileProgress
from .lower import LoweredModel
from .manifest import BuildRecord
from .options import CompileOptions

log = logging.getLogger("mxc.backends.tvm.compile")


def build_lowered(lowered: LoweredModel, options: CompileOptions,
                  prog: CompileProgress) -> tuple[Any, BuildRecord]:
    """``(Relax VM executable or None, BuildRecord)``; raises
    :class:`~mxc.errors.BackendError` when TVM fails.

    The database is ``options.db`` (the :func:`~.options.use_database` block's or
    ``$MXC_TUNING_DB`` already folded in by :meth:`~.options.CompileOptions.from_env`),
    carried by the build context as ``ctx.db``; the precision was checked against the
    CPU when the compile began (:func:`~.compile.compile_with`)."""
    tgt = lowered.target
    prog.start(f"build for {tgt.kind.name}")
    executable = None
    tuning = None
    record = BuildRecord()
    if lowered.module is not None:
        from .build_context import options_context
        from .schedules.families import winograd as _winograd
        ctx = options_context(options, tgt, lift=lowered.region_functions(),
                              progress=prog.note)
        if ctx.db is not None:
            from .tune.database import foreign_records_message
            tuning = TunedKernels(ctx.db)
            tuning.foreign = foreign_records_message(ctx.db, tgt)
            if tuning.foreign:
                log.warning("%s", tuning.foreign)
        executable = _build(lowered.module, tgt, prog, tuning, ctx)
        record.lifted = ctx.records.lifted
        if lowered.regions and tgt.kind.name == "llvm":
            record.winograd = _winograd.manifest_record(ctx.records.winograd, record.lifted)
        record.precision = dict(ctx.records.precision)
    summary = "one library" if executable is not None else "nothing to compile"
    if tuning is not None:
        summary += (f", {len(tuning.tuned)} of {tuning.kernels} kernel(s) from the tuning "
                    f"database")
        record.tuning = tuning.as_manifest()
    lowered.timings["build"] = prog.done(summary)
    return executable, record


def _build(mod, tgt, prog: CompileProgress, tuning: "TunedKernels | None", ctx):
    from . import build as _build_module   # looked up per call (tests wrap build_module)
    kwargs = {"ctx": ctx}   # the settings, the database included, travel in the context
    instruments = []
    if prog.tty:
        instruments.append(_pass_counter(prog))
    if tuning is not None:
        instruments.append(tuning.instrument())
    instruments = [i for i in instruments if i is not None]
    if not instruments:
        return _build_module.build_module(mod, tgt, **kwargs)
    import tvm
    cur = tvm.transform.PassContext.current()
    pass_ctx = tvm.transform.PassContext(
        opt_level=cur.opt_level, required_pass=cur.required_pass,
        disabled_pass=cur.disabled_pass, config=cur.config,
        instruments=list(cur.instruments) + instruments)
    with pass_ctx:
        return _build_module.build_module(mod, tgt, **kwargs)


#: the TVM pass that replaces kernels by their tuned schedules from a database
_APPLY_DATABASE = "MetaScheduleApplyDatabase"


class TunedKernels:
    """Which kernels of a build came from the tuning database *path*.

    A pass instrument compares the module's kernels (TIR PrimFuncs) before and
    after ``MetaScheduleApplyDatabase``: the ones it replaced have a tuned
    schedule; the rest go on to the default schedules.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.kernels = 0              # kernels the database was asked about
        self.tuned: list[str] = []    # the ones it had a schedule for
        self.foreign: str | None = None  # records tuned for another CPU: the warning
        self._before: dict[str, Any] = {}

    def instrument(self):
        try:
            from tvm.ir.instrument import pass_instrument
        except ImportError:  # pragma: no cover
            return None
        owner = self

        @pass_instrument
        class _ApplyDatabaseWatch:
            def run_before_pass(self, mod, info):
                if info.name == _APPLY_DATABASE:
                    owner._before = _prim_funcs(mod)

            def run_after_pass(self, mod, info):
                if info.name == _APPLY_DATABASE:
                    after = _prim_funcs(mod)
                    # a rebuild (the vectorisation fallback) counts once: last one wins
                    owner.kernels = len(owner._before)
                    owner.tuned = sorted(k for k, f in owner._before.items()
                                         if k in after and not after[k].same_as(f))
                    owner._before = {}

        return _ApplyDatabaseWatch()

    def as_manifest(self) -> dict:
        return {"path": os.path.abspath(self.path), "kernels": self.kernels,
                "kernels_tuned": len(self.tuned), "tuned": list(self.tuned),
                "warning": self.foreign}


def _prim_funcs(mod) -> dict:
    import tvm
    prim = getattr(tvm, "tirx", None)
    prim_func = getattr(prim, "PrimFunc", None) or tvm.tir.PrimFunc
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, prim_func)}


def _pass_counter(prog: CompileProgress):
    """A TVM pass instrument that shows the pass being run (terminal progress only)."""
    try:
        from tvm.ir.instrument import pass_instrument
    except ImportError:  # pragma: no cover
        return None

    @pass_instrument
    class _Count:
        def __init__(self):
            self.n = 0

        def run_before_pass(self, mod, info):
            self.n += 1
            prog.note(f"pass {self.n}: {info.name}")

    return _Count()
