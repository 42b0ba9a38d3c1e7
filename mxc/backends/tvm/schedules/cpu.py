"""Default (untuned) CPU schedules for the fused TIR kernels of a Relax module.

TVM's CPU pipeline leaves kernels unscheduled: one thread, scalar loops.
``cpu_schedule_pass`` gives every PrimFunc not already scheduled (e.g. by a
tuning database) a deterministic schedule, no measurement involved:

``reduction`` -- a kernel whose one reduction block has the output's
innermost (channel) axis as a spatial axis: channels-last conv2d (plain,
grouped, depthwise), pooling windows, global pooling, dense (``matmul`` with
the transposed constant weight), each with its fused elementwise epilogue
(BatchNorm affine, bias, residual add, relu/relu6 ...).  The classic
register-blocked direct-convolution micro-kernel::

    parallel for (co, n, h, wo):             # output tiles, channel block outermost
        acc[rw][nc] = init                   # registers: rw x nc/lanes vectors
        for (ry, rx, rc):                    # the reduction, in order
            for wi in unroll(rw):
                acc[wi][:] += x[.., wo*rw+wi, ..] * w[ry, rx, rc, co*nc:(co+1)*nc]
        out[...] = epilogue(acc)              # fused, vectorised

``elementwise`` -- injective kernels (layout transposes, padding, concat,
standalone activations): loops fused, outer part parallel, inner vectorised.

``fallback`` -- anything else: the outermost spatial loops of each block in
parallel.

Each rule works on a fresh schedule of the unmodified function and any error
means "not applicable": the next rule is tried, the last resort being the
unscheduled function (slow but correct).  The rules live in
:mod:`.reduction` (with the register-tile model :func:`tile_shape`),
:mod:`.elementwise` and :mod:`.winograd`; they decide on facts read from the
TIR's structure (:mod:`.tir_queries`).  This module orders them and applies
them to a module.
"""

from __future__ import annotations

import logging

import tvm
from tvm import s_tir, tirx

from .elementwise import rule_elementwise
from .microarch import CpuInfo, cpu_info  # noqa: F401 - re-exported: the schedules' API
from .module_utils import rewrite_functions
from .module_utils import root_blocks as _root_blocks
from .reduction import rule_reduction, tile_shape  # noqa: F401 - tile_shape re-exported

log = logging.getLogger(__name__)

_SCHEDULED = "tirx.is_scheduled"

def rule_fallback(func: tirx.PrimFunc, info: CpuInfo):
    """Parallelise the outermost data-parallel loop of each root block."""
    sch = s_tir.Schedule(func)
    done = False
    for b in _root_blocks(sch):
        loops = sch.get_loops(b)
        blk = sch.get(b)
        if not loops:
            continue
        lead = []
        for lp, iv in zip(loops, blk.iter_vars):
            if iv.iter_type != tirx.IterVar.DataPar:
                break
            lead.append(lp)
        if len(loops) != len(blk.iter_vars) or not lead:
            continue
        try:
            sch.parallel(sch.fuse(*lead) if len(lead) > 1 else lead[0])
            done = True
        except Exception:  # noqa: BLE001
            continue
    return sch if done else None


def rule_winograd(func: tirx.PrimFunc, info: CpuInfo):
    from .winograd import rule_winograd as rule
    return rule(func, info)


def rule_int8(func: tirx.PrimFunc, info: CpuInfo):
    from .int8 import rule_int8 as rule
    return rule(func, info)


def rule_bf16(func: tirx.PrimFunc, info: CpuInfo):
    from .bf16 import rule_bf16 as rule
    return rule(func, info)


RULES = (("winograd", rule_winograd), ("int8", rule_int8), ("bf16", rule_bf16), ("reduction", rule_reduction),
         ("elementwise", rule_elementwise), ("fallback", rule_fallback))


def default_schedule(func: tirx.PrimFunc, info: CpuInfo):
    """(rule name, ``s_tir.Schedule``) of the first rule that fits *func*, else (None, None).

    The schedule is traced: ``mxc tune`` stores it in the tuning database as a
    measured record, so tuned kernels never lose to the default ones."""
    for name, rule in RULES:
        try:
            sch = rule(func, info)
        except (ImportError, NameError):  # mxc's own bug, not a kernel the rule does not fit
            raise
        except Exception as exc:  # noqa: BLE001 - a rule that does not fit
            log.debug("schedule rule %s failed: %s", name, exc)
            continue
        if sch is not None:
            return name, sch
    return None, None


def schedule_func(func: tirx.PrimFunc, info: CpuInfo):
    """(rule name, scheduled PrimFunc) for *func*, or (None, func) when no rule applies."""
    name, sch = default_schedule(func, info)
    if sch is None:
        return None, func
    return name, sch.mod["main"].with_attr(_SCHEDULED, True)


def _is_scheduled(func) -> bool:
    return bool(func.attrs is not None and _SCHEDULED in func.attrs and
                int(func.attrs[_SCHEDULED]) == 1)


def cpu_schedule_pass(ctx, stats: dict | None = None) -> tvm.transform.Pass:
    """A module pass giving every unscheduled PrimFunc a default CPU schedule for the
    build *ctx* (:class:`..build_context.BuildContext`: its CPU; its ``progress`` hook
    hears each kernel's name, for the compile's progress line)."""
    info = ctx.cpu

    @tvm.transform.module_pass(opt_level=0, name="MxcCpuDefaultSchedule")
    def _pass(mod, _ctx):
        def schedule(gv, func):
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                return None
            if ctx.progress is not None:
                ctx.progress(gv.name_hint)
            name, new = schedule_func(func, info)
            if stats is not None:
                stats[gv.name_hint] = name
            return new if name is not None else None

        return rewrite_functions(mod, schedule)

    return _pass
