"""Convolution and Deconvolution (``mxc/compiler/ops/nn_conv.py``): 1-D/2-D/3-D,
groups, dilation; the geometry (MXNet's empty-tuple defaults, Deconvolution's
``target_shape`` padding) comes from the op definition itself."""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype

_CONV = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}
_DECONV = {1: R.nn.conv1d_transpose, 2: R.nn.conv2d_transpose, 3: R.nn.conv3d_transpose}
# MXNet layout -> (data layout, kernel layout) for Relax
_LAYOUTS = {"NCW": ("NCW", "OIW"), "NCHW": ("NCHW", "OIHW"), "NCDHW": ("NCDHW", "OIDHW"),
            "NHWC": ("NHWC", "OHWI"), "NDHWC": ("NDHWC", "ODHWI")}
_CHANNELS_FIRST = ("NCW", "NCHW", "NCDHW")


def _float_only(node, io):
    dt = io.in_dtypes[0]
    if dt not in ("float16", "bfloat16", "float32", "float64"):
        return f"{node.op} on {dt} data is not lowered (float data only)"
    return True


def _bias(ctx: Lowering, y, layout: str, dt: str):
    if ctx.p.no_bias:
        return y
    b = ctx.astype(ctx.inputs[2], dt)
    shape = [1] * len(layout)
    shape[layout.index("C")] = ctx.p.num_filter
    return ctx.emit(R.add(y, ctx.reshape(b, shape)))


@register_converter("Convolution", "Convolution_v1", supports=_float_only)
def convolution(ctx: Lowering):
    p = ctx.p
    kernel, stride, dilate, pad, layout = ctx.node.opdef.geometry(p)
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    w = ctx.astype(ctx.inputs[1], dt)
    data_layout, kernel_layout = _LAYOUTS[layout]
    y = ctx.emit(_CONV[len(kernel)](x, w, strides=stride, padding=pad, dilation=dilate,
                                    groups=p.num_group, data_layout=data_layout,
                                    kernel_layout=kernel_layout))
    return ctx.astype(_bias(ctx, y, layout, dt), ctx.out_dtype)


def _deconv_supported(node, io):
    verdict = _float_only(node, io)
    if verdict is not True:
        return verdict
    p = node.params
    layout = node.opdef.geometry(p)[4]
    if layout not in _CHANNELS_FIRST:
        return f"Deconvolution layout {layout} is not lowered (channels-first layouts only)"
    return True


@register_converter("Deconvolution", supports=_deconv_supported)
def deconvolution(ctx: Lowering):
    p = ctx.p
    kernel, stride, dilate, _, layout = ctx.node.opdef.geometry(p)
    pad, adj = ctx.node.opdef.pad_adj(p, ctx.in_shapes[0][2:])
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    w = ctx.astype(ctx.inputs[1], dt)
    nk = len(kernel)
    y = ctx.emit(_DECONV[nk](x, w, strides=stride, padding=pad, output_padding=adj,
                             dilation=dilate, groups=p.num_group, data_layout=layout,
                             kernel_layout="IO" + layout[2:]))
    return ctx.astype(_bias(ctx, y, layout, dt), ctx.out_dtype)
