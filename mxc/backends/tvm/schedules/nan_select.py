"""NaN-passing ``relu``/``maximum``/``minimum`` against a constant, in one comparison.

mxc lowers MXNet's ``relu`` as ``where(x > 0 or isnan(x), x, 0)`` (NaN passes
through, as in MXNet), and ``maximum``/``minimum`` likewise.  That form keeps
the channel-padding analysis exact (:mod:`.channel_padding`: every step maps a
zero lane to zero), but in a convolution's epilogue the ``isnan`` made the
loop over one vector of channels come out of TVM unvectorised, and LLVM then
vectorised it across the tile's pixels with gathers and scatters: on AVX-512,
squeezenet's 16-channel 1x1 layers ran at half the speed of the same layers
without an activation.

So after the layout pass (padding already decided) this pass rewrites, for a
constant ``c`` that is not NaN::

    where(x > c or isnan(x), x, c)   ->   where(x <= c, c, x)
    where(x < c or isnan(x), x, c)   ->   where(x >= c, c, x)

The values are the same for every ``x``: a NaN fails the new comparison and
passes through; where ``x`` compares equal to ``c`` (``-0`` against ``+0``)
both give ``c``.  A zero lane still maps to zero (``0 <= 0`` selects ``c = 0``).
"""

from __future__ import annotations

import math

import tvm
from tvm import relax
from tvm.ir.expr import Constant

from .base.module_utils import (bindings_of, dataflow_bindings, replace_bindings,
                           rewrite_graph_functions, var_uses)

#: the comparison of the old form -> the one of the new form (its negation for numbers)
_FLIPPED = {"relax.greater": relax.op.less_equal, "relax.less": relax.op.greater_equal}


def _op(expr) -> str:
    return getattr(getattr(expr, "op", None), "name", "") if isinstance(expr, relax.Call) else ""


def _scalar(expr) -> float | None:
    """The value of a 0-d (or one-element) float constant that is not NaN, else None."""
    if not isinstance(expr, Constant):
        return None
    arr = expr.value.numpy()
    if arr.size != 1 or arr.dtype.kind != "f" or math.isnan(float(arr.ravel()[0])):
        return None
    return float(arr.ravel()[0])


def _match(where: relax.Call, bindings: dict):
    """(x, c, comparison op, the condition's vars) when *where* is the NaN-passing form."""
    cond, x, other = where.args
    c = _scalar(other)
    if c is None or not isinstance(cond, relax.Var) or cond not in bindings:
        return None
    either = bindings[cond].value
    if _op(either) != "relax.logical_or":
        return None
    parts = [bindings[a].value if isinstance(a, relax.Var) and a in bindings else None
             for a in either.args]
    for cmp_, nan in (parts, parts[::-1]):
        if _op(cmp_) in _FLIPPED and _op(nan) == "relax.isnan" \
                and cmp_.args[0].same_as(x) and nan.args[0].same_as(x) \
                and _scalar(cmp_.args[1]) == c and str(cmp_.args[1].value.dtype) == \
                str(other.value.dtype):
            return x, cmp_.args[1], _FLIPPED[_op(cmp_)], [cond, *either.args]
    return None


def _rewrite_function(bb: relax.BlockBuilder, func: relax.Function) -> relax.Function | None:
    uses, bindings = var_uses(func), bindings_of(func)
    replace, drop = {}, set()
    for b in dataflow_bindings(func):
        if _op(b.value) != "relax.where":
            continue
        found = _match(b.value, bindings)
        if found is None:
            continue
        x, c, flipped, cond_vars = found
        test = bb.normalize(flipped(x, c))
        keep = relax.DataflowVar(f"{b.var.name}_test", test.ty)
        replace[b.var] = [(keep, test),
                          (b.var, relax.op.where(keep, b.value.args[2], x))]
        # the old condition's steps, when nothing else reads them
        cond, *parts = cond_vars
        if uses.get(cond) == 1:
            drop.add(cond)
            drop.update(p for p in parts if uses.get(p) == 1)
    return replace_bindings(func, replace, drop) if replace else None


@tvm.transform.module_pass(opt_level=0, name="MxcNanSelectOneCompare")
def nan_select_one_compare(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """Rewrite every NaN-passing ``where(x > c or isnan(x), x, c)`` (and ``<``) into
    ``where(x <= c, c, x)`` (``>=``)."""
    return rewrite_graph_functions(mod, _rewrite_function)
