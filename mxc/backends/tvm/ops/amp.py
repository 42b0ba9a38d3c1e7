"""AMP casts (``mxc/compiler/ops/amp.py``): ``amp_cast`` and ``amp_multicast``.

Both are casts to the dtypes inference already decided (float inputs to the
target float dtype, everything else unchanged).  bfloat16 lowers for the ops
in :data:`~mxc.backends.tvm.converter.BF16_OPS` (what AMP CNNs use: they
compute through float32 and round once to bfloat16, nearest even); a
bfloat16 tensor reaching any other op keeps that op on the host.
"""

from __future__ import annotations

from ..converter import Lowering, register_converter


@register_converter("amp_cast")
def amp_cast(ctx: Lowering):
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)


@register_converter("amp_multicast")
def amp_multicast(ctx: Lowering):
    return [ctx.astype(x, dt) for x, dt in zip(ctx.inputs, ctx.out_dtypes)]
