"""The Winograd F(m, 3) transforms: matrices, weight/input/output transforms, the kernels' wiring.

Both Winograd families -- float32 (:mod:`..families.winograd`) and bfloat16
(:mod:`..families.bf16_winograd`) -- are the same three kernels around a different
batched product: this module holds what they share (which layers are eligible,
the tile size, the transforms as TE kernels, the weight transform's load-time
evaluator, and :func:`emit_transforms`, which wires input transform, a given
product and output transform together), so that neither family imports the other.
The float32 family keeps its product, its precision budget and the schedules.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from tvm import te, tirx

from ...load_time import register_evaluator
from .kernel_family import stamp

#: the PrimFunc ``op_pattern`` FuseOps never fuses across
_OPAQUE = 8
#: the kernel (and load-time transform kind) computing ``U`` from the weights
WEIGHT_KERNEL = "winograd_weight"
#: the first pass of the output transform (``A^T M``, see :func:`output_transform`)
OUTPUT_ROWS = "winograd_rows"
#: the kernel family (:mod:`.kernel_family`) stamped on the transforms, whose rule
#: (:func:`..families.winograd.rule_winograd`) schedules them -- for both Winograd
#: families, so it lives here; each transform's block also names its part
#: (:data:`.kernel_family.PART_ATTR`: ``weight``, ``input``, ``rows``, ``output``)
FAMILY = "winograd"


@functools.lru_cache(maxsize=None)
def transform_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, G) of F(m, r) in float64: ``Y = A^T [(G g G^T) * (B^T d B)] A``."""
    from tvm.topi.nn import winograd_util
    points = winograd_util._interpolation_points(m + r - 1)
    a, b, g = winograd_util._cook_toom_convolution(points, m, r)
    return np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(g, np.float64)


#: fewest F(4, 3) tiles (batch x tile rows x tile columns) for which F(4, 3) is used; on
#: fewer, F(2, 3).  The batched product multiplies each transformed weight by one input
#: per tile, and F(4, 3)'s weights are 2.25x F(2, 3)'s: over few tiles the product
#: streams weights rather than computing, and fewer weight bytes beat fewer multiply-adds.
#: Whole models, paired A/B on Zen 4 (AVX-512 and AVX2 code): 16 tiles (13x13 and 14x14
#: outputs) ran faster with F(2, 3) -- squeezenet1.1 -2.6% / -7.6% (AVX2), resnet18
#: -0.5% / -4.6%, densenet121 -2.6% -- and 49 tiles (27x27) slower (squeezenet +1.4%)
F4_MIN_TILES = 32


def tile_size(n: int, oh: int, ow: int) -> int:
    """F(4, 3) where the output fills enough 4x4 tiles (:data:`F4_MIN_TILES`) to reuse
    its larger transformed weights, else F(2, 3)."""
    return 4 if _tiles(n, oh, ow, 4)[2] >= F4_MIN_TILES else 2


