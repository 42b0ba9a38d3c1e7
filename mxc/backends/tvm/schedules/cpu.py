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

The rules are objects (:class:`ScheduleRule`, dlight's style) in an explicit
list, :data:`RULES`, handed to the schedule pass.  Each works on a fresh
schedule of the unmodified function and returns None when the kernel is not
one it schedules: the next rule is tried, the last resort being the
unscheduled function (slow but correct).  An exception inside a rule is a bug,
not "not applicable": with the build context's ``strict`` (the test suite's
``$MXC_STRICT_SCHEDULES``) it fails the build naming the rule; otherwise it is
logged as a warning naming the rule, and the next rule is tried.  The kernel
families' rules live in ``families/`` (:mod:`.families.reduction`,
:mod:`.families.winograd`, the int8, bf16 and AMX ones), on the shared machinery of
``base/`` (the register-tile model :func:`.base.register_tile.tile_shape`); the
generic ``elementwise`` and ``fallback`` rules live here.  They decide on facts read
from the TIR's structure (:mod:`.base.tir_queries`).  This module orders them and
applies them to a module.
"""

from __future__ import annotations

import logging

import tvm
from tvm import s_tir, tirx

from .base.elementwise import schedule_elementwise_block
from .base.microarch import CpuInfo, cpu_info  # noqa: F401 - re-exported: the schedules' API
from .base.module_utils import inline_injective, is_spatial, rewrite_functions
from .base.module_utils import root_blocks as _root_blocks
from .base.register_tile import tile_shape  # noqa: F401 - re-exported: the schedules' API
from .families.reduction import rule_reduction

log = logging.getLogger(__name__)

_SCHEDULED = "tirx.is_scheduled"


class ScheduleRule:
    """A default-schedule rule: ``apply(func, target, ctx)`` returns a traced
    ``s_tir.Schedule`` of *func*, or None when *func* is not a kernel it schedules.

    *ctx* is the build's :class:`~mxc.backends.tvm.build_context.BuildContext`
    (its ``cpu`` is the cost-model row the rules decide with).  This base class
    adapts a function ``schedule(func, cpu_info)``; a rule needing more overrides
    :meth:`apply`."""

    def __init__(self, name: str, schedule=None):
        self.name = name
        self._schedule = schedule

    def apply(self, func: tirx.PrimFunc, target, ctx):
        return self._schedule(func, ctx.cpu)

    def __repr__(self) -> str:
        return f"ScheduleRule({self.name!r})"

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


def rule_elementwise(func: tirx.PrimFunc, info: CpuInfo):
    """The ``elementwise`` rule: every block of an all-spatial kernel scheduled by
    :func:`.base.elementwise.schedule_elementwise_block` (None: a block reduces)."""
    sch = s_tir.Schedule(func)
    blocks = _root_blocks(sch)
    if not blocks or any(not is_spatial(sch.get(b)) for b in blocks):
        return None
    params = list(func.params)   # a block writing one of these writes an output
    inline_injective(sch, params)
    for b in _root_blocks(sch):
        schedule_elementwise_block(sch, b, info)
    return sch


def _winograd(func: tirx.PrimFunc, info: CpuInfo):
    from .families.winograd import rule_winograd as rule
    return rule(func, info)


def _int8(func: tirx.PrimFunc, info: CpuInfo):
    from .families.int8 import rule_int8 as rule
    return rule(func, info)


def _bf16(func: tirx.PrimFunc, info: CpuInfo):
    from .families.bf16 import rule_bf16 as rule
    return rule(func, info)


def _bf16_amx(func: tirx.PrimFunc, info: CpuInfo):
    from .families.bf16_amx import rule_amx as rule
    return rule(func, info)


def _int8_amx(func: tirx.PrimFunc, info: CpuInfo):
    from .families.int8_amx import rule_amx as rule
    return rule(func, info)


#: the rules, in the order they are tried (the first that returns a schedule wins)
RULES: list[ScheduleRule] = [
    ScheduleRule("winograd", _winograd), ScheduleRule("int8_amx", _int8_amx),
    ScheduleRule("int8", _int8),
    ScheduleRule("bf16_amx", _bf16_amx), ScheduleRule("bf16", _bf16),
    ScheduleRule("reduction", rule_reduction),
    ScheduleRule("elementwise", rule_elementwise), ScheduleRule("fallback", rule_fallback),
]


def default_schedule(func: tirx.PrimFunc, ctx, rules=None):
    """(rule name, ``s_tir.Schedule``) of the first of *rules* (default :data:`RULES`)
    that fits *func* in the build *ctx*, else (None, None).

    The schedule is traced: ``mxc tune`` stores it in the tuning database as a
    measured record, so tuned kernels never lose to the default ones.  A rule that
    raises fails the build when ``ctx.strict``, else is logged and skipped.  A kernel
    without a root block (an external call: ``sort``, ``topk``) has nothing to schedule."""
    from .base.tir_queries import has_root_block
    if not has_root_block(func):
        return None, None
    with ctx:   # entered: what a rule cannot be handed (the AMX emulation) it reads there
        return _first_rule(func, ctx, RULES if rules is None else rules)


def _first_rule(func: tirx.PrimFunc, ctx, rules):
    for rule in rules:
        try:
            sch = rule.apply(func, ctx.target, ctx)
        except Exception as exc:  # noqa: BLE001 - a bug in the rule: see the docstring
            kernel = _kernel_name(func)
            if ctx.strict:
                from ....errors import BackendError
                raise BackendError(f"schedule rule {rule.name!r} failed on kernel {kernel}: "
                                   f"{type(exc).__name__}: {exc}") from exc
            log.warning("schedule rule %r failed on kernel %s (a bug in the rule; the next "
                        "rule is tried): %s: %s", rule.name, kernel, type(exc).__name__, exc)
            continue
        if sch is not None:
            return rule.name, sch
    return None, None


def _kernel_name(func) -> str:
    attrs = func.attrs
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "(unnamed)"


def schedule_func(func: tirx.PrimFunc, ctx, rules=None):
    """(rule name, scheduled PrimFunc) for *func*, or (None, func) when no rule applies."""
    name, sch = default_schedule(func, ctx, rules)
    if sch is None:
        return None, func
    return name, sch.mod["main"].with_attr(_SCHEDULED, True)


def _is_scheduled(func) -> bool:
    return bool(func.attrs is not None and _SCHEDULED in func.attrs and
                int(func.attrs[_SCHEDULED]) == 1)


def cpu_schedule_pass(ctx, stats: dict | None = None,
                      rules: list[ScheduleRule] | None = None) -> tvm.transform.Pass:
    """A module pass giving every unscheduled PrimFunc a default CPU schedule from
    *rules* (default: the build's ``ctx.rules``, else :data:`RULES`) for the build *ctx*
    (:class:`..build_context.BuildContext`: its CPU and ``strict``; its ``progress``
    hook hears ``kernel i/N NAME`` as each kernel is reached, then that code is being
    generated, for the compile's progress line)."""
    rules = list(rules if rules is not None else ctx.rules if ctx.rules is not None else RULES)

    @tvm.transform.module_pass(opt_level=0, name="MxcCpuDefaultSchedule")
    def _pass(mod, _ctx):
        total = sum(1 for _, f in mod.functions_items()
                    if isinstance(f, tirx.PrimFunc) and not _is_scheduled(f))
        done = 0

        def schedule(gv, func):
            nonlocal done
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                return None
            done += 1
            if ctx.progress is not None:
                ctx.progress(f"kernel {done}/{total} {gv.name_hint}")
            name, new = schedule_func(func, ctx, rules)
            if stats is not None:
                stats[gv.name_hint] = name
            return new if name is not None else None

        mod = rewrite_functions(mod, schedule)
        if ctx.progress is not None and total:
            # what follows (TIR lowering, LLVM code generation) is one call for all kernels
            ctx.progress(f"{total} kernel(s) scheduled; generating code")
        return mod

    return _pass
