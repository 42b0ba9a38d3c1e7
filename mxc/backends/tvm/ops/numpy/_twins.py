"""DeepNumpy ops lowered with their legacy twin's converter.

A numpy op that names a ``twin`` (``_npi_exp`` -> ``exp``, ``_npi_add`` ->
``broadcast_add``, ``_np_sum`` -> ``sum``) computes what the twin computes once
its operands are cast to :meth:`NumpyOpMixin.twin_dtype` (mixed int/float
operands promoted, integer true division done in float32); the result is cast
to the numpy op's inferred output dtype (``bool`` for comparisons).  The
twin's converter is looked up when a node is lowered, so registration order
between families does not matter.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from .....compiler.ops.numpy._common import NumpyOpMixin
from .....compiler.ops.registry import registered_ops
from ...converter import Lowering, get_converter, register_converter

#: twins whose converter reads attributes the numpy op spells differently, or
#: whose numpy op has its own converter in this package
_OWN_CONVERTER = {"_npi_concatenate", "_np_dot", "_npi_flip"}


def _reduction_supported(node, io):
    p = node.params
    if getattr(p, "initial", None) is not None:
        return "initial= is not lowered"
    if p.axis is not None and len(p.axis) == 0:
        return "axis=() (reduce nothing) is not lowered"
    if getattr(p, "dtype", None) is not None:
        return "an explicit accumulation dtype is not lowered"
    return True


_EXTRA_SUPPORTS: dict[str, Callable] = {
    "_np_sum": _reduction_supported, "_np_prod": _reduction_supported,
    "_npi_mean": _reduction_supported, "_np_max": _reduction_supported,
    "_np_min": _reduction_supported,
}


def _twin_of(op: str) -> str:
    return registered_ops()[op].twin


def _supports(op: str):
    def supports(node, io):
        extra = _EXTRA_SUPPORTS.get(op)
        if extra is not None:
            verdict = extra(node, io)
            if verdict is not True:
                return verdict
        twin = get_converter(_twin_of(op))
        if twin is None:
            return f"its legacy twin {_twin_of(op)} has no TVM converter"
        if twin.supports is not None:
            return twin.supports(node, io)
        return True
    return supports


def _via_twin(op: str):
    def convert(ctx: Lowering):
        opdef = ctx.node.opdef
        work = opdef.twin_dtype(ctx.p, ctx.in_dtypes, ctx.out_dtypes)
        tctx = copy.copy(ctx)
        if work is not None:
            tctx.inputs = [ctx.astype(x, work) for x in ctx.inputs]
            tctx.in_dtypes = [work] * len(ctx.inputs)
            tctx.out_dtypes = [work] * len(ctx.out_dtypes)   # the twin keeps its operand type
        result = get_converter(_twin_of(op)).fn(tctx)
        items = result if isinstance(result, (list, tuple)) else [result]
        return [None if x is None else ctx.astype(ctx.emit(x), t)
                for x, t in zip(items, ctx.out_dtypes)]
    return convert


def register_twins(module: str) -> None:
    """Register the twin-based converters of the family converter module *module*.

    Each ``ops/numpy/<family>.py`` calls this with its ``__name__``, so the
    converters are recorded in the module that mirrors their op's family.
    """
    family = module.split(".ops.", 1)[-1]
    for name, opdef in registered_ops().items():
        if isinstance(opdef, NumpyOpMixin) and opdef.twin and name == opdef.name \
                and opdef.family == family and name not in _OWN_CONVERTER:
            register_converter(name, supports=_supports(name), module=module)(_via_twin(name))
