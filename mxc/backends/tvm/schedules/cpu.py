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
families' rules (:mod:`.families.winograd`, the int8, bf16 and AMX ones) come from
the kernel-choice table (:data:`.kernel_choice.TABLE`) and apply to the kernels
legalization stamped with their family (:class:`FamilyRule`); the generic
``reduction`` rule (:mod:`.families.reduction`, on the register-tile model of
``base/``, :func:`.base.register_tile.tile_shape`) and the ``elementwise`` and
``fallback`` rules here take the kernels no family stamped, deciding on facts read
from the TIR's structure (:mod:`.base.tir_queries`).  This module orders them and
applies them to a module.
"""

from __future__ import annotations

import logging

import tvm
from tvm import s_tir, tirx

from .base.elementwise import schedule_elementwise_block
from .base.kernel_family import kernel_families
from .base.microarch import CpuInfo, cpu_info  # noqa: F401 - re-exported: the schedules' API
from .base.module_utils import inline_injective, is_spatial, rewrite_functions
from .base.module_utils import root_blocks as _root_blocks
from .base.register_tile import tile_shape  # noqa: F401 - re-exported: the schedules' API
from .families.reduction import rule_reduction
from .kernel_choice import TABLE

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


class FamilyRule(ScheduleRule):
    """The rule of a kernel family (a row of :data:`.kernel_choice.TABLE`): it applies to a
    kernel exactly when legalization stamped one of the kernel's blocks with the family
    (:mod:`.base.kernel_family`) -- never by the kernel's or a block's name, and without
    asking the CPU again (the stamp was made only where the build's CPU has the family)."""

    def apply(self, func: tirx.PrimFunc, target, ctx):
        if self.name not in _families(func):
            return None
        return self._schedule(func, ctx.cpu)


_LAST: tuple = (None, frozenset())


def _families(func) -> frozenset:
    """:func:`.base.kernel_family.kernel_families` of *func*, read once for all the family
    rules tried on it (a one-entry cache: the rules try one kernel at a time)."""
    global _LAST
    last, fams = _LAST
    if last is None or not last.same_as(func):
        fams = kernel_families(func)
        _LAST = (func, fams)
    return fams


#: the rules, in the order they are tried (the first that returns a schedule wins): the
#: kernel families' (:data:`.kernel_choice.TABLE`), then the generic ones for kernels no
#: family stamped
RULES: list[ScheduleRule] = [
    *(FamilyRule(f.name, f.rule) for f in TABLE if f.rule is not None),
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
