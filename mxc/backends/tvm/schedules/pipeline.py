"""The mxc CPU compilation pipeline (see ``docs/performance.md``)."""

from __future__ import annotations

import tvm
from tvm import relax

from ..build_context import BuildContext, build_context
from ..load_time import lift_load_time_pass
from .families.bf16 import note_single_uses
from .cpu import cpu_schedule_pass
from .fold import fold_constants_numpy, inline_scalar_constants
from .layout import channels_last_pass
from .legalize import cpu_legalize_map
from .nan_select import nan_select_one_compare
from .pool_padding import pool_padding_in_place


def graph_passes(ctx: BuildContext, layout: bool = True) -> list:
    """Relax-level passes up to fused TIR kernels (what tuning extracts tasks from), for
    the build *ctx* (its CPU, Winograd mode, precision and load-time lifting)."""
    passes = [fold_constants_numpy]
    legalize_map = None
    if layout:
        passes += [channels_last_pass(ctx.cpu), pool_padding_in_place, nan_select_one_compare]
        legalize_map = cpu_legalize_map(ctx)
    passes += [
        relax.backend.DispatchSampling(),
        relax.backend.DispatchSortScan(),
        note_single_uses(ctx),      # bf16: which inputs' rounding may join their producer
        relax.transform.LegalizeOps(legalize_map),
        lift_load_time_pass(ctx),   # weight transforms: to load time, or folded in numpy
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        inline_scalar_constants,
        relax.transform.DeadCodeElimination(),
    ]
    return passes


def cpu_pipeline(target: tvm.target.Target, *, layout: bool = True,
                 schedule: bool = True, stats: dict | None = None,
                 ctx: BuildContext | None = None, rules: list | None = None) -> tvm.transform.Pass:
    """Graph passes, tuned schedules from the context's database, default schedules, VM
    lowering.

    *ctx*: the build's context, whose ``db`` (resolved when the build began) is the one
    database read here (default: a module built on its own for *target*, no database);
    *rules*: the default-schedule rules (default :data:`.cpu.RULES`)."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    if ctx is None:
        ctx = build_context(target, record=False)
    db = ctx.db

    @tvm.transform.module_pass(opt_level=0, name="MxcCpuPipeline")
    def _pipeline(mod, _ctx):
        with target:
            mod = tvm.transform.Sequential(graph_passes(ctx, layout))(mod)
            if db is not None:
                from ..tune.verify import applied_database
                # each kernel's best record, except those re-measurement found no faster
                # than the default schedule (those kernels keep it: tuning never loses)
                database = applied_database(db)
                with database:   # (a work_dir argument would make the pass log a warning)
                    mod = relax.transform.MetaScheduleApplyDatabase()(mod)
            passes = [cpu_schedule_pass(ctx, stats, rules)] if schedule else []
            passes += cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target)
            return tvm.transform.Sequential(passes)(mod)

    return _pipeline
