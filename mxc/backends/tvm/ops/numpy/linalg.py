"""DeepNumpy products and linear algebra (``mxc/compiler/ops/numpy/linalg.py``).

``matmul`` (and ``dot`` where it equals ``matmul``: a right operand of rank
<= 2) lower to Relax ``matmul``; ``einsum``/``tensordot`` to Relax ``einsum``.
Decompositions stay on the host (LAPACK through NumPy in double precision).
"""

from __future__ import annotations

from ...converter import Lowering, register_converter, register_host_only
from .._common import R
from ._twins import register_twins


def _dot_is_matmul(node, io):
    b = io.in_shapes[1]
    a = io.in_shapes[0]
    if b is None or a is None or len(b) > 2 or len(a) == 0 or len(b) == 0:
        return "dot with a right operand of rank > 2 (or a scalar) is not lowered"
    return True


@register_converter("_npi_matmul")
def matmul(ctx: Lowering):
    a, b = (ctx.astype(x, ctx.out_dtype) for x in ctx.inputs)
    return ctx.reshape(ctx.emit(R.matmul(a, b)), ctx.out_shape)


register_converter("_np_dot", supports=_dot_is_matmul)(matmul)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


@register_converter("_npi_einsum")
def einsum(ctx: Lowering):
    xs = [ctx.astype(x, ctx.out_dtype) for x in ctx.inputs]
    return R.einsum(xs, ctx.p.subscripts.strip("'\""))


def _tensordot_subscripts(na: int, nb: int, a_axes, b_axes) -> str:
    a = list(_LETTERS[:na])
    b = list(_LETTERS[na:na + nb])
    for i, j in zip(a_axes, b_axes):
        b[j % nb] = a[i % na]
    summed = {a[i % na] for i in a_axes}
    out = [c for c in a if c not in summed] + [c for c in b if c not in summed]
    return f"{''.join(a)},{''.join(b)}->{''.join(out)}"


@register_converter("_npi_tensordot", "_npi_tensordot_int_axes")
def tensordot(ctx: Lowering):
    na, nb = len(ctx.in_shapes[0]), len(ctx.in_shapes[1])
    if ctx.op == "_npi_tensordot":
        a_axes, b_axes = list(ctx.p.a_axes_summed), list(ctx.p.b_axes_summed)
    else:
        k = ctx.p.axes
        a_axes, b_axes = list(range(na - k, na)), list(range(k))
    xs = [ctx.astype(x, ctx.out_dtype) for x in ctx.inputs]
    return R.einsum(xs, _tensordot_subscripts(na, nb, a_axes, b_axes))


register_host_only(
    "_npi_cholesky", "_npi_solve", "_npi_svd", "_npi_eigh", "_npi_eigvalsh", "_npi_eig",
    "_npi_eigvals", "_npi_pinv", "_npi_pinv_scalar_rcond", "_npi_tensorinv",
    "_npi_tensorsolve", "_npi_det", "_npi_slogdet", "_npi_polyval",
    reason="dense decompositions run once per call on small matrices: LAPACK on the host "
           "(double precision, MXNet's sign conventions) is faster than a generated kernel")


register_twins(__name__)
