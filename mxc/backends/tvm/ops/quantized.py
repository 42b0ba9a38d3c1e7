"""The quantized twins of float ops (``mxc/compiler/ops/quantized.py``).

Codes are computed in float32 exactly as the reference does (the OpDefs'
docstrings give the formulas) and converted back with oneDNN's rounding
(half to even) and saturation.  Pooling lowers through the float Pooling
converter on the codes (max is exact; avg is rounded afterwards).

Host only, by choice: ``_contrib_calibrate_entropy`` (a calibration-time
histogram search, never in a deployed graph) and ``_contrib_quantize_asym``
(its output range comes from a data-dependent min/max and MXNet only runs it
on 3-D input: not worth a kernel).
"""

from __future__ import annotations

import numpy as np

from ....compiler.ir import Node
from ....compiler.ops.quantization import K_INT8_RANGE, K_UINT8_RANGE, code_levels
from ..converter import Lowering, NodeIO, register_converter, register_host_only
from ._common import R, const, exact_product
from ._quant_helpers import INT32_RANGE, max_abs, saturate, vec
from .nn_pool import pooling

F = "float32"
K_INT8 = float(K_INT8_RANGE)


@register_converter("_contrib_quantized_flatten")
def quantized_flatten(ctx: Lowering):
    return [ctx.reshape(ctx.inputs[0], ctx.out_shape), ctx.inputs[1], ctx.inputs[2]]


@register_converter("_contrib_quantized_act")
def quantized_act(ctx: Lowering):
    x = ctx.inputs[0]
    if ctx.in_dtypes[0] == "uint8":  # relu is the identity; the bits are read as int8
        return [ctx.astype(x, "int8"), ctx.inputs[1], ctx.inputs[2]]
    return [ctx.emit(R.maximum(x, const(0, "int8"))), ctx.inputs[1], ctx.inputs[2]]


@register_converter("_contrib_quantized_pooling")
def quantized_pooling(ctx: Lowering):
    node = ctx.node
    twin = Node("Pooling", f"{node.name}_codes", dict(node.attrs))
    io = NodeIO(in_shapes=[ctx.in_shapes[0]], in_dtypes=[F],
                out_shapes=[ctx.out_shapes[0]], out_dtypes=[F])
    inner = Lowering(ctx.bb, twin, [ctx.astype(ctx.inputs[0], F)], io)
    y = pooling(inner)
    y = y[0] if isinstance(y, (list, tuple)) else y
    return [saturate(ctx, y, ctx.out_dtype), ctx.inputs[1], ctx.inputs[2]]


@register_converter("_contrib_quantized_concat")
def quantized_concat(ctx: Lowering):
    n = ctx.p.num_args
    lows, highs = ctx.inputs[n::2], ctx.inputs[n + 1::2]
    lo = lows[0]
    hi = highs[0]
    for a, b in zip(lows[1:], highs[1:]):
        lo = ctx.emit(R.minimum(lo, a))
        hi = ctx.emit(R.maximum(hi, b))
    out_dt = ctx.out_dtype
    out_scale = ctx.emit(R.divide(const(code_levels(out_dt), F), max_abs(ctx, lo, hi)))
    parts = []
    for k in range(n):
        in_scale = ctx.emit(R.divide(const(code_levels(ctx.in_dtypes[k]), F),
                                     max_abs(ctx, lows[k], highs[k])))
        scale = ctx.emit(R.divide(out_scale, in_scale))
        parts.append(saturate(ctx, ctx.emit(R.multiply(ctx.astype(ctx.inputs[k], F), scale)),
                               out_dt))
    axis = ctx.p.dim % len(ctx.in_shapes[0])
    return [ctx.emit(R.concat(parts, axis=axis)), lo, hi]


@register_converter("_contrib_quantized_elemwise_add")
def quantized_elemwise_add(ctx: Lowering):
    op, p = ctx.node.opdef, ctx.p
    a, b, a_lo, a_hi, b_lo, b_hi = ctx.inputs
    ra, rb = max_abs(ctx, a_lo, a_hi), max_abs(ctx, b_lo, b_hi)
    la, lb = code_levels(ctx.in_dtypes[0]), code_levels(ctx.in_dtypes[1])
    out_dt = op.out_type(p)
    if op.calibrated(p):
        c_lo, c_hi = np.float32(p.min_calib_range), np.float32(p.max_calib_range)
        out_scale = np.float32(code_levels(out_dt)) / max(abs(c_lo), abs(c_hi))
        sa = ctx.emit(R.divide(const(out_scale, F), R.divide(const(la, F), ra)))
        sb = ctx.emit(R.divide(const(out_scale, F), R.divide(const(lb, F), rb)))
        lo, hi = vec(ctx, float(c_lo)), vec(ctx, float(c_hi))
    else:
        total = ctx.emit(R.add(ra, rb))
        sa = ctx.emit(R.divide(R.multiply(ra, const(INT32_RANGE, F)),
                               R.multiply(total, const(la, F))))
        sb = ctx.emit(R.divide(R.multiply(rb, const(INT32_RANGE, F)),
                               R.multiply(total, const(lb, F))))
        lo, hi = ctx.emit(R.negative(total)), total
    y = ctx.emit(R.add(exact_product(ctx, a, sa), exact_product(ctx, b, sb)))
    return [saturate(ctx, y, out_dt), lo, hi]



