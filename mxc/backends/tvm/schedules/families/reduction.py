"""The ``reduction`` CPU rule: a register-blocked micro-kernel for every kernel
whose one reduction block has the output's innermost (channel) axis as a
spatial axis -- channels-last convolutions (plain, grouped, depthwise),
pooling windows, global pooling, dense layers -- with its fused elementwise
epilogue (see :mod:`..cpu` for the loop nest it makes).

The rule runs in three steps:

1. **analyse** (:func:`_padding_copies_to_keep`, :func:`_analyse`): the
   reduction block's axes -- which one is the vector axis, which form the
   register-block (pixel) axis, whether inputs stream a vector per step;
2. **plan** (:func:`_plan`): the tile -- ``nc`` channels x ``rw`` pixels from
   the register model :func:`..base.register_tile.tile_shape` -- and what to unroll;
3. **apply** (:func:`_apply`): the schedule primitives.

The register-tile model itself (:mod:`..base.register_tile`) is shared with the
legalizations, the channel padding and the dot-product kernels; the constants below
are the rule's own and hold for every :data:`~..base.microarch.MICROARCHS` row (they
were measured on Zen 4, AVX2 and AVX-512 code alike).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import s_tir, tirx

from ..base.elementwise import schedule_elementwise_block
from ..base.microarch import CpuInfo
from ..base.module_utils import block_name, inline_injective, is_spatial, root_blocks, writes_param
from ..base.register_tile import fuse_map, tile_shape, tile_split, vector_piece
from ..base.tir_queries import (as_int, canonical_loops, has_bounds_check, is_reduction,
                                is_vectorizable, uses_var)

#: materialising a zero-padded copy costs about this many operations per padded element;
#: a bounds check inlined into the kernel costs one per broadcast load
PADDED_COPY_OPS_PER_ELEMENT = 3

#: the channel tile (in vectors) assumed when counting those checks, before
#: :func:`tile_shape` has chosen the real one
CHECK_COUNT_TILE_VECTORS = 2

#: the innermost reduction loop (e.g. a 3x3 window's columns) is unrolled up to this extent
UNROLL_MAX_REDUCTION = 8

#: the largest tiles the schedule's sampled splits allow ``mxc tune``'s search to try:
#: pixel axes fused into the register-block axis (a 2-D image's h and w)
MAX_PIXEL_AXES = 2
#: channel tiles up to this many vectors, register blocks up to this many pixels
TUNE_MAX_CHANNEL_VECTORS = 4
TUNE_MAX_PIXEL_BLOCK = 32


def _packed_nc(block, cext: int) -> int | None:
    """The channel tile of pre-packed weights read by *block*: a read whose last
    dim ``nc`` divides the channels, with ``cext / nc`` among its other dims
    (``[K/nc, KH, KW, C, nc]``, Winograd's ``[E, K/nc, C, nc]``)."""
    for r in block.reads:
        shape = [as_int(d) for d in r.source.shape]
        if len(shape) >= 3 and None not in shape and shape[-1] < cext \
                and cext % shape[-1] == 0 and cext // shape[-1] in shape[:-1]:
            return shape[-1]
    return None


# ---------------------------------------------------------------------------
# 1. analyse
# ---------------------------------------------------------------------------
@dataclass
class ReductionNest:
    """The reduction block's axes, by position among its iter vars."""

    name: str                  # the block's name (its handle changes as the schedule does)
    spatial: list[int]         # data-parallel iter vars
    reduce: list[int]          # reduction iter vars
    vector: int                # the vector axis: the last spatial one, the output's innermost
    channels: int              # its extent
    pixels: list[int]          # the register-block axes (adjacent; fused into one when several)
    pixel_extent: int          # their extents' product
    streaming: bool            # a read follows the vector axis: a vector per reduction step
    packed_nc: int | None      # the channel tile pre-packed weights fix, if any
    weight_axes: list[int]     # spatial axes besides the vector one that index the weights
    extents: list[int]         # every iter var's extent
    reduce_extent: int         # the innermost reduction iter var's extent (of those > 1)
    overlapping: bool = False  # streaming, and neighbouring pixels read overlapping windows


def _streams_vectors(block, var) -> bool:
    """Whether more than one buffer *block* reads is indexed by *var* (the output's
    vector axis): the input is loaded a vector at a time, not broadcast."""
    return sum(1 for r in block.reads if any(uses_var(rg.min, var) for rg in r.region)) > 1


def _padding_copies_to_keep(sch, main, info: CpuInfo) -> list:
    """Producers of *main* with a bounds check (padding) that stay a separate loop nest.

    Kernels that broadcast their input (dense convolution) would put the check on
    every scalar load of the inner loop, so they keep the padded copy -- unless
    the input has few channels (a network's first layer: a padded 3-channel image
    vectorises badly) and the checks cost less than the copy.  Kernels that load
    input vectors (depthwise convolution, pooling) read the padding in place."""
    blk0 = sch.get(main)
    sp0 = [iv for iv in blk0.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    streaming = bool(sp0) and _streams_vectors(blk0, sp0[-1].var)
    ext0 = [as_int(iv.dom.extent) or 1 for iv in blk0.iter_vars]
    red_size = math.prod(e for e, iv in zip(ext0, blk0.iter_vars)
                         if iv.iter_type == tirx.IterVar.CommReduce)
    out_size = math.prod(e for e, iv in zip(ext0, blk0.iter_vars)
                         if iv.iter_type == tirx.IterVar.DataPar)
    channels = ext0[len(sp0) - 1] if sp0 else 1
    tiles = max(1, channels // (CHECK_COUNT_TILE_VECTORS * info.lanes))
    pixels = out_size // max(1, channels)
    keep = []
    for b in sch.get_producers(main):
        blk = sch.get(b)
        if not (is_spatial(blk) and has_bounds_check(blk.body)) or streaming:
            continue
        padded = math.prod(as_int(iv.dom.extent) or 1 for iv in blk.iter_vars)
        if pixels * tiles * red_size < PADDED_COPY_OPS_PER_ELEMENT * padded:
            continue                                  # inline: checks are cheaper
        keep.append(b)
    return keep


def _analyse(sch, main) -> ReductionNest | None:
    """The axes of the reduction block *main* (after inlining), None when the rule does
    not fit: loops not one per iter var, no spatial or reduction axis, an output whose
    innermost dim is not the last spatial axis, pixel axes that are not adjacent to it."""
    block = sch.get(main)
    if canonical_loops(sch, main) is None:
        return None
    ivs = list(block.iter_vars)
    kinds = [iv.iter_type for iv in ivs]
    spatial = [i for i, k in enumerate(kinds) if k == tirx.IterVar.DataPar]
    reduce_ = [i for i, k in enumerate(kinds) if k == tirx.IterVar.CommReduce]
    if not spatial or not reduce_ or len(spatial) + len(reduce_) != len(ivs):
        return None
    # the vector axis: the last spatial iter, which must index the output's innermost dim
    vi = spatial[-1]
    last_index = block.writes[0].region[-1].min
    if not (isinstance(last_index, tirx.Var) and last_index.same_as(ivs[vi].var)):
        return None
    cext = as_int(ivs[vi].dom.extent)
    # the pixel axis: the spatial iters before it with extent > 1 (h, w) -- at most
    # MAX_PIXEL_AXES of them: fusing the batch axis too makes every input address a
    # nest of divisions (n, h, w of the fused pixel) the simplifier cannot undo, in
    # the innermost loop (squeezenet's last convolution at batch 8 ran 20x its
    # batch-1 time); the batch axis stays an outer, parallel loop instead
    pix = [i for i in spatial[:-1] if as_int(ivs[i].dom.extent) > 1][-MAX_PIXEL_AXES:]
    vvar = ivs[vi].var
    streaming = _streams_vectors(block, vvar)
    weight_axes: list[int] = []
    if not streaming:
        # a register block shares its weight vectors: only axes the weights do not
        # depend on may be blocked (Winograd's tile position e indexes the weights)
        weights = [r for r in block.reads if any(uses_var(rg.min, vvar) for rg in r.region)]
        weight_axes = [i for i in spatial[:-1] if any(uses_var(rg.min, ivs[i].var)
                                                      for r in weights for rg in r.region)]
        pix = [i for i in pix if i not in weight_axes]
    if len(pix) > 1 and not (pix == list(range(pix[0], pix[-1] + 1)) and pix[-1] == vi - 1):
        return None
    extents = [as_int(iv.dom.extent) for iv in ivs]
    tap = _innermost_reduction(extents, reduce_)
    return ReductionNest(name=block.name_hint, spatial=spatial, reduce=reduce_, vector=vi,
                         channels=cext, pixels=pix,
                         pixel_extent=math.prod(extents[i] for i in pix),
                         streaming=streaming, packed_nc=_packed_nc(block, cext),
                         weight_axes=weight_axes, extents=extents,
                         reduce_extent=extents[tap],
                         overlapping=streaming and bool(pix) and _unit_stride(
                             block, ivs[pix[-1]].var, ivs[tap].var))


def _innermost_reduction(extents: list[int], reduce_: list[int]) -> int:
    """The position of the innermost reduction iter var that loops (a depthwise
    convolution's unit channel-multiplier axis comes after its window's columns)."""
    looping = [i for i in reduce_ if (extents[i] or 1) > 1] or reduce_
    return looping[-1]


def _unit_stride(block, pixel, tap) -> bool:
    """Whether a read of *block* indexes one dim by ``pixel + tap`` (+ a constant): the
    window of the next pixel along the *pixel* axis overlaps this one's in all but
    one *tap* (a stride-1 window)."""
    from tvm.sym import detect_linear_equation
    for r in block.reads:
        for rg in r.region:
            if uses_var(rg.min, pixel) and uses_var(rg.min, tap):
                coef = detect_linear_equation(rg.min, [pixel, tap])
                if len(coef) == 3 and as_int(coef[0]) == 1 and as_int(coef[1]) == 1:
                    return True
    return False


# ---------------------------------------------------------------------------
# 2. plan
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReductionPlan:
    """The micro-kernel's shape: ``nc`` channels x ``rw`` pixels of accumulators."""

    nc: int
    rw: int
    unroll_reduction: bool      # unroll the innermost reduction loop


def _plan(nest: ReductionNest, info: CpuInfo) -> ReductionPlan:
    unroll = nest.reduce_extent <= UNROLL_MAX_REDUCTION
    taps = nest.reduce_extent if unroll and nest.overlapping else 1
    nc, rw = tile_shape(nest.channels, nest.pixel_extent, info, nc=nest.packed_nc,
                        streaming=nest.streaming, taps=taps)
    return ReductionPlan(nc=nc, rw=rw, unroll_reduction=unroll)


# ---------------------------------------------------------------------------
# 3. apply
# ---------------------------------------------------------------------------
def _apply(sch, main, nest: ReductionNest, plan: ReductionPlan, params, keep,
           info: CpuInfo):
    """Schedule the nest of block *main* as planned; None when an epilogue does not
    fit the tile."""
    # the epilogue: consumers of main (inlined chains end in output blocks)
    if writes_param(sch, main, params):
        epilogues = [sch.cache_write(main, 0, "local")]
        main = sch.get_sblock(nest.name)
    else:
        epilogues = list(sch.get_consumers(main))
        sch.set_scope(main, 0, "local")
    spatial, reduce_, vi, pix = nest.spatial, nest.reduce, nest.vector, nest.pixels
    weight_axes = nest.weight_axes
    n_ivs = len(nest.extents)
    if len(pix) > 1:
        epilogues = _fuse_pixels(sch, main, epilogues, nest)
        if epilogues is None:
            return None
        # positions after fusing (transform_block_layout may re-label unit-extent
        # reduction iters as spatial, so don't re-derive them from the new block)
        shift = len(pix) - 1

        def moved(i):
            return i if i < pix[0] else (pix[0] if i <= pix[-1] else i - shift)

        spatial = sorted({moved(i) for i in spatial})
        reduce_ = [moved(i) for i in reduce_]
        vi = moved(vi)
        weight_axes = [moved(i) for i in weight_axes]
        pix = [pix[0]]
        n_ivs = len(sch.get(main).iter_vars)
    loops = sch.get_loops(main)
    if len(loops) != n_ivs:
        return None

    nc, rw = plan.nc, plan.rw
    co, ci = tile_split(sch, loops[vi], nc, max(nc, TUNE_MAX_CHANNEL_VECTORS * info.lanes))
    # axes that select a weight slice (Winograd's tile position e) go before the channel
    # block: packed [E, K/nc, C, nc], consecutive parallel tasks then read consecutive
    # slices, and each thread streams one contiguous range of the weights
    selecting = [loops[i] for i in spatial[:-1] if i in weight_axes]
    outer_spatial = [loops[i] for i in spatial[:-1] if i not in pix and i not in weight_axes]
    inner = []
    if pix:
        if rw > 1:
            po, pi = tile_split(sch, loops[pix[0]], rw, max(rw, TUNE_MAX_PIXEL_BLOCK))
            outer_spatial.append(po)
            inner.append(pi)
        else:
            outer_spatial.append(loops[pix[0]])
    red = [loops[i] for i in reduce_]
    # a tile of several vectors is unrolled vector by vector: LLVM legalises a wide
    # vector type (3 x 8 lanes especially) into far worse code than separate registers
    lanes_loop = []
    piece = vector_piece(nc, info.lanes)
    if nc > piece:
        cv, ci = sch.split(ci, [None, piece])
        lanes_loop = [cv]
    order = selecting + [co] + outer_spatial + red + inner + lanes_loop + [ci]
    sch.reorder(*order)
    fused = selecting + [co] + outer_spatial
    par = sch.fuse(*fused) if len(fused) > 1 else co
    for epi in epilogues:
        sch.reverse_compute_at(epi, par, preserve_unit_loops=True)
    # parallelise / vectorise / unroll first: once the reduction is decomposed the
    # update block alone is no longer a reduction block and the checks refuse
    sch.parallel(par)
    if plan.unroll_reduction:
        # the innermost loop, even of extent 1 (a depthwise convolution's channel
        # multiplier): LLVM unrolls the window's columns before it by itself, and
        # unrolling them here measured 5x slower for 48-channel tiles on Zen 4
        sch.unroll(red[-1])
    for lp in inner + lanes_loop:
        sch.unroll(lp)
    sch.vectorize(ci)
    for epi in epilogues:
        tile = sch.get_loops(epi)[1:]
        if tile and is_vectorizable(sch.get(epi).body):
            inner_ext = as_int(sch.get(tile[-1]).extent)
            if inner_ext and inner_ext > 1:
                sch.vectorize(tile[-1])
    init = sch.decompose_reduction(main, red[0])
    init_loops = sch.get_loops(init)
    if sch.get(init_loops[-1]).kind != tirx.ForKind.VECTORIZED:
        sch.vectorize(init_loops[-1])
    for b in keep:
        schedule_elementwise_block(sch, b, info)
    return sch


def _fuse_pixels(sch, main, epilogues: list, nest: ReductionNest) -> list | None:
    """Fuse the several pixel axes (h, w) into one in the iteration space of *main*
    and of its epilogues (``transform_block_layout``), so that a register block of
    ``rw`` pixels may wrap rows and compute-at regions stay exact (a loop-level fuse
    would make an epilogue's region a bounding box of rows).  The epilogues, or None
    when one does not iterate over the accumulator's shape."""
    spatial, pix, extents = nest.spatial, nest.pixels, nest.extents
    # the accumulator buffer (dims = the spatial iters) gets the fused pixel dim too
    bpix = [spatial.index(i) for i in pix]
    bext = [extents[i] for i in spatial]
    sch.transform_layout(main, ("write", 0), fuse_map(len(spatial), bpix, bext))
    sch.transform_block_layout(main, fuse_map(len(extents), pix, extents))
    for epi in epilogues:
        eivs = sch.get(epi).iter_vars
        if [as_int(iv.dom.extent) for iv in eivs] != [extents[i] for i in spatial] or \
                len(canonical_loops(sch, epi) or ()) != len(eivs):
            return None
        sch.transform_block_layout(epi, fuse_map(len(eivs), pix, extents))
    return epilogues


# ---------------------------------------------------------------------------
# the rule
# ---------------------------------------------------------------------------
def rule_reduction(func: tirx.PrimFunc, info: CpuInfo):
    """The register-blocked schedule of *func*, None when it has not exactly one
    reduction block or that block does not have the shape the rule needs."""
    sch = s_tir.Schedule(func)
    reductions = [b for b in root_blocks(sch) if is_reduction(sch.get(b))]
    if len(reductions) != 1:
        return None
    name = block_name(sch, reductions[0])
    params = list(func.params)   # a block writing one of these writes an output
    keep = _padding_copies_to_keep(sch, reductions[0], info)
    inline_injective(sch, params, keep=keep)
    main = sch.get_sblock(name)
    nest = _analyse(sch, main)
    if nest is None:
        return None
    return _apply(sch, main, nest, _plan(nest, info), params, keep, info)
