"""Linear algebra (``mxc/compiler/ops/linalg.py``).

Products lower to Relax matmuls (``gemm``, ``syrk``, ``trmm`` with the
triangle masked, ``khatri_rao``); diagonal/triangle packing lowers to gathers
whose positions come from the op definition (``positions``); ``sumlogdiag``
is a gather, log and sum.  Factorisations and solves (``potrf``, ``potri``,
``inverse``, ``det``, ``slogdet``, ``syevd``, ``gelqf``, ``trsm``) stay on the
host: they are pivoting/iterative LAPACK algorithms on small matrices, where a
TVM kernel would not pay.
"""

from __future__ import annotations

import numpy as np

from ..converter import Lowering, register_converter, register_host_only
from ._common import R, const
from .nn_dense import _swap_last, linalg_gemm2

register_host_only(
    "_linalg_potrf", "_linalg_potri", "_linalg_inverse", "_linalg_det", "_linalg_slogdet",
    "_linalg_syevd", "_linalg_gelqf", "_linalg_trsm",
    reason="LAPACK-style factorisations/solves (pivoting, iterative eigensolvers) on small "
           "matrices run on the host with numpy")


def _work(ctx: Lowering, i: int):
    return ctx.astype(ctx.inputs[i], ctx.in_dtypes[i])


@register_converter("_linalg_gemm")
def linalg_gemm(ctx: Lowering):
    product = linalg_gemm2(ctx)
    dt = ctx.out_dtype
    c = ctx.emit(R.multiply(ctx.astype(ctx.inputs[2], dt), const(ctx.p.beta, dt)))
    return ctx.emit(R.add(product, c))


@register_converter("_linalg_syrk")
def linalg_syrk(ctx: Lowering):
    a = _work(ctx, 0)
    at = _swap_last(ctx, a)
    y = ctx.emit(R.matmul(at, a) if ctx.p.transpose else R.matmul(a, at))
    return ctx.emit(R.multiply(y, const(ctx.p.alpha, ctx.out_dtype)))


@register_converter("_linalg_trmm")
def linalg_trmm(ctx: Lowering):
    p = ctx.p
    a = ctx.emit(R.tril(_work(ctx, 0), 0) if p.lower else R.triu(_work(ctx, 0), 0))
    if p.transpose:
        a = _swap_last(ctx, a)
    b = _work(ctx, 1)
    y = ctx.emit(R.matmul(b, a) if p.rightside else R.matmul(a, b))
    return ctx.emit(R.multiply(y, const(p.alpha, ctx.out_dtype)))


def _flat_positions(ctx: Lowering, n: int) -> np.ndarray:
    rows, cols = ctx.node.opdef.positions(ctx.p, n)
    return (rows * n + cols).astype(np.int64)


@register_converter("_linalg_extractdiag", "_linalg_extracttrian")
def linalg_extract(ctx: Lowering):
    shape = ctx.in_shapes[0]
    n = shape[-1]
    flat = ctx.reshape(ctx.inputs[0], tuple(shape[:-2]) + (n * n,))
    index = ctx.const(_flat_positions(ctx, n))
    return ctx.emit(R.take(flat, index, axis=len(shape) - 2))


@register_converter("_linalg_makediag", "_linalg_maketrian")
def linalg_make(ctx: Lowering):
    shape = ctx.in_shapes[0]
    n = ctx.out_shape[-1]
    k = shape[-1]
    source = np.full(n * n, k, dtype=np.int64)   # slot k is the appended zero
    source[_flat_positions(ctx, n)] = np.arange(k)
    zero = ctx.emit(R.zeros(tuple(shape[:-1]) + (1,), ctx.in_dtypes[0]))
    padded = ctx.emit(R.concat([ctx.inputs[0], zero], axis=len(shape) - 1))
    out = ctx.emit(R.take(padded, ctx.const(source), axis=len(shape) - 1))
    return ctx.reshape(out, ctx.out_shape)


@register_converter("_linalg_sumlogdiag")
def linalg_sumlogdiag(ctx: Lowering):
    shape = ctx.in_shapes[0]
    n = shape[-1]
    flat = ctx.reshape(_work(ctx, 0), tuple(shape[:-2]) + (n * n,))
    diag = ctx.emit(R.take(flat, ctx.const(np.arange(n, dtype=np.int64) * (n + 1)),
                           axis=len(shape) - 2))
    total = ctx.emit(R.sum(R.log(diag), axis=[-1]))
    return ctx.reshape(total, ctx.out_shape)


@register_converter("khatri_rao")
def khatri_rao(ctx: Lowering):
    out = ctx.inputs[0]
    rows = ctx.in_shapes[0][0]
    cols = ctx.in_shapes[0][1]
    for x, shape in zip(ctx.inputs[1:], ctx.in_shapes[1:]):
        left = ctx.reshape(out, (rows, 1, cols))
        right = ctx.reshape(x, (1, shape[0], cols))
        rows *= shape[0]
        out = ctx.reshape(ctx.emit(R.multiply(left, right)), (rows, cols))
    return out
