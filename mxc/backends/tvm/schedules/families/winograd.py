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
transform of constants: compiling a model (:mod:`...load_time`) moves it into
a function the runtime calls once when it loads the artifact, and passes its
result to every call of the region; elsewhere (a module built on its own) it
is evaluated in numpy at compile time (:func:`transform_weights`).  Both
compute in float64 and round once to the weights' dtype.

The transform matrices come from TVM's Cook-Toom construction.  Their
coefficients are selected by the tile position inside the kernels; the
schedules unroll that position so every coefficient becomes a literal and
zero terms vanish.  The batched product is kept out of operator fusion (it is
marked opaque) so that each kernel keeps its own loop nest.

This module is the float32 family: its product, its tile choice under the model's
precision budget (:mod:`..base.winograd_precision`) and the transforms' schedules.
The transforms themselves, shared with the bfloat16 family
(:mod:`.bf16_winograd`), are :mod:`..base.winograd_transforms`.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import s_tir, te, tirx

from ...load_time import mark_load_time
from ..base.kernel_family import block_part, family_block
from ..base.module_utils import inline_injective as _inline_injective
from ..base.module_utils import writes_param as _writes_param
from ..base.winograd_precision import layer_error, precise_tile
from ..base.winograd_transforms import (FAMILY, WEIGHT_KERNEL, emit_transforms, tile_count,
                                        tile_size, transformed_shape, vector_unit,
                                        weight_transform)

#: environment switch: ``MXC_WINOGRAD=0`` lowers 3x3 convolutions directly
ENV = "MXC_WINOGRAD"


#: smallest side "auto" transforms: 7x7 (ResNet's last stage) makes 16 F(2, 3) tiles to
#: reuse 16/9 the weight bytes for 1.7x fewer multiply-adds.  Since the product reads
#: its weights in order (tile position outermost, :mod:`.reduction`) that pays: resnet18
#: 3.7-4.3% faster on Zen 4 (AVX2 code: 2.4%), resnet50_v2 even (paired A/B), for
#: 16.8 MB of transformed weights per 512-channel convolution (resnet18: +22 MB)
MIN_SIZE = 7


#: the ``--winograd`` choices (``options.WINOGRAD_MODES``, carried by the build's
#: :class:`...build_context.BuildContext`): on (every 3x3 stride-1 convolution it applies
#: to), off (none: direct convolutions, weights stored once), auto (on where the output
#: side is at least MIN_SIZE: the speed pays for the larger weights)
#: smallest output side "on" transforms (F(2, 3) needs whole 2x2 tiles to be worth it)
MIN_SIZE_FORCED = 2


def manifest_record(stats: dict, lifted: dict) -> dict:
    """The manifest's ``winograd``: the build's *stats*
    (:attr:`...build_context.BuildRecords.winograd`) with where the
    transformed weights come from (*lifted*: :attr:`...build_context.BuildRecords.lifted`).

    ``weight_bytes`` / ``transformed_bytes``: the weights as given / as the kernels
    read them; ``transformed_at_load``: the convolutions whose weights the runtime
    transforms when it loads the model (the others were transformed at compile
    time); ``stored_bytes``: what the artifact holds of all of them;
    ``memory_bytes``: what a loaded session holds (the transformed weights only)."""
    from ...load_time import lifted_totals
    at_load = lifted_totals(lifted, WEIGHT_KERNEL)
    transformed = stats.get("transformed_bytes", 0)
    return {**stats, "transformed_at_load": at_load["count"],
            "stored_bytes": at_load["stored_bytes"] + transformed - at_load["bytes"],
            "memory_bytes": transformed}


def batch_matmul(v: te.Tensor, u: te.Tensor) -> te.Tensor:
    """``M[e, p, k] = sum_c V[e, p, c] U[e, k // nc, c, k % nc]``."""
    e_, tiles, c = (int(d) for d in v.shape)
    _, ko, c2, nc = (int(d) for d in u.shape)
    assert c == c2
    rc = te.reduce_axis((0, c), name="rc")
    return te.compute((e_, tiles, ko * nc),
                      lambda e, p, k: te.sum(v[e, p, rc] * u[e, k // nc, rc, k % nc], axis=[rc]),
                      name="winograd_bgemm")



def emit(bb, x, w_hwio: np.ndarray, padding, out_shape, dtype: str, nc_for, records):
    """Emit the three kernels of a Winograd convolution into *bb*; returns the output.

    *records* (the build's :class:`...build_context.BuildRecords`) carries the model's
    precision budget spent so far and receives the statistics.

    ``nc_for(k, pixels)`` picks the channel tile of the batched product (the
    register-tile model of :func:`..base.register_tile.tile_shape`)."""
    from tvm import relax
    n, oh, ow, k = (int(d) for d in out_shape)
    c = int(w_hwio.shape[2])
    # F(4, 3) where it is faster, within the model's precision budget
    m = precise_tile(tile_size(n, oh, ow), c, records.winograd_error)
    tiles = tile_count(n, oh, ow, m)
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


# ---------------------------------------------------------------------------
# schedules of the two transforms (the batched product is a plain reduction)
# ---------------------------------------------------------------------------
def _block(sch, part):
    """The transform block stamped with *part* (:data:`..base.kernel_family.PART_ATTR`)."""
    return family_block(sch, FAMILY, part)


def rule_winograd(func: tirx.PrimFunc, info):
    """Schedule the input / output / weight transform kernels -- the blocks stamped
    :data:`..base.winograd_transforms.FAMILY` and the part they are -- whatever their
    names; None for others."""
    sch = s_tir.Schedule(func)
    if _block(sch, "input") is not None:
        return _schedule_input(sch, info)
    if _block(sch, "output") is not None:
        return _schedule_output(sch, func, info)
    if _block(sch, "weight") is not None:
        return _schedule_weight(sch, info)
    return None


def _schedule_weight(sch, info):
    """(tile position, channel tile) pairs in parallel, output channels vectorised.

    It runs once per load: the tile position stays a loop (the coefficients' select
    chains are invariant in the channel loops) -- unrolled like the input transform's,
    it was ~20 kB of code per convolution, a tenth of a small model's artifact."""
    blk = _block(sch, "weight")
    e, ko, _, ki = sch.get_loops(blk)
    sch.parallel(sch.fuse(e, ko))
    sch.vectorize(ki)
    return sch


def _schedule_input(sch, info):
    blk = _block(sch, "input")
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
    params = list(func.params)
    wino = _block(sch, "output")
    rows = _block(sch, "rows")
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
                  if block_part(sch.get(b)) not in ("output", "rows")]
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
