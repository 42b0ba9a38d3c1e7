"""Variable-length sequence ops (``mxc/compiler/ops/sequence.py``).

``sequence_length`` is C-cast to an integer; data is time-major (``axis=0``)
or batch-major (``axis=1``).
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ..converter import Lowering, register_converter
from ._common import R, as_index, const, scalar_as


def _lengths(ctx: Lowering):
    return as_index(ctx, ctx.inputs[1], "int32") if ctx.p.use_sequence_length else None


@register_converter("SequenceMask")
def sequence_mask(ctx: Lowering):
    x = ctx.inputs[0]
    if not ctx.p.use_sequence_length:
        return x
    shape = ctx.in_shapes[0]
    axis = ctx.p.axis
    steps = shape[axis]
    batch_axis = 1 - axis
    lens = _lengths(ctx)
    tshape = [1] * len(shape)
    tshape[axis] = steps
    bshape = [1] * len(shape)
    bshape[batch_axis] = shape[batch_axis]
    t = ctx.const(np.arange(steps, dtype="int32").reshape(tshape))
    masked = ctx.emit(R.greater_equal(t, ctx.reshape(lens, bshape)))
    dt = ctx.in_dtypes[0]
    value = const(scalar_as(ctx.p.value, dt), dt)
    return R.where(masked, value, x)


@register_converter("SequenceLast")
def sequence_last(ctx: Lowering):
    x = ctx.inputs[0]
    shape = ctx.in_shapes[0]
    axis = ctx.p.axis
    steps = shape[axis]
    if not ctx.p.use_sequence_length:
        return ctx.reshape(ctx.emit(R.take(x, ctx.const(steps - 1, "int64"), axis=axis)),
                           ctx.out_shape)

    def build(data, lens):
        def f(b, *rest):
            t = tirx.max(tirx.min(lens[b] - 1, steps - 1), 0)
            return data[(t, b) + rest] if axis == 0 else data[(b, t) + rest]
        return te.compute(ctx.out_shape, f, name="mxc_sequence_last")
    return ctx.emit_te(build, x, _lengths(ctx), primfunc_name_hint="mxc_sequence_last")


@register_converter("SequenceReverse")
def sequence_reverse(ctx: Lowering):
    x = ctx.inputs[0]
    steps = ctx.in_shapes[0][0]
    if not ctx.p.use_sequence_length:
        return R.flip(x, 0)

    def build(data, lens):
        def f(t, b, *rest):
            n = tirx.max(tirx.min(lens[b], steps), 0)
            src = tirx.Select(t < n, n - 1 - t, t)
            return data[(src, b) + rest]
        return te.compute(ctx.out_shape, f, name="mxc_sequence_reverse")
    return ctx.emit_te(build, x, _lengths(ctx), primfunc_name_hint="mxc_sequence_reverse")
