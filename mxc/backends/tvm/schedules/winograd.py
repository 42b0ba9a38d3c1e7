"""Winograd convolution for 3x3, stride-1 channels-last convolutions on CPU.

A direct 3x3 convolution does 9 multiply-adds per input channel per output
pixel.  Winograd's minimal filtering F(m, 3) computes an ``m x m`` output
tile from an ``(m+2) x (m+2)`` input tile with ``(m+2)^2`` multiply-adds per
channel pair instead of ``9 m^2``: 2.25x fewer for F(2, 3), 4x for F(4, 3).
The work becomes three kernels, each of a shape the default schedules know:

1. ``winograd_input``: ``V[e, p, c] = (B^T d_p B)[e]`` -- every input tile
   ``d_p`` (zero padding read in place) transformed by the constant matrix
   ``B``; ``e`` runs over the ``(m+2)^2`` tile positions, ``p`` over the tiles.
2. ``winograd_bgemm``: ``M[e, p, k] = sum_c V[e, p, c] U[e, c, k]`` -- one
   matrix product per tile position, ``U = G g G^T`` the transformed weights,
   packed ``[e, K/nc, C, nc]`` like the direct convolution's.
3. ``winograd_output``: ``Y = A^T M_p A`` per tile, cropped to the output,
   with the convolution's epilogue (bias, BatchNorm affine, residual add,
   activation) fused after it by FuseOps.

``U`` is (m+2)^2/9 times the size of the weights: 1.8x for F(2, 3), 4x for
F(4, 3).  So that the artifact stores the weights only once, as given, ``U``
comes from a fourth kernel, ``winograd_weight``, marked as a load-time
transform of constants: compiling a model (:mod:`..load_time`) moves it into
a function the runtime calls once when it loads the artifact, and passes its
result to every call of the region; elsewhere (a module built on its own) it
is evaluated in numpy at compile time (:func:`transform_weights`).  Both
compute in float64 and round once to the weights' dtype.

The transform matrices come from TVM's Cook-Toom construction.  Their
coefficients are selected by the tile position inside the kernels; the
schedules unroll that position so every coefficient becomes a literal and
zero terms vanish.  The batched product is kept out of operator fusion (it is
marked opaque) so that each kernel keeps its own loop nest.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from tvm import s_tir, te, tirx

from ..load_time import mark_load_time, register_evaluator
from .winograd_precision import layer_error, precise_tile

#: the PrimFunc ``op_pattern`` FuseOps never fuses across
_OPAQUE = 8
#: the kernel (and load-time transform kind) computing ``U`` from the weights
WEIGHT_KERNEL = "winograd_weight"
#: the first pass of the output transform (``A^T M``, see :func:`output_transform`)
OUTPUT_ROWS = "winograd_rows"


@functools.lru_cache(maxsize=None)
def transform_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, G) of F(m, r) in float64: ``Y = A^T [(G g G^T) * (B^T d B)] A``."""
    from tvm.topi.nn import winograd_util
    points = winograd_util._interpolation_points(m + r - 1)
    a, b, g = winograd_util._cook_toom_convolution(points, m, r)
    return np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(g, np.float64)


#: environment switch: ``MXC_WINOGRAD=0`` lowers 3x3 convolutions directly
ENV = "MXC_WINOGRAD"


#: smallest side "auto" transforms: 7x7 (ResNet's last stage) makes 16 F(2, 3) tiles to
#: reuse 16/9 the weight bytes for 1.7x fewer multiply-adds.  Since the product reads
#: its weights in order (tile position outermost, :mod:`.reduction`) that pays: resnet18
#: 3.7-4.3% faster on Zen 4 (AVX2 code: 2.4%), resnet50_v2 even (paired A/B), for
#: 16.8 MB of transformed weights per 512-channel convolution (resnet18: +22 MB)
MIN_SIZE = 7


#: the ``--winograd`` choices (``options.WINOGRAD_MODES``, carried by the build's
#: :class:`..build_context.BuildContext`): on (every 3x3 stride-1 convolution it applies
#: to), off (none: direct convolutions, weights stored once), auto (on where the output
#: side is at least MIN_SIZE: the speed pays for the larger weights)
#: smallest output side "on" transforms (F(2, 3) needs whole 2x2 tiles to be worth it)
MIN_SIZE_FORCED = 2