@register_converter("_contrib_quantized_elemwise_mul")
def quantized_elemwise_mul(ctx: Lowering):
    op, p = ctx.node.opdef, ctx.p
    a, b, a_lo, a_hi, b_lo, b_hi = ctx.inputs
    sa = ctx.emit(R.divide(const(K_INT8, F), max_abs(ctx, a_lo, a_hi)))
    sb = ctx.emit(R.divide(const(K_INT8, F), max_abs(ctx, b_lo, b_hi)))
    prod = ctx.astype(ctx.emit(R.multiply(ctx.astype(a, "int32"), ctx.astype(b, "int32"))), F)
    if p.enable_float_output:
        inv = ctx.emit(R.divide(R.divide(const(1.0, F), sa), sb))
        return [ctx.emit(R.multiply(prod, inv))]
    if op.calibrated(p):
        c_lo, c_hi = np.float32(p.min_calib_range), np.float32(p.max_calib_range)
        out_scale = np.float32(K_INT8) / max(abs(c_lo), abs(c_hi))
        scale = ctx.emit(R.divide(R.divide(const(out_scale, F), sa), sb))
        y = ctx.emit(R.trunc(R.multiply(prod, scale)))
        return [ctx.astype(y, "int8"), vec(ctx, float(c_lo)), vec(ctx, float(c_hi))]
    la = ctx.emit(R.divide(max_abs(ctx, a_lo, a_hi), const(127.0, F)))
    lb = ctx.emit(R.divide(max_abs(ctx, b_lo, b_hi), const(127.0, F)))
    hi = ctx.emit(R.multiply(R.multiply(la, lb), const(INT32_RANGE, F)))
    return [ctx.astype(prod, "int32"), ctx.emit(R.negative(hi)), hi]


@register_converter("_contrib_quantize")
def quantize(ctx: Lowering):
    x, lo, hi = (ctx.astype(v, F) for v in ctx.inputs)
    if ctx.p.out_type == "uint8":
        q = saturate(ctx, ctx.emit(R.multiply(x, R.divide(const(255.0, F), hi))), "uint8")
        return [q, lo, hi]
    real = max_abs(ctx, lo, hi)
    q = saturate(ctx, ctx.emit(R.multiply(x, R.divide(const(127.0, F), real))), "int8")
    return [q, ctx.emit(R.negative(real)), real]


@register_converter("_contrib_quantized_embedding")
def quantized_embedding(ctx: Lowering):
    rows = ctx.in_shapes[1][0]
    j = ctx.emit(R.clip(ctx.astype(ctx.inputs[0], "int64"), 0, rows - 1))
    return [ctx.emit(R.take(ctx.inputs[1], j, axis=0)), ctx.inputs[2], ctx.inputs[3]]


@register_converter("_contrib_quantized_batch_norm")
def quantized_batch_norm(ctx: Lowering):
    p = ctx.p
    x, gamma, beta, mean, var, lo, hi = ctx.inputs
    ndim = len(ctx.in_shapes[0])
    shape = [1] * ndim
    shape[p.axis % ndim] = -1
    c_lo, c_hi = np.float32(p.min_calib_range), np.float32(p.max_calib_range)
    r_out = max(abs(c_lo), abs(c_hi))
    g = gamma  # fix_gamma has no effect on the quantized kernel (see the definition)
    var64 = ctx.astype(var, "float64")  # MXNet: float var + double eps, sqrt in double
    invstd = ctx.astype(ctx.emit(R.divide(const(1.0, "float64"),
                                          R.sqrt(R.add(var64, const(p.eps, "float64"))))), F)
    w = ctx.emit(R.divide(R.multiply(R.multiply(g, invstd), max_abs(ctx, lo, hi)),
                          const(r_out, F)))
    b = ctx.emit(R.divide(R.multiply(R.subtract(beta, R.multiply(R.multiply(mean, g), invstd)),
                                     const(K_INT8, F)), const(r_out, F)))
    xs = ctx.astype(x, F)
    if ctx.in_dtypes[0] == "uint8":
        xs = ctx.emit(R.round(R.multiply(xs, const(K_INT8_RANGE / K_UINT8_RANGE, F))))
    y = ctx.emit(R.divide(xs, const(np.sqrt(np.float32(1) + np.float32(p.eps)), F)))
    y = ctx.emit(R.add(exact_product(ctx, y, R.reshape(w, shape)), R.reshape(b, shape)))
    return [saturate(ctx, y, "int8"), vec(ctx, float(c_lo)), vec(ctx, float(c_hi))]


register_host_only("_contrib_calibrate_entropy",
                   reason="a calibration-time histogram search (KL divergence over candidate "
                          "thresholds), never part of a deployed graph: host kernel")
register_host_only("_contrib_quantize_asym",
                   reason="data-dependent range on 3-D input only in MXNet; host kernel")