def vector_unit(channels: int, lanes: int) -> int | None:
    """The vector width the transforms use for *channels*: a whole register, or half
    of a 16-lane one (24 or 40 channels on AVX-512 are whole 8-lane vectors); None
    when neither divides the channels."""
    if channels % lanes == 0:
        return lanes
    if lanes >= 16 and channels % (lanes // 2) == 0:
        return lanes // 2
    return None


def eligible(xs, ws, strides, dilation, groups: int, lanes: int, min_size: int) -> bool:
    """3x3, stride 1, dilation 1, ungrouped, channels whole vectors, sides >= *min_size*
    (:attr:`...build_context.BuildContext.winograd_min_size`)."""
    if len(xs) != 4 or len(ws) != 4:
        return False
    kh, kw, c, k = ws
    return ((kh, kw) == (3, 3) and tuple(strides) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and vector_unit(c, lanes) is not None
            and vector_unit(k, lanes) is not None and c >= 16
            and min(xs[1], xs[2]) >= min_size)


def transform_weights(w_hwio: np.ndarray, m: int, nc: int) -> np.ndarray:
    """``U = G g G^T`` per (input, output) channel pair, packed ``[E, K/nc, C, nc]``
    (numpy, float64 rounded once: what :func:`weight_transform` computes)."""
    _, _, g = transform_matrices(m)
    alpha = m + 2
    kh, kw, c, k = w_hwio.shape
    u = np.einsum("ai,ijck,bj->abck", g, w_hwio.astype(np.float64), g)   # [a, a, C, K]
    u = u.reshape(alpha * alpha, c, k // nc, nc).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(u.astype(w_hwio.dtype))


def transformed_shape(w_shape, m: int, nc: int) -> tuple[int, int, int, int]:
    """The shape of ``U`` for ``[3, 3, C, K]`` weights: ``[(m+2)^2, K/nc, C, nc]``."""
    _, _, c, k = (int(d) for d in w_shape)
    return ((m + 2) ** 2, k // nc, c, nc)


def weight_transform(w: te.Tensor, m: int, nc: int) -> te.Tensor:
    """``U[e, ko, c, ki] = (G g G^T)[e]`` of the weights ``w[3, 3, C, K]`` with
    ``k = ko * nc + ki``: the TE twin of :func:`transform_weights`, run once at
    load time (float64 accumulation, rounded once, as numpy does)."""
    _, _, g = transform_matrices(m)
    gt = np.ascontiguousarray(g.T)      # [3, m+2]: column = the tile position
    alpha = m + 2
    wide = "float64"

    def compute(e, ko, ch, ki):
        a, b = e // alpha, e % alpha
        total = tirx.const(0.0, wide)
        for i in range(3):
            for j in range(3):
                coef = _select(gt, i, a, wide) * _select(gt, j, b, wide)
                total = total + coef * w[i, j, ch, ko * nc + ki].astype(wide)
        return total.astype(w.dtype)

    return te.compute(transformed_shape(w.shape, m, nc), compute, name=WEIGHT_KERNEL,
                      attrs=stamp(FAMILY, "weight"))


@register_evaluator(WEIGHT_KERNEL)
def _evaluate_weight_transform(args: list[np.ndarray], out_shape: tuple) -> np.ndarray:
    """The numpy fallback of a ``winograd_weight`` call that is not lifted."""
    w = args[0]
    alpha2, _, _, nc = out_shape
    return transform_weights(w, math.isqrt(alpha2) - 2, nc)


def _select(matrix: np.ndarray, row: int, col, dtype: str):
    """``matrix[row, col]`` for a symbolic *col*: a Select chain folding to a
    literal once *col* is a constant (the schedules unroll it)."""
    value = tirx.const(0.0, dtype)
    for j in range(matrix.shape[1]):
        coef = float(matrix[row, j])
        if coef != 0.0:
            value = tirx.Select(col == j, tirx.const(coef, dtype), value)
    return value


def _tiles(n: int, oh: int, ow: int, m: int) -> tuple[int, int, int]:
    th, tw = -(-oh // m), -(-ow // m)
    return th, tw, n * th * tw


def tile_count(n: int, oh: int, ow: int, m: int) -> int:
    """F(m, 3) tiles of an *n* x *oh* x *ow* output: the rows of the batched product."""
    return _tiles(n, oh, ow, m)[2]


def input_transform(data: te.Tensor, m: int, padding, oh: int, ow: int,
                    finish=None) -> te.Tensor:
    """``V[e, p, c]``: every (m+2)x(m+2) input tile through ``B^T d B`` (then through
    *finish*, if given: the bfloat16 kernels round it, :mod:`..families.bf16_winograd`)."""
    n, h, w, c = (int(d) for d in data.shape)
    pt, pl = int(padding[0]), int(padding[1])
    _, b, _ = transform_matrices(m)
    alpha = m + 2
    th, tw, tiles = _tiles(n, oh, ow, m)
    dtype = data.dtype
    zero = tirx.const(0.0, dtype)

    def compute(e, p, ch):
        eps, nu = e // alpha, e % alpha
        i, ty, tx = p // (th * tw), p // tw % th, p % tw
        total = zero
        for r1 in range(alpha):
            for r2 in range(alpha):
                y, x = ty * m + r1 - pt, tx * m + r2 - pl
                inside = tirx.all(y >= 0, y < h, x >= 0, x < w)
                d = tirx.if_then_else(inside, data[i, y, x, ch], zero)
                coef = _select(b, r1, eps, dtype) * _select(b, r2, nu, dtype)
                total = total + coef * d
        return total if finish is None else finish(total)

    return te.compute((alpha * alpha, tiles, c), compute, name="winograd_input",
                      attrs=stamp(FAMILY, "input"))


def output_transform(mm: te.Tensor, m: int, n: int, oh: int, ow: int) -> te.Tensor:
    """``Y[n, h, w, k]``: every tile through ``A^T M A``, cropped to the output.

    Computed in two passes, as the product is separable: ``T = A^T M`` over the
    tile's rows (``winograd_rows``: m x (m+2) per tile), then ``Y = T A`` over its
    columns -- about half the multiply-adds of summing all (m+2)^2 terms for each
    of the m^2 outputs (F(4, 3): 240 instead of ~400 per tile and channel)."""
    a, _, _ = transform_matrices(m)
    alpha = m + 2
    th, tw, tiles = _tiles(n, oh, ow, m)
    k = int(mm.shape[-1])
    dtype = mm.dtype
    # the bfloat16 product's [E, 1, tiles, K] (a 1x1 convolution's layout) or [E, tiles, K]
    at = (lambda e, p, ch: mm[e, 0, p, ch]) if len(mm.shape) == 4 else \
        (lambda e, p, ch: mm[e, p, ch])

    def rows(yi, nu, p, ch):
        total = tirx.const(0.0, dtype)
        for eps in range(alpha):
            total = total + _select(a, eps, yi, dtype) * at(eps * alpha + nu, p, ch)
        return total

    t = te.compute((m, alpha, tiles, k), rows, name=OUTPUT_ROWS, attrs=stamp(FAMILY, "rows"))

    def compute(i, y, x, ch):
        p = i * (th * tw) + (y // m) * tw + x // m
        yi, xi = y % m, x % m
        total = tirx.const(0.0, dtype)
        for nu in range(alpha):
            total = total + _select(a, nu, xi, dtype) * t[yi, nu, p, ch]
        return total

    return te.compute((n, oh, ow, k), compute, name="winograd_output",
                      attrs=stamp(FAMILY, "output"))


def emit_transforms(bb, x, u, m: int, padding, out_nhw, product, finish=None,
                    suffix: str = ""):
    """The input transform of *x* (then *finish*, see :func:`input_transform`), its
    batched *product* with the transformed weights *u*, and the output transform:
    the three kernels of an F(*m*, 3) convolution (:mod:`..families.winograd`'s and
    :mod:`..families.bf16_winograd`'s)."""
    n, oh, ow = out_nhw
    pad = [int(p) for p in padding]
    v = bb.emit(_opaque(bb, bb.call_te(lambda d: input_transform(d, m, pad, oh, ow, finish),
                                       x, primfunc_name_hint=f"winograd_input{suffix}")))
    mm = bb.emit(_opaque(bb, bb.call_te(product, v, u,
                                        primfunc_name_hint=f"winograd_bgemm{suffix}")))
    return bb.call_te(output_transform, mm, m, n, oh, ow, primfunc_name_hint="winograd_output")


def _opaque(bb, call):
    """Keep *call*'s kernel out of operator fusion: fused into the producer's epilogue
    (an output transform, a convolution) the input transform would leave that kernel
    without a schedule that fits; the product is a plain reduction only alone."""
    gv = call.args[0]
    bb.update_func(gv, bb.get()[gv].with_attr("op_pattern", _OPAQUE))
    return call
