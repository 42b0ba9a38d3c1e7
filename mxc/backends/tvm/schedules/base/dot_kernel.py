"""The register-blocked dot-product micro-kernel shared by the int8, bfloat16 and AMX kernels.

A dot-product kernel here is an accumulating block ``[n, y, x, k, ry, rx, rc, ri]``
(output pixel, output channel, kernel tap, input channel group, the step's
products) over a ``pad_temp`` copy of its input, with a fused elementwise
epilogue.  The int8 (VNNI/AVX2), bfloat16 (``vdpbf16ps``) and bfloat16-Winograd
product kernels are scheduled by :func:`rule_dot`; the AMX tile schedule
(:func:`.amx.rule_tiles`) starts the same way (:func:`open_dot_kernel`) and
finishes the same way (:func:`vectorize_epilogues`, :func:`schedule_pads`).  It
sits in ``base/`` so that no kernel family imports another to reuse it.
"""

from __future__ import annotations

from tvm import s_tir, tirx

from .kernel_family import PAD, family_block, part_blocks
from .microarch import CpuInfo
from .module_utils import accumulate_locally, inline_injective
from .register_tile import fuse_map, tile_shape, tile_split
from .tir_queries import is_vectorizable

def rule_dot(func: tirx.PrimFunc, info: CpuInfo, family: str, lanes: int, intrinsic,
             annotations: dict | None = None):
    """The micro-kernel of :func:`..families.int8.rule_int8` for the accumulating block
    stamped with *family* (:data:`.kernel_family.FAMILY_ATTR`) of a
    ``[n, y, x, k, ry, rx, rc, ri]`` dot-product kernel whose innermost ``lanes x ri``
    step is the tensor intrinsic ``intrinsic(v)`` names for a register tile of ``v``
    channel vectors (also the bfloat16 kernels of
    :mod:`..families.bf16`), *annotations* put on its outer (parallel) loop; None when *func* has
    no such block."""
    opened = open_dot_kernel(func, family)
    if opened is None:
        return None
    sch, main, ext, epilogues, keep = opened
    pix = [i for i in (1, 2) if ext[i] > 1]
    if len(pix) == 2:   # one pixel axis: a register block may wrap rows (7x7 maps)
        sch.transform_layout(main, ("write", 0), fuse_map(4, pix, ext[:4]))
        sch.transform_block_layout(main, fuse_map(8, pix, ext))
        for epi in epilogues:
            eext = [int(iv.dom.extent) for iv in sch.get(epi).iter_vars]
            if len(eext) != 4 or eext[1:3] != ext[1:3]:
                return None
            sch.transform_block_layout(epi, fuse_map(4, pix, eext))
        pix = [1]
    loops = sch.get_loops(main)
    spatial, (ry, rx, rc, ri) = loops[:-4], loops[-4:]
    rext = ext[1] * ext[2]
    # a register block dividing the pixels: a partial last block's predicate made the
    # tensorize fail (inceptionv3's 71x71 layer fell back to a scalar kernel, 3.6x slower)
    nc, rw = tile_shape(ext[3], rext, info, nc=None, exact=True)
    if nc is None or nc % lanes:
        nc, rw = lanes, 1
    co, ci = tile_split(sch, spatial[-1], nc, max(nc, 4 * lanes))
    cv, ck = sch.split(ci, [None, lanes])
    pixel, inner = (spatial[pix[0]] if pix else None), []
    if pixel is not None and rw > 1:     # rw pixels a register block
        pixel, block = tile_split(sch, pixel, rw, max(rw, 32))
        inner = [block]
    outer = [lp for i, lp in enumerate(spatial[:-1]) if i not in pix] + \
        ([pixel] if pixel is not None else [])
    sch.reorder(co, *outer, ry, rx, rc, *inner, cv, ck, ri)
    par = sch.fuse(co, *outer)
    for epi in epilogues:
        sch.reverse_compute_at(epi, par, preserve_unit_loops=True)
    sch.parallel(par)
    for key, value in (annotations or {}).items():
        sch.annotate(par, key, value)
    for lp in inner + [cv]:
        sch.unroll(lp)
    vectorize_epilogues(sch, epilogues)
    init = sch.decompose_reduction(main, ry)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(ck, intrinsic(nc // lanes))
    schedule_pads(sch, keep)
    return sch


def open_dot_kernel(func: tirx.PrimFunc, family: str):
    """(schedule, block, its extents ``[n, y, x, k, ry, rx, rc, ri]``, epilogue blocks,
    the kept padding copy -- the block stamped part :data:`.kernel_family.PAD`) of
    *func*'s dot-product block -- the one stamped with *family*
    (:func:`.kernel_family.family_block`; no name is read) -- with the
    elementwise producers inlined and the result accumulated in a ``local`` buffer;
    None when *func* has no such block.  The start of :func:`rule_dot` and of the AMX
    tile schedule (:func:`.amx.rule_tiles`)."""
    sch = s_tir.Schedule(func)
    if family_block(sch, family) is None:
        return None
    params = list(func.params)
    pads = part_blocks(sch, PAD)        # the padding copy: kept (scheduled on its own)
    keep = pads if len(pads) == 1 else []
    inline_injective(sch, params, keep=keep)
    main = family_block(sch, family)
    ext = [int(iv.dom.extent) for iv in sch.get(main).iter_vars]
    main, epilogues = accumulate_locally(sch, main, params)
    return sch, main, ext, epilogues, keep


def vectorize_epilogues(sch, epilogues) -> None:
    """Vectorize each epilogue's innermost (channel) loop where its body allows."""
    for epi in epilogues:
        tile = sch.get_loops(epi)[1:]
        if tile and is_vectorizable(sch.get(epi).body) and int(sch.get(tile[-1]).extent) > 1:
            sch.vectorize(tile[-1])


def schedule_pads(sch, blocks) -> None:
    """:func:`_schedule_pad` for each kept padding stage."""
    for b in blocks:
        _schedule_pad(sch, b)


def _schedule_pad(sch, block) -> None:
    """Rows in parallel, channels vectorised (a few: unrolled) -- no index arithmetic
    per byte, which a fused-and-split loop would put there (4-channel first layers)."""
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(*loops[:2]))
    if len(loops) >= 4:          # [n, y, (phase,) x, ch]; a folded row [n, y, x*ch] stays a loop
        ch = loops[-1]
        if int(sch.get(ch).extent) >= 16:
            sch.vectorize(ch)
        else:
            sch.unroll(ch)
