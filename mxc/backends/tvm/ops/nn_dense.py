"""Dense layers and matrix products (``mxc/compiler/ops/nn_dense.py``).

Weights are transposed with ``permute_dims``; with bound parameters TVM
folds that transpose at compile time.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, identity


def _swap_last(ctx: Lowering, x, a: int = -1, b: int = -2):
    nd = len(ctx.shape_of(x))
    a, b = a % nd, b % nd
    if a == b:
        return x
    axes = list(range(nd))
    axes[a], axes[b] = axes[b], axes[a]
    return ctx.emit(R.permute_dims(x, axes))


@register_converter("FullyConnected")
def fully_connected(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    w = ctx.astype(ctx.inputs[1], dt)
    shape = ctx.in_shapes[0]
    if p.flatten:
        x = ctx.reshape(x, (shape[0], int(np.prod(shape[1:]))))
    y = ctx.emit(R.matmul(x, R.permute_dims(w, [1, 0])))
    if not p.no_bias:
        b = ctx.reshape(ctx.astype(ctx.inputs[2], dt), (p.num_hidden,))
        y = ctx.emit(R.add(y, b))
    return ctx.astype(y, ctx.out_dtype)


@register_converter("Dropout", supports=lambda node, io: (
    True if node.params.mode != "always"
    else "Dropout mode='always' drops at random even in inference"))
def dropout(ctx: Lowering):
    return [identity(ctx)]


@register_converter("dot")
def dot(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    a = ctx.astype(ctx.inputs[0], dt)
    b = ctx.astype(ctx.inputs[1], dt)
    sa, sb = ctx.in_shapes
    if len(sa) == 1 and len(sb) == 1:
        y = ctx.emit(R.sum(R.multiply(a, b), axis=[0], keepdims=True))
        return ctx.astype(y, ctx.out_dtype)
    if p.transpose_a:
        a2 = ctx.emit(R.permute_dims(ctx.reshape(a, (sa[0], int(np.prod(sa[1:])))), [1, 0]))
    else:
        a2 = ctx.reshape(a, (int(np.prod(sa[:-1])), sa[-1]))
    if p.transpose_b:
        b2 = ctx.emit(R.permute_dims(ctx.reshape(b, (int(np.prod(sb[:-1])), sb[-1])), [1, 0]))
    else:
        b2 = ctx.reshape(b, (sb[0], int(np.prod(sb[1:]))))
    y = ctx.emit(R.matmul(a2, b2))
    return ctx.astype(ctx.reshape(y, ctx.out_shape), ctx.out_dtype)


@register_converter("batch_dot")
def batch_dot(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    a = ctx.astype(ctx.inputs[0], dt)
    b = ctx.astype(ctx.inputs[1], dt)
    if ctx.p.transpose_a:
        a = _swap_last(ctx, a)
    if ctx.p.transpose_b:
        b = _swap_last(ctx, b)
    return ctx.astype(ctx.emit(R.matmul(a, b)), ctx.out_dtype)


@register_converter("_linalg_gemm2")
def linalg_gemm2(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    nd = len(ctx.in_shapes[0])
    axis = p.axis % nd
    a = _swap_last(ctx, ctx.astype(ctx.inputs[0], dt), axis, -2)
    b = _swap_last(ctx, ctx.astype(ctx.inputs[1], dt), axis, -2)
    if p.transpose_a:
        a = _swap_last(ctx, a)
    if p.transpose_b:
        b = _swap_last(ctx, b)
    y = ctx.emit(R.matmul(a, b))
    if p.alpha != 1.0:
        y = ctx.emit(R.multiply(y, const(p.alpha, dt)))
    return ctx.astype(_swap_last(ctx, y, axis, -2), ctx.out_dtype)
