"""Pooling that reads its padding in place instead of from a padded copy.

MXNet's window rules are lowered exactly (:mod:`..ops.nn_pool`): the input is
padded explicitly -- with ``-inf`` for max pooling, zeros for average pooling
-- and pooled without padding.  TOPI's own padding could not be used for max
pooling (it pads with the dtype's lowest finite value, not ``-inf``), but the
explicit ``nn.pad`` is an injective op that FuseOps never fuses into the
pooling kernel after it: it became a kernel of its own, writing the whole
padded activation once more (ResNet's first max pooling: a 3.2 MB copy of the
stem's output, 0.04 ms alone and 0.12 ms within a run, 3x the pooling itself).

This pass, run on channels-last Relax (after :mod:`.layout`), replaces a
``max_pool2d``/``avg_pool2d`` without padding whose input is a constant
spatial ``nn.pad`` used by nothing else with one TE kernel: the same window
reduction over ``pad ? value : x``, which the reduction rule of
:mod:`.families.reduction` schedules with the padding read in place (bounds-checked
vector loads, as depthwise convolutions do).  The values are those of the two
ops it replaces: the pad value where the pad put it, the same reduction, and
for average pooling the same division by the window size.
"""

from __future__ import annotations

import math

import tvm
from tvm import relax, te, tirx

from .base.module_utils import (bindings_of, dataflow_bindings, replace_bindings,
                           rewrite_graph_functions, static_shape, var_uses)

_POOLS = {"relax.nn.max_pool2d": "max", "relax.nn.avg_pool2d": "avg"}
#: the pad value each pooling takes in place: max pooling's -inf, average pooling's 0
_PAD_VALUE = {"max": -math.inf, "avg": 0.0}


def pool2d_nhwc_padded(data: te.Tensor, kind: str, pool_size, strides, pads,
                       out_shape) -> te.Tensor:
    """``kind`` ("max"/"avg") pooling of NHWC *data* over windows of the input padded
    by *pads* (top, left, bottom, right) with that pooling's pad value; average
    pooling divides every window's sum by the window size."""
    n, h, w, c = (int(d) for d in data.shape)
    pt, pl, pb, pr = pads
    fill = tirx.const(_PAD_VALUE[kind], data.dtype)

    def padded(i, y, x, ch):
        inside = tirx.all(y >= pt, y < h + pt, x >= pl, x < w + pl)
        return tirx.if_then_else(inside, data[i, y - pt, x - pl, ch], fill)

    src = te.compute((n, h + pt + pb, w + pl + pr, c), padded, name="pad_temp")
    kh, kw = pool_size
    sh, sw = strides
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    if kind == "max":
        return te.compute(out_shape, lambda i, y, x, ch: te.max(
            src[i, y * sh + ry, x * sw + rx, ch], axis=[ry, rx]), name="max_pool2d")
    total = te.compute(out_shape, lambda i, y, x, ch: te.sum(
        src[i, y * sh + ry, x * sw + rx, ch], axis=[ry, rx]), name="pool_sum")
    size = tirx.const(kh * kw, data.dtype)
    return te.compute(out_shape, lambda *idx: total(*idx) / size, name="avg_pool2d")


def _spatial_pad(call, kind: str):
    """(top, left, bottom, right) of *call*, a constant ``nn.pad`` of an NHWC tensor on
    its two spatial axes only with *kind*'s pad value; None otherwise."""
    if not isinstance(call, relax.Call) or getattr(call.op, "name", "") != "relax.nn.pad" \
            or str(call.attrs.pad_mode) != "constant":
        return None
    value = float(call.attrs.pad_value)
    if not (value == _PAD_VALUE[kind] and math.copysign(1.0, value) ==
            math.copysign(1.0, _PAD_VALUE[kind])):
        return None
    w = [int(v) for v in call.attrs.pad_width]
    if len(w) != 8 or any(w[:2]) or any(w[6:]):
        return None
    return w[2], w[4], w[3], w[5]


def _plain_pool(call):
    """The pooling kind of *call* when it is an NHWC 2-D pooling this pass can take
    (no padding, dilation 1, floor mode, every shape static), else None."""
    kind = _POOLS.get(getattr(call.op, "name", ""))
    if kind is None:
        return None
    a = call.attrs
    if a.layout != "NHWC" or a.out_layout != "NHWC" or any(int(p) for p in a.padding) \
            or any(int(d) != 1 for d in a.dilation) or bool(a.ceil_mode) \
            or static_shape(call) is None or static_shape(call.args[0]) is None:
        return None
    return kind


def _fold_function(bb: relax.BlockBuilder, func: relax.Function) -> relax.Function | None:
    uses, bindings = var_uses(func), bindings_of(func)
    replace, dropped = {}, set()
    for b in dataflow_bindings(func):
        value = b.value
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            continue
        kind = _plain_pool(value)
        src = value.args[0] if kind else None
        if not isinstance(src, relax.DataflowVar) or uses.get(src) != 1 \
                or src not in bindings:
            continue
        pad = _spatial_pad(bindings[src].value, kind)
        if pad is None:
            continue
        a = value.attrs
        replace[b.var] = [(b.var, bb.call_te(
            pool2d_nhwc_padded, bindings[src].value.args[0], kind,
            [int(v) for v in a.pool_size], [int(v) for v in a.strides], list(pad),
            list(static_shape(value)), primfunc_name_hint=f"{kind}_pool2d_padded"))]
        dropped.add(src)
    return replace_bindings(func, replace, dropped) if replace else None


@tvm.transform.module_pass(opt_level=0, name="MxcPoolPaddingInPlace")
def pool_padding_in_place(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """Fold every constant spatial pad that only feeds a 2-D pooling into it."""
    return rewrite_graph_functions(mod, _fold_function)
