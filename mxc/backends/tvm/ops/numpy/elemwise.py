"""DeepNumpy elementwise ops without a legacy twin (``mxc/compiler/ops/numpy/elemwise.py``).

The twins (unary math, promoted binaries, tensor-scalar ops) lower through
:mod:`.twins`; here are the ``is*`` predicates and ``bitwise_not``.
"""

from __future__ import annotations

from ...converter import Lowering, register_converter, register_host_only
from .._common import R, const, is_float


def _float_test(test, otherwise: bool):
    def convert(ctx: Lowering):
        x = ctx.inputs[0]
        if not is_float(ctx.in_dtypes[0]):
            return R.full(ctx.out_shape, const(otherwise, "bool"), "bool")
        return test(ctx, x)
    return convert


def _isinf_sign(positive: bool):
    def test(ctx, x):
        inf = R.isinf(x)
        zero = const(0, ctx.in_dtypes[0])
        side = R.greater(x, zero) if positive else R.less(x, zero)
        return R.logical_and(ctx.emit(inf), ctx.emit(side))
    return test


register_converter("_npi_isnan")(_float_test(lambda ctx, x: R.isnan(x), False))
register_converter("_npi_isinf")(_float_test(lambda ctx, x: R.isinf(x), False))
register_converter("_npi_isfinite")(_float_test(lambda ctx, x: R.isfinite(x), True))
register_converter("_npi_isposinf")(_float_test(_isinf_sign(True), False))
register_converter("_npi_isneginf")(_float_test(_isinf_sign(False), False))


@register_converter("_npi_bitwise_not")
def bitwise_not(ctx: Lowering):
    x = ctx.inputs[0]
    if ctx.in_dtypes[0] == "bool":
        return R.logical_not(x)
    return R.bitwise_not(x)


register_host_only(
    "_npi_arctan2", "_npi_copysign", "_npi_ldexp", "_npi_lcm", "_npi_bitwise_and",
    "_npi_bitwise_or", "_npi_bitwise_xor", "_npi_arctan2_scalar", "_npi_rarctan2_scalar",
    "_npi_copysign_scalar", "_npi_rcopysign_scalar", "_npi_ldexp_scalar", "_npi_rldexp_scalar",
    "_npi_bitwise_and_scalar", "_npi_bitwise_or_scalar", "_npi_bitwise_xor_scalar",
    "_npi_lcm_scalar", "_npi_around", "_npi_nan_to_num",
    reason="rare NumPy elementwise functions with no Relax operator: the host kernel is "
           "cheap and lowering them would not pay")
