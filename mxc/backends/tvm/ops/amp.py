"""AMP casts (``mxc/compiler/ops/amp.py``): ``amp_cast`` and ``amp_multicast``.

Both are casts to the dtypes inference already decided (float inputs to the
target float dtype, everything else unchanged).  bfloat16 tensors are not in
the backend's dtypes (:data:`~mxc.backends.tvm.converter.SUPPORTED_DTYPES`),
so a cast into or out of bfloat16 stays on the host with the bfloat16 ops
around it; float16/float32 AMP graphs lower entirely.
"""

from __future__ import annotations

from ..converter import Lowering, register_converter


@register_converter("amp_cast")
def amp_cast(ctx: Lowering):
    return ctx.astype(ctx.inputs[0], ctx.out_dtype)


@register_converter("amp_multicast")
def amp_multicast(ctx: Lowering):
    return [ctx.astype(x, dt) for x, dt in zip(ctx.inputs, ctx.out_dtypes)]
