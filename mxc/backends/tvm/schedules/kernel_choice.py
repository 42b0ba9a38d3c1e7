"""The kernel-choice table: every kernel family, when a build enables it, what builds its
kernels and what schedules them -- the one place a layer's kernel is chosen.

Legalization (:mod:`.legalize`) consults :data:`TABLE` once per ``conv2d``/``matmul``
(:func:`choose`): the first family, in the table's order, that the build enables and
that takes the layer builds its kernel and stamps its name on it
(:mod:`.base.kernel_family`).  The schedule rules (:data:`.cpu.RULES`) are the
table's rules, each applying to the kernels stamped with its family
(:class:`FamilyRule`); nothing after legalization asks which family a kernel is by
its name, or asks the CPU again.

What enables a family is the build's data (:class:`..build_context.BuildContext`): its
CPU's capabilities, decided once when the context is made
(:func:`.base.microarch.cpu_info`), its precision and Winograd mode.

Some families build no kernel of their own but are a choice another family's
legalization makes and builds: the AMX tiles (built by the int8 and bf16 families)
and bfloat16 Winograd (whose product is a bf16 kernel, its transforms Winograd's).
The table hands them in as that family's options (:func:`_handed`), so that no family
imports another.  The float32 direct kernels and TVM's own legalization are what is
left when no family takes a layer (:mod:`.legalize`); the generic ``reduction``,
``elementwise`` and ``fallback`` rules (:mod:`.cpu`) schedule kernels no family stamped.

Adding a family: its module under ``families/`` (importing ``base/`` only) with a
``FAMILY`` name it stamps and a rule, and one row here.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from .base.register_tile import tile_shape
from .base.winograd_transforms import eligible as winograd_eligible
from .families import bf16, bf16_amx, bf16_winograd, int8, int8_amx, winograd

_FLOATS = ("float32", "float64", "float16")


class Family(NamedTuple):
    """One row of the kernel-choice table."""
    name: str
    #: whether the build *ctx* enables the family (read from the context: decided there)
    enabled: Callable
    #: ``conv2d(bb, call, ctx, enabled)`` -> its kernel's output or None (None: the
    #: family builds no conv2d kernel itself: another family's builder hands it in)
    conv2d: Callable | None = None
    #: ``matmul(bb, call, ctx, enabled)``, as *conv2d*
    matmul: Callable | None = None
    #: ``rule(func, cpu_info)`` -> a schedule of a kernel stamped *name* (None: its
    #: kernels are stamped with, and scheduled by, other families)
    rule: Callable | None = None


def _bf16(ctx) -> bool:
    return ctx.precision == "bf16" and bool(ctx.cpu.bf16_dot)


def _handed(enabled, family, choice):
    """*choice* where the build enables *family*, else None: what one family's builder is
    handed of another's (the AMX tile fit, the bf16 Winograd kernels)."""
    return choice if family in enabled else None


def _int8_conv2d(bb, call, ctx, enabled):
    return int8.legalize_conv2d(bb, call, ctx.cpu.int8_dot,
                                _handed(enabled, int8_amx.FAMILY, int8_amx.tile_block))


def _int8_matmul(bb, call, ctx, enabled):
    return int8.legalize_matmul(bb, call, ctx.cpu.int8_dot,
                                _handed(enabled, int8_amx.FAMILY, int8_amx.tile_block))


def _bf16_conv2d(bb, call, ctx, enabled):
    return bf16.legalize_conv2d(bb, call, ctx.cpu.bf16_dot, ctx,
                                _handed(enabled, bf16_amx.FAMILY, bf16_amx.tile_block),
                                _handed(enabled, "bf16_winograd", bf16_winograd.emit_if_applies))


def _bf16_matmul(bb, call, ctx, enabled):
    return bf16.legalize_matmul(bb, call, ctx.cpu.bf16_dot, ctx,
                                _handed(enabled, bf16_amx.FAMILY, bf16_amx.tile_block))


def _winograd_conv2d(bb, call, ctx, enabled):
    """float32 Winograd for a float NHWC/HWIO 3x3 stride-1 ``conv2d`` of a constant weight
    that it applies to (:func:`.base.winograd_transforms.eligible`), else None."""
    from tvm.ir.expr import Constant

    from .base.module_utils import static_shape, tensor_dtype
    a = call.attrs
    x, w = call.args
    xs, ws, ys = static_shape(x), static_shape(w), static_shape(call)
    xdt, ydt = tensor_dtype(x), tensor_dtype(call)
    if a.data_layout != "NHWC" or (a.kernel_layout, a.out_layout) != ("HWIO", "NHWC") \
            or int(a.groups) != 1 or not isinstance(w, Constant) or None in (xs, ws, ys) \
            or xdt not in _FLOATS or tensor_dtype(w) != xdt or ydt not in _FLOATS:
        return None
    info = ctx.cpu
    if not winograd_eligible(xs, ws, a.strides, a.dilation, 1, info.lanes,
                             ctx.winograd_min_size):
        return None
    return winograd.emit(bb, x, w.value.numpy(), a.padding, ys, ydt,
                         lambda kk, px: tile_shape(kk, px, info)[0], ctx.records)


#: the kernel families, in the order legalization tries them for a layer
TABLE: tuple[Family, ...] = (
    Family(int8_amx.FAMILY, lambda ctx: ctx.cpu.int8_tiles, rule=int8_amx.rule_amx),
    Family(int8.FAMILY, lambda ctx: bool(ctx.cpu.int8_dot), _int8_conv2d, _int8_matmul,
           int8.rule_int8),
    Family(bf16_amx.FAMILY, lambda ctx: _bf16(ctx) and ctx.cpu.bf16_tiles,
           rule=bf16_amx.rule_amx),
    # (bf16 Winograd's product is shaped for vdpbf16ps's 16 lanes: x86 only)
    Family("bf16_winograd", lambda ctx: _bf16(ctx) and ctx.cpu.bf16_dot == "avx512bf16"),
    Family(bf16.FAMILY, _bf16, _bf16_conv2d, _bf16_matmul, bf16.rule_bf16),
    Family(winograd.FAMILY, lambda ctx: ctx.winograd != "off", _winograd_conv2d,
           rule=winograd.rule_winograd),
)


def enabled(ctx) -> frozenset:
    """The names of the families the build *ctx* enables (none off a CPU)."""
    if ctx.cpu is None:
        return frozenset()
    return frozenset(f.name for f in TABLE if f.enabled(ctx))


def choose(op: str, bb, call, ctx, on: frozenset):
    """The kernel of the first family of :data:`TABLE` among *on* (:func:`enabled`) whose
    *op* (``"conv2d"`` / ``"matmul"``) builder takes *call*: its output, stamped with the
    family (None: no family takes the layer)."""
    for family in TABLE:
        build = getattr(family, op)
        if build is not None and family.name in on:
            out = build(bb, call, ctx, on)
            if out is not None:
                return out
    return None