def manifest_record(stats: dict, lifted: dict) -> dict:
    """The manifest's ``winograd``: the build's *stats*
    (:attr:`..build_context.BuildRecords.winograd`) with where the
    transformed weights come from (*lifted*: :attr:`..build_context.BuildRecords.lifted`).

    ``weight_bytes`` / ``transformed_bytes``: the weights as given / as the kernels
    read them; ``transformed_at_load``: the convolutions whose weights the runtime
    transforms when it loads the model (the others were transformed at compile
    time); ``stored_bytes``: what the artifact holds of all of them;
    ``memory_bytes``: what a loaded session holds (the transformed weights only)."""
    from ..load_time import lifted_totals
    at_load = lifted_totals(lifted, WEIGHT_KERNEL)
    transformed = stats.get("transformed_bytes", 0)
    return {**stats, "transformed_at_load": at_load["count"],
            "stored_bytes": at_load["stored_bytes"] + transformed - at_load["bytes"],
            "memory_bytes": transformed}


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
    (:attr:`..build_context.BuildContext.winograd_min_size`)."""
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

    return te.compute(transformed_shape(w.shape, m, nc), compute, name="winograd_weight")


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
    *finish*, if given: the bfloat16 kernels round it, :mod:`.bf16_winograd`)."""
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

    return te.compute((alpha * alpha, tiles, c), compute, name="winograd_input")


