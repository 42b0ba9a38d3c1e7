"""Interleaved attention matmuls and ``_contrib_div_sqrt_dim``
(``mxc/compiler/ops/attention.py``).

``queries_keys_values`` is ``(L, B, heads * 3 * head_dim)`` (per head
``[q, k, v]``), ``keys_values`` ``(L, B, heads * 2 * head_dim)``; attention
scores are ``(B * heads, Lq, Lk)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const


def _split_heads(ctx: Lowering, x, heads: int, parts: int):
    """(L, B, heads*parts*hd) -> list of ``parts`` tensors (B*heads, L, hd)."""
    length, batch, width = ctx.shape_of(x)
    hd = width // (heads * parts)
    x5 = ctx.reshape(x, (length, batch, heads, parts, hd))
    out = []
    for j in range(parts):
        part = ctx.emit(R.strided_slice(x5, axes=[3], begin=[j], end=[j + 1]))
        part = ctx.emit(R.permute_dims(ctx.reshape(part, (length, batch, heads, hd)),
                                       [1, 2, 0, 3]))
        out.append(ctx.reshape(part, (batch * heads, length, hd)))
    return out


def _merge_heads(ctx: Lowering, y, batch: int, heads: int):
    """(B*heads, L, hd) -> (L, B, heads*hd)."""
    _, length, hd = ctx.shape_of(y)
    y = ctx.emit(R.permute_dims(ctx.reshape(y, (batch, heads, length, hd)), [2, 0, 1, 3]))
    return ctx.reshape(y, (length, batch, heads * hd))


def _qk(ctx: Lowering, q, k, dt):
    hd = ctx.shape_of(q)[-1]
    scale = float(np.float32(1.0 / math.sqrt(np.float32(hd))))
    q = ctx.emit(R.multiply(q, const(scale, dt)))
    return ctx.emit(R.matmul(q, R.permute_dims(k, [0, 2, 1])))


@register_converter("_contrib_interleaved_matmul_selfatt_qk")
def selfatt_qk(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    q, k, _ = _split_heads(ctx, x, ctx.p.heads, 3)
    return ctx.astype(_qk(ctx, q, k, dt), ctx.out_dtype)


@register_converter("_contrib_interleaved_matmul_selfatt_valatt")
def selfatt_valatt(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    att = ctx.astype(ctx.inputs[1], dt)
    _, _, v = _split_heads(ctx, x, ctx.p.heads, 3)
    y = ctx.emit(R.matmul(att, v))
    return ctx.astype(_merge_heads(ctx, y, ctx.in_shapes[0][1], ctx.p.heads), ctx.out_dtype)


@register_converter("_contrib_interleaved_matmul_encdec_qk")
def encdec_qk(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    (q,) = _split_heads(ctx, ctx.astype(ctx.inputs[0], dt), ctx.p.heads, 1)
    k, _ = _split_heads(ctx, ctx.astype(ctx.inputs[1], dt), ctx.p.heads, 2)
    return ctx.astype(_qk(ctx, q, k, dt), ctx.out_dtype)


@register_converter("_contrib_interleaved_matmul_encdec_valatt")
def encdec_valatt(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    kv = ctx.astype(ctx.inputs[0], dt)
    att = ctx.astype(ctx.inputs[1], dt)
    _, v = _split_heads(ctx, kv, ctx.p.heads, 2)
    y = ctx.emit(R.matmul(att, v))
    return ctx.astype(_merge_heads(ctx, y, ctx.in_shapes[0][1], ctx.p.heads), ctx.out_dtype)


@register_converter("_contrib_div_sqrt_dim")
def div_sqrt_dim(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    d = float(np.sqrt(np.asarray(ctx.in_shapes[0][-1], dtype=dt)))
    return ctx.astype(ctx.emit(R.divide(x, const(d, dt))), ctx.out_dtype)
