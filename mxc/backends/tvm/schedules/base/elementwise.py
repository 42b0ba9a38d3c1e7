"""How an elementwise block is scheduled: injective kernels (layout transposes, padding,
concatenation, standalone activations) get their loops fused, the outer part
parallel and the inner part vectorised, a few vectors at a time (one at a time
where the block reads strided): LLVM's time to legalise a vector grows much
faster than its width.  Vectorising each concatenated piece of a channel row
whole (a pyramid-pooling head: four upsampled channels-first branches and the
feature map, concatenated channels-last) made 512- to 2048-lane gathers that
cost minutes of code generation for one kernel.

The ``elementwise`` rule (:func:`..cpu.rule_elementwise`) applies it to every block
of an all-spatial kernel; the reduction rule (:mod:`..families.reduction`) to the
padding copies it keeps as separate loop nests -- so it sits in ``base/``.
"""

from __future__ import annotations

import math

from tvm import tirx

from .microarch import CpuInfo
from .tir_queries import as_int, constant_bounds, is_vectorizable, uses_var

#: a loop nest with fewer elements runs on one thread: waking the thread pool costs
#: more than the work it would share
PARALLEL_MIN_ELEMENTS = 4096

#: the innermost loop of a strided (transpose-like) block is unrolled up to this extent
#: when it cannot be vectorised in pieces
UNROLL_MAX_EXTENT = 16

#: the vectorised inner part, in whole vectors, from the widest tried down
VECTOR_PART_VECTORS = (4, 2, 1)

#: the vectorised inner part must leave at least this many of itself to the outer loop,
#: or the nest stays scalar (a split for one iteration only adds a loop)
MIN_VECTOR_PARTS = 2


def schedule_elementwise_block(sch, block_rv, info: CpuInfo) -> None:
    """Fuse, vectorise and parallelise one spatial block (see the module docstring)."""
    loops = sch.get_loops(block_rv)
    if not loops:
        return
    extents = [as_int(sch.get(lp).extent) for lp in loops]
    if any(e is None for e in extents):
        sch.parallel(loops[0])
        return
    if not _streams_innermost(sch.get(block_rv), len(loops)):
        _schedule_strided_block(sch, block_rv, loops, extents, info)
        return
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    total = math.prod(extents)
    if not is_vectorizable(sch.get(block_rv).body):
        if total >= PARALLEL_MIN_ELEMENTS:
            sch.parallel(fused)
        return
    # vectorise the innermost part when it divides evenly
    inner = extents[-1]
    vec = 0
    for cand in (info.lanes * n for n in VECTOR_PART_VECTORS):
        if total % cand == 0 and (inner % cand == 0 or cand % inner == 0 or inner >= cand):
            vec = cand
            break
    if vec and total >= vec * MIN_VECTOR_PARTS:
        outer, vin = sch.split(fused, [None, vec])
        sch.vectorize(vin)
    else:
        outer = fused
    if total >= PARALLEL_MIN_ELEMENTS:
        sch.parallel(outer)


def _streams_innermost(block, nloops: int) -> bool:
    """Whether every buffer the block touches is walked contiguously by its innermost
    iter var (or not at all: a broadcast), so that fusing all loops into one and
    vectorising it reads and writes memory linearly.  A transpose is the counter
    example: there the fused index would need a division per element per access."""
    if nloops != len(block.iter_vars):
        return False
    last = block.iter_vars[-1].var
    for region in list(block.reads) + list(block.writes):
        if not region.region:
            continue
        tail = region.region[-1].min
        if isinstance(tail, tirx.Var) and tail.same_as(last):
            continue
        if any(uses_var(rg.min, last) for rg in region.region):
            return False
    return True


def _schedule_strided_block(sch, block_rv, loops, extents, info: CpuInfo) -> None:
    """A transpose- or concatenate-like block: the outer loops fused and parallel (one
    division per row, not per element).  The innermost loop is cut where a
    condition on it changes value (the seams of a concatenation), so that each
    piece reads one input linearly and is vectorised; a short one is unrolled."""
    outer = loops[:-1] or loops
    par = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    if math.prod(extents) >= PARALLEL_MIN_ELEMENTS:
        sch.parallel(par)
    if len(loops) < 2:
        return
    inner_ext = extents[-1]
    cuts = _seams(sch.get(block_rv), inner_ext)
    if cuts and all(c % info.lanes == 0 for c in cuts) and inner_ext % info.lanes == 0:
        bounds = [0, *cuts, inner_ext]
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        # one vector per iteration: the pieces of a concatenation of channels-first
        # branches read strided (a gather per lane), and LLVM's time for a gather
        # grows much faster than its width.  Split before partitioning: a piece may
        # not start at 0, which split refuses.
        vec = info.lanes
        chunks, _ = sch.split(loops[-1], [None, vec])
        pieces = sch.loop_partition(chunks, [s // vec for s in sizes[:-1]] + [None])
        for piece in pieces:      # each piece holds its own copy of the block
            sch.vectorize(sch.get_loops(sch.get_child_blocks(piece)[0])[-1])
    elif inner_ext <= UNROLL_MAX_EXTENT:
        sch.unroll(loops[-1])


def _seams(block, extent: int) -> list[int]:
    """Where a concatenation switches input along *block*'s innermost iter var: the
    bounds ``K <= v`` / ``v < K`` inside the extent, ascending."""
    found = constant_bounds(block.body, block.iter_vars[-1].var)
    return sorted(k for k in found if 0 < k < extent)
