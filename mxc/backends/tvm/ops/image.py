"""Gluon's image operators (``mxc/compiler/ops/image.py``), all lowered.

Every one of them is a cheap elementwise, permuting or gathering map, so a
preprocessing front (``Resize -> ToTensor -> Normalize``) fuses into the
model's first kernels instead of leaving the compiled graph for the host.
Resize reproduces OpenCV's arithmetic exactly: the taps and 11-bit weights
are constants computed by the op definition's helpers
(:func:`~mxc.compiler.ops.image.bilinear_taps`), the uint8 path is integer
arithmetic with OpenCV's shifts.
"""

from __future__ import annotations

import numpy as np

from ....compiler.ops.image import bilinear_taps, fixed_weights, nearest_taps
from ..converter import Lowering, register_converter
from ._common import R, const
from ._quant_helpers import saturate


def _saturate(ctx: Lowering, y, dtype: str):
    """float32 *y* back to *dtype*: rounded half to even and clipped for integers
    (:func:`._quant_helpers.saturate`), only cast for float types (the image ops keep
    float16/float64 data as it is, which the int8 lowerings never produce)."""
    if np.dtype(dtype).kind in "iu":
        return saturate(ctx, y, dtype)
    return ctx.astype(y, dtype)


@register_converter("_image_to_tensor")
def to_tensor(ctx: Lowering):
    nd = len(ctx.in_shapes[0])
    perm = list(range(nd - 3)) + [nd - 1, nd - 3, nd - 2]
    x = ctx.astype(ctx.inputs[0], "float32")
    y = ctx.emit(R.permute_dims(x, perm))
    return [ctx.emit(R.divide(y, const(255.0, "float32")))]


@register_converter("_image_normalize")
def normalize(ctx: Lowering):
    shape = ctx.in_shapes[0]
    mean, std = ctx.node.opdef.channel_stats(ctx.p, shape[-3])
    x = ctx.astype(ctx.inputs[0], "float32")
    y = ctx.emit(R.divide(R.subtract(x, ctx.const(mean[:, None, None])),
                          ctx.const(std[:, None, None])))
    return [ctx.astype(y, ctx.out_dtype)]


@register_converter("_image_adjust_lighting")
def adjust_lighting(ctx: Lowering):
    shift = ctx.node.opdef.rgb_shift(ctx.p)
    x = ctx.astype(ctx.inputs[0], "float32")
    return [_saturate(ctx, ctx.emit(R.add(x, ctx.const(shift))), ctx.out_dtype)]


@register_converter("_image_crop")
def crop(ctx: Lowering):
    p = ctx.p
    nd = len(ctx.in_shapes[0])
    return [ctx.emit(R.strided_slice(ctx.inputs[0], axes=[nd - 3, nd - 2], begin=[p.y, p.x],
                                     end=[p.y + p.height, p.x + p.width]))]


@register_converter("_image_flip_left_right", "_image_flip_top_bottom")
def flip(ctx: Lowering):
    nd = len(ctx.in_shapes[0])
    return [ctx.emit(R.flip(ctx.inputs[0], axis=nd + ctx.node.opdef.axis))]


@register_converter("_image_resize", "_cvimresize")
def resize(ctx: Lowering):
    """Separable bilinear: gather two source columns, weight, then two rows."""
    shape = ctx.in_shapes[0]
    nd = len(shape)
    out_h, out_w = ctx.out_shape[-3], ctx.out_shape[-2]
    if ctx.p.interp == 0:
        rows = ctx.emit(R.take(ctx.inputs[0], ctx.const(nearest_taps(shape[-3], out_h)),
                               axis=nd - 3))
        return [ctx.emit(R.take(rows, ctx.const(nearest_taps(shape[-2], out_w)), axis=nd - 2))]
    yi0, yi1, yw = bilinear_taps(shape[-3], out_h)
    xi0, xi1, xw = bilinear_taps(shape[-2], out_w)
    hax, wax = nd - 3, nd - 2

    def taps(x, i0, i1, axis):
        return (ctx.emit(R.take(x, ctx.const(i0.astype("int64")), axis=axis)),
                ctx.emit(R.take(x, ctx.const(i1.astype("int64")), axis=axis)))

    if ctx.in_dtypes[0] == "uint8":
        a0, a1 = fixed_weights(xw)
        b0, b1 = fixed_weights(yw)
        x = ctx.astype(ctx.inputs[0], "int32")
        c0, c1 = taps(x, xi0, xi1, wax)
        rows = ctx.emit(R.add(R.multiply(c0, ctx.const(a0[:, None])),
                              R.multiply(c1, ctx.const(a1[:, None]))))
        r0, r1 = taps(rows, yi0, yi1, hax)
        four, sixteen = const(4, "int32"), const(16, "int32")
        t0 = R.right_shift(R.multiply(ctx.const(b0[:, None, None]), R.right_shift(r0, four)),
                           sixteen)
        t1 = R.right_shift(R.multiply(ctx.const(b1[:, None, None]), R.right_shift(r1, four)),
                           sixteen)
        y = ctx.emit(R.right_shift(R.add(R.add(t0, t1), const(2, "int32")),
                                   const(2, "int32")))
        return [ctx.astype(ctx.emit(R.clip(y, 0, 255)), "uint8")]
    x = ctx.astype(ctx.inputs[0], "float32")
    c0, c1 = taps(x, xi0, xi1, wax)
    rows = ctx.emit(R.add(R.multiply(c0, ctx.const((1 - xw)[:, None])),
                          R.multiply(c1, ctx.const(xw[:, None]))))
    r0, r1 = taps(rows, yi0, yi1, hax)
    y = ctx.emit(R.add(R.multiply(r0, ctx.const((1 - yw)[:, None, None])),
                       R.multiply(r1, ctx.const(yw[:, None, None]))))
    return [_saturate(ctx, y, ctx.out_dtype)]
