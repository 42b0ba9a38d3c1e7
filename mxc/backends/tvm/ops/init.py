"""Constant creators (``mxc/compiler/ops/init.py``).

Their values depend only on attributes and (inferred) shapes, so they are
computed once at lowering time by the op's reference kernel and embedded as
constants (TVM folds them into their consumers).
"""

from __future__ import annotations

from ..converter import Lowering, register_converter
from ._common import R, reference_constant


@register_converter("_zeros")
def zeros(ctx: Lowering):
    return R.zeros(ctx.out_shape, ctx.out_dtype)


@register_converter("_ones")
def ones(ctx: Lowering):
    return R.ones(ctx.out_shape, ctx.out_dtype)


@register_converter("_full", "_eye", "_arange", "_contrib_arange_like", "_linspace",
                    "_zeros_without_dtype")
def constant(ctx: Lowering):
    return reference_constant(ctx)
