"""Tensor-scalar ops (``mxc/compiler/ops/elemwise_scalar.py``).

The scalar is converted to the op's dtype first, as mshadow does (an int
tensor truncates it: ``int32 x + 2.5 == x + 2``; float16 rounds it to half),
then the shared kernel of :mod:`.elemwise_binary` runs; ``is_int=False`` on an
integer tensor promotes to float64 (the inferred output dtype says so).
"""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import const, scalar_as
from .elemwise_binary import binary_kernel


def scalar_converter(kernel: str, reverse: bool = False):
    def convert(ctx: Lowering):
        dt = ctx.out_dtype
        x = ctx.astype(ctx.inputs[0], dt)
        s = const(scalar_as(ctx.p.scalar, dt), dt)
        a, b = (s, x) if reverse else (x, s)
        return binary_kernel(ctx, kernel, a, b, dt)
    convert.__name__ = f"convert_{'r' if reverse else ''}{kernel}_scalar"
    return convert


SCALAR = {
    "_plus_scalar": ("plus", False), "_minus_scalar": ("minus", False),
    "_rminus_scalar": ("minus", True), "_mul_scalar": ("mul", False),
    "_div_scalar": ("div", False), "_rdiv_scalar": ("rdiv", True),
    "_mod_scalar": ("mod", False), "_rmod_scalar": ("mod", True),
    "_power_scalar": ("power", False), "_rpower_scalar": ("power", True),
    "_maximum_scalar": ("maximum", False), "_minimum_scalar": ("minimum", False),
    "_hypot_scalar": ("hypot", False), "_equal_scalar": ("equal", False),
    "_not_equal_scalar": ("not_equal", False), "_greater_scalar": ("greater", False),
    "_greater_equal_scalar": ("greater_equal", False), "_lesser_scalar": ("lesser", False),
    "_lesser_equal_scalar": ("lesser_equal", False),
    "_logical_and_scalar": ("logical_and", False), "_logical_or_scalar": ("logical_or", False),
    "_logical_xor_scalar": ("logical_xor", False),
}
for _op, (_kernel, _rev) in SCALAR.items():
    register_converter(_op)(scalar_converter(_kernel, _rev))
