"""CPU legalizations with pre-packed constant weights.

A channels-last convolution reads its weights once per output tile; in
``HWIO`` the ``nc`` output channels of one tile are ``K`` floats apart for
consecutive input channels, so every reduction step touches a new cache line
(and, for wide layers, a new page).  Packing the weights tile by tile,
``[K/nc, KH, KW, C, nc]``, makes the whole tile's weights one contiguous
stream -- about 1.4x on a 3x3 convolution here.  The weights are constants
(parameters bound at lowering), so the packing is done in numpy at compile
time and the kernel is a TE compute reading the packed array:

* ``relax.nn.conv2d`` NHWC/HWIO (or NCHW data: a thin network input, see
  :mod:`.layout`), ``groups == 1``, constant weight -> ``conv2d_nhwc_packed`` (zero
  padding as its own ``pad_temp`` stage, as TOPI);
* the same, 3x3 with stride 1 -> Winograd F(m, 3) (:mod:`.families.winograd`): input
  transform, batched product with pre-transformed packed weights, output transform;
* ``relax.matmul`` ``[M, K] x [K, N]`` with a constant ``[K, N]`` ->
  ``dense_packed`` over ``[N/nc, K, nc]``;
* int8 ``conv2d``/``matmul`` (int32 accumulation, constant weight) on a
  target with VNNI -> the ``vpdpbusd`` kernels of :mod:`.families.int8` (on AMX-INT8,
  the tile kernel where :mod:`.families.int8_amx` takes the layer);
* float32 ``conv2d``/``matmul`` under ``--precision bf16`` on a target with
  AVX512-BF16 -> the ``vdpbf16ps`` kernels of :mod:`.families.bf16` (before them the
  AMX tiles of :mod:`.families.bf16_amx`, then :mod:`.families.bf16_winograd`).

Which family takes a layer is the kernel-choice table's answer
(:func:`.kernel_choice.choose`, consulted once per layer here; it stamps the family on
the kernel for the schedule rules to read); what no family takes gets this module's
float32 direct kernels, else TVM's legalization.

``nc`` is a whole number of vector pieces (registers, or power-of-two parts of
one when the channels are not a multiple of a register) chosen with the
register-tile model of :func:`.base.register_tile.tile_shape`, which the default
schedule (:mod:`.cpu`) uses again to block the output pixels.  Everything else keeps
TVM's legalization.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, te, tirx
from tvm.ir.expr import Constant

from .base.microarch import CpuInfo
from .base.module_utils import static_shape, tensor_dtype
from .base.register_tile import tile_shape
from .kernel_choice import choose, enabled

_FLOATS = ("float32", "float64", "float16")


def _sinfo_shape(expr):
    return static_shape(expr), tensor_dtype(expr)


def conv2d_nhwc_packed(data: te.Tensor, weight: te.Tensor, strides, padding, dilation,
                       out_dtype: str, data_layout: str = "NHWC") -> te.Tensor:
    """NHWC convolution with weights packed ``[K/nc, KH, KW, C, nc]``; *data* NHWC, or
    NCHW (a network's input: read in place, the transpose inlined into the loads)."""
    if data_layout == "NCHW":
        nchw = data
        data = te.compute((nchw.shape[0], nchw.shape[2], nchw.shape[3], nchw.shape[1]),
                          lambda i, y, x, ch: nchw[i, ch, y, x], name="T_transpose")
    n, h, w, c = (int(d) for d in data.shape)
    ko, kh, kw, c2, nc = (int(d) for d in weight.shape)
    assert c == c2
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    if pt or pl or pb or pr:
        zero = tirx.const(0, data.dtype)

        def pad(i, y, x, ch):
            inside = tirx.all(y >= pt, y < h + pt, x >= pl, x < w + pl)
            return tirx.if_then_else(inside, data[i, y - pt, x - pl, ch], zero)
        src = te.compute((n, h + pt + pb, w + pl + pr, c), pad, name="pad_temp")
    else:
        src = data
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, c), name="rc")

    def conv(i, y, x, k):
        a = src[i, y * sh + ry * dh, x * sw + rx * dw, rc]
        b = weight[k // nc, ry, rx, rc, k % nc]
        if a.dtype != out_dtype:
            a, b = a.astype(out_dtype), b.astype(out_dtype)
        return te.sum(a * b, axis=[ry, rx, rc])

    return te.compute((n, oh, ow, ko * nc), conv, name="conv2d_nhwc")


def dense_packed(data: te.Tensor, weight: te.Tensor, out_dtype: str) -> te.Tensor:
    """``[M, K] x [K, N]`` with the right operand packed ``[N/nc, K, nc]``."""
    m, k = (int(d) for d in data.shape)
    no, k2, nc = (int(d) for d in weight.shape)
    assert k == k2
    rk = te.reduce_axis((0, k), name="rk")

    def dense(i, j):
        a, b = data[i, rk], weight[j // nc, rk, j % nc]
        if a.dtype != out_dtype:
            a, b = a.astype(out_dtype), b.astype(out_dtype)
        return te.sum(a * b, axis=[rk])

    return te.compute((m, no * nc), dense, name="matmul")


def _conv2d(info: CpuInfo, ctx, families: frozenset):
    default = tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")

    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        out = choose("conv2d", bb, call, ctx, families)
        if out is not None:
            return out
        a = call.attrs
        x, w = call.args
        xs, xdt = _sinfo_shape(x)
        ws, wdt = _sinfo_shape(w)
        ys, ydt = _sinfo_shape(call)
        if a.data_layout not in ("NHWC", "NCHW") or (a.kernel_layout, a.out_layout) != (
                "HWIO", "NHWC") or int(a.groups) != 1 or not isinstance(w, Constant) \
                or xs is None or ws is None or ys is None or xdt not in _FLOATS \
                or wdt != xdt or ydt not in _FLOATS:
            return default(bb, call)
        kh, kw, c, k = ws
        # the schedule register-blocks the fused n*h*w pixel axis: pack for that tile
        nc, _ = tile_shape(k, int(ys[0]) * int(ys[1]) * int(ys[2]), info)
        if nc is None or k % nc:
            return default(bb, call)
        arr = w.value.numpy()                                 # [KH, KW, C, K]
        packed = arr.reshape(kh, kw, c, k // nc, nc).transpose(3, 0, 1, 2, 4)
        wconst = relax.const(np.ascontiguousarray(packed), wdt)
        return bb.call_te(conv2d_nhwc_packed, x, wconst,
                          [int(v) for v in a.strides], [int(v) for v in a.padding],
                          [int(v) for v in a.dilation], ydt, str(a.data_layout),
                          primfunc_name_hint="conv2d_nhwc_packed")

    return legalize


def _matmul(info: CpuInfo, ctx, families: frozenset):
    default = tvm.ir.Op.get("relax.matmul").get_attr("FLegalize")

    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        out = choose("matmul", bb, call, ctx, families)
        if out is not None:
            return out
        x, w = call.args
        xs, xdt = _sinfo_shape(x)
        ws, wdt = _sinfo_shape(w)
        ys, ydt = _sinfo_shape(call)
        if not isinstance(w, Constant) or xs is None or ws is None or ys is None \
                or len(xs) != 2 or len(ws) != 2 or xdt not in _FLOATS or wdt != xdt \
                or ydt not in _FLOATS:
            return default(bb, call)
        k, n = ws
        nc, _ = tile_shape(n, xs[0], info)
        if nc is None or n % nc:
            return default(bb, call)
        packed = w.value.numpy().reshape(k, n // nc, nc).transpose(1, 0, 2)
        wconst = relax.const(np.ascontiguousarray(packed), wdt)
        return bb.call_te(dense_packed, x, wconst, ydt, primfunc_name_hint="dense_packed")

    return legalize


def cpu_legalize_map(ctx) -> dict:
    """``customize_legalize_map`` for ``relax.transform.LegalizeOps`` in the build *ctx*
    (:class:`..build_context.BuildContext`: its CPU, Winograd mode and precision, which
    decide the kernel families the build enables -- once, here -- among which each
    layer's kernel is chosen: :func:`.kernel_choice.choose`)."""
    families = enabled(ctx)
    return {"relax.nn.conv2d": _conv2d(ctx.cpu, ctx, families),
            "relax.matmul": _matmul(ctx.cpu, ctx, families)}