def batch_matmul(v: te.Tensor, u: te.Tensor) -> te.Tensor:
    """``M[e, p, k] = sum_c V[e, p, c] U[e, k // nc, c, k % nc]``."""
    e_, tiles, c = (int(d) for d in v.shape)
    _, ko, c2, nc = (int(d) for d in u.shape)
    assert c == c2
    rc = te.reduce_axis((0, c), name="rc")
    return te.compute((e_, tiles, ko * nc),
                      lambda e, p, k: te.sum(v[e, p, rc] * u[e, k // nc, rc, k % nc], axis=[rc]),
                      name="winograd_bgemm")


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

    t = te.compute((m, alpha, tiles, k), rows, name=OUTPUT_ROWS)

    def compute(i, y, x, ch):
        p = i * (th * tw) + (y // m) * tw + x // m
        yi, xi = y % m, x % m
        total = tirx.const(0.0, dtype)
        for nu in range(alpha):
            total = total + _select(a, nu, xi, dtype) * t[yi, nu, p, ch]
        return total

    return te.compute((n, oh, ow, k), compute, name="winograd_output")


def emit(bb, x, w_hwio: np.ndarray, padding, out_shape, dtype: str, nc_for, records):
    """Emit the three kernels of a Winograd convolution into *bb*; returns the output.

    *records* (the build's :class:`..build_context.BuildRecords`) carries the model's
    precision budget spent so far and receives the statistics.

    ``nc_for(k, pixels)`` picks the channel tile of the batched product (the
    register-tile model of :func:`.cpu.tile_shape`)."""
    from tvm import relax
    n, oh, ow, k = (int(d) for d in out_shape)
    c = int(w_hwio.shape[2])
    # F(4, 3) where it is faster, within the model's precision budget
    m = precise_tile(tile_size(n, oh, ow), c, records.winograd_error)
    _, _, tiles = _tiles(n, oh, ow, m)
    nc = nc_for(k, tiles)
    if nc is None or k % nc:
        return None
    stats = records.winograd
    if stats:   # a model's compile: the budget is the model's
        records.winograd_error += layer_error(m, c)
    u = bb.emit(mark_load_time(bb, bb.call_te(weight_transform, relax.const(w_hwio, dtype),
                                              m, nc, primfunc_name_hint=WEIGHT_KERNEL),
                               WEIGHT_KERNEL))
    if stats:
        itemsize = np.dtype(dtype).itemsize
        stats["convolutions"] += 1
        stats["weight_bytes"] += int(w_hwio.size * itemsize)
        stats["transformed_bytes"] += int(np.prod(transformed_shape(w_hwio.shape, m, nc))
                                          * itemsize)
    return emit_transforms(bb, x, u, m, padding, (n, oh, ow), batch_matmul)


def emit_transforms(bb, x, u, m: int, padding, out_nhw, product, finish=None,
                    suffix: str = ""):
    """The input transform of *x* (then *finish*, see :func:`input_transform`), its
    batched *product* with the transformed weights *u*, and the output transform:
    the three kernels of an F(*m*, 3) convolution (also :mod:`.bf16_winograd`'s)."""
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


# ---------------------------------------------------------------------------
# schedules of the two transforms (the batched product is a plain reduction)
# ---------------------------------------------------------------------------
def _block(sch, name):
    try:
        return sch.get_sblock(name)
    except Exception:  # noqa: BLE001 - not there
        return None


def rule_winograd(func: tirx.PrimFunc, info):
    """Schedule ``winograd_input`` / ``winograd_output`` / ``winograd_weight`` kernels;
    None for others."""
    sch = s_tir.Schedule(func)
    if _block(sch, "winograd_input") is not None:
        return _schedule_input(sch, info)
    if _block(sch, "winograd_output") is not None:
        return _schedule_output(sch, func, info)
    if _block(sch, WEIGHT_KERNEL) is not None:
        return _schedule_weight(sch, info)
    return None


def _schedule_weight(sch, info):
    """(tile position, channel tile) pairs in parallel, output channels vectorised.

    It runs once per load: the tile position stays a loop (the coefficients' select
    chains are invariant in the channel loops) -- unrolled like the input transform's,
    it was ~20 kB of code per convolution, a tenth of a small model's artifact."""
    blk = sch.get_sblock(WEIGHT_KERNEL)
    e, ko, _, ki = sch.get_loops(blk)
    sch.parallel(sch.fuse(e, ko))
    sch.vectorize(ki)
    return sch


def _schedule_input(sch, info):
    blk = sch.get_sblock("winograd_input")
    e, p, c = sch.get_loops(blk)
    unit = vector_unit(int(sch.get(c).extent), info.lanes)
    if unit is None:
        return None
    co, ci = sch.split(c, [None, unit])
    sch.reorder(p, co, e, ci)
    sch.parallel(sch.fuse(p, co))
    sch.unroll(e)               # coefficients become literals
    sch.vectorize(ci)
    return sch


def _schedule_output(sch, func, info):
    from .module_utils import inline_injective as _inline_injective
    from .module_utils import writes_param as _writes_param
    params = list(func.params)
    wino = sch.get_sblock("winograd_output")
    rows = _block(sch, OUTPUT_ROWS)
    if rows is None:
        return None
    _inline_injective(sch, params, keep=[wino, rows])
    m = _tile_of(sch.get(rows))
    if m is None:
        return None
    if _writes_param(sch, wino, params):
        final, loops = wino, sch.get_loops(wino)
    else:
        finals = [b for b in sch.get_child_blocks(sch.get_sblock("root"))
                  if sch.get(b).name_hint not in ("winograd_output", OUTPUT_ROWS)]
        if len(finals) != 1:
            return None
        final = finals[0]
        loops = sch.get_loops(final)
    if len(loops) != 4:
        return None
    n, y, x, ch = loops
    unit = vector_unit(int(sch.get(ch).extent), info.lanes)
    if unit is None:
        return None
    ty, yi = sch.split(y, [None, m])
    tx, xi = sch.split(x, [None, m])
    co, ci = sch.split(ch, [None, unit])
    sch.reorder(n, ty, tx, co, yi, xi, ci)
    par = sch.fuse(n, ty, tx)
    sch.parallel(par)
    # per (tile, channel vector): the rows pass into registers, then the outputs
    if final is not wino:
        sch.set_scope(wino, 0, "local")
        sch.compute_at(wino, co, preserve_unit_loops=True)
        _unroll_vectorize(sch, wino)
    sch.set_scope(rows, 0, "local")
    sch.compute_at(rows, co, preserve_unit_loops=True)
    _unroll_vectorize(sch, rows)
    sch.unroll(yi)
    sch.unroll(xi)
    sch.vectorize(ci)
    return sch


def _unroll_vectorize(sch, block) -> None:
    """A block computed at the channel-vector loop: its tile loops unrolled (the
    coefficients fold to literals), its channel loop vectorised."""
    inner = sch.get_loops(block)[-len(sch.get(block).iter_vars):]
    for lp in inner[:-1]:
        sch.unroll(lp)
    sch.vectorize(inner[-1])


def _tile_of(block) -> int | None:
    """m of the block's F(m, 3), from the ``[(m+2)^2, (1,) tiles, K]`` product it reads."""
    for region in block.reads:
        shape = region.source.shape
        if len(shape) in (3, 4):
            alpha = math.isqrt(int(shape[0]))
            if alpha * alpha == int(shape[0]) and alpha > 2:
                return alpha - 2
    return None
