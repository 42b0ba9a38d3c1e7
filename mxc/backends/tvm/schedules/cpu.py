"""Default (untuned) CPU schedules for the fused TIR kernels of a Relax module.

TVM's CPU pipeline leaves kernels unscheduled: one thread, scalar loops.
``cpu_schedule_pass`` gives every PrimFunc not already scheduled (e.g. by a
tuning database) a deterministic schedule, no measurement involved:

``reduction`` -- a kernel whose one reduction block has the output's
innermost (channel) axis as a spatial axis: channels-last conv2d (plain,
grouped, depthwise), pooling windows, global pooling, dense (``matmul`` with
the transposed constant weight), each with its fused elementwise epilogue
(BatchNorm affine, bias, residual add, relu/relu6 ...).  The classic
register-blocked direct-convolution micro-kernel::

    parallel for (co, n, h, wo):             # output tiles, channel block outermost
        acc[rw][nc] = init                   # registers: rw x nc/lanes vectors
        for (ry, rx, rc):                    # the reduction, in order
            for wi in unroll(rw):
                acc[wi][:] += x[.., wo*rw+wi, ..] * w[ry, rx, rc, co*nc:(co+1)*nc]
        out[...] = epilogue(acc)              # fused, vectorised

``elementwise`` -- injective kernels (layout transposes, padding, concat,
standalone activations): loops fused, outer part parallel, inner vectorised.

``fallback`` -- anything else: the outermost spatial loops of each block in
parallel.

Each rule works on a fresh schedule of the unmodified function and any error
means "not applicable": the next rule is tried, the last resort being the
unscheduled function (slow but correct).
"""

from __future__ import annotations

import logging
import math

import tvm
from tvm import s_tir, tirx
from tvm.target import Target

from .microarch import CpuInfo, cpu_info  # noqa: F401 - re-exported: the schedules' API
from .module_utils import block_name as _block_name
from .module_utils import inline_injective as _inline_injective
from .module_utils import is_spatial as _is_spatial
from .module_utils import root_blocks as _root_blocks
from .module_utils import rewrite_functions
from .module_utils import writes_param as _writes_param

log = logging.getLogger(__name__)

_SCHEDULED = "tirx.is_scheduled"


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _int(x) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _is_reduction(block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)


def _func_outputs(func: tirx.PrimFunc) -> list:
    """The PrimFunc's parameter buffers (a block writing one writes an output)."""
    return list(func.params)


def _canonical_loops(sch, block_rv):
    """The block's loops when they map one-to-one, in order, onto its iter vars."""
    block = sch.get(block_rv)
    loops = sch.get_loops(block_rv)
    if len(loops) != len(block.iter_vars):
        return None
    for loop_rv, iv in zip(loops, block.iter_vars):
        loop = sch.get(loop_rv)
        if _int(loop.extent) is None or _int(loop.extent) != _int(iv.dom.extent):
            return None
    return loops


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _has_select(stmt) -> bool:
    """Whether a block body has a bounds-checked load (padding)."""
    text = str(stmt)
    return "if_then_else" in text or "Select" in text


#: intrinsics TVM 0.27's LLVM back end cannot lower for vector types
_SCALAR_ONLY = ("T.sinh(", "T.cosh(", "T.call_extern(", "T.call_pure_extern(",
                "T.call_packed(")


def _vectorizable(stmt) -> bool:
    text = str(stmt)
    return not any(name in text for name in _SCALAR_ONLY)


# ---------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------
def _schedule_elementwise_block(sch, block_rv, info: CpuInfo) -> None:
    loops = sch.get_loops(block_rv)
    if not loops:
        return
    extents = [_int(sch.get(lp).extent) for lp in loops]
    if any(e is None for e in extents):
        sch.parallel(loops[0])
        return
    if not _streams_innermost(sch.get(block_rv), len(loops)):
        _schedule_strided_block(sch, block_rv, loops, extents, info)
        return
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    total = math.prod(extents)
    if not _vectorizable(sch.get(block_rv).body):
        if total >= 4096:
            sch.parallel(fused)
        return
    # vectorise the innermost part when it divides evenly
    inner = extents[-1]
    vec = 0
    for cand in (info.lanes * 4, info.lanes * 2, info.lanes):
        if total % cand == 0 and (inner % cand == 0 or cand % inner == 0 or inner >= cand):
            vec = cand
            break
    if vec and total >= vec * 2:
        outer, vin = sch.split(fused, [None, vec])
        sch.vectorize(vin)
    else:
        outer = fused
    if total >= 4096:
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
        if any(_uses(rg.min, last) for rg in region.region):
            return False
    return True


def _schedule_strided_block(sch, block_rv, loops, extents, info: CpuInfo) -> None:
    """A transpose- or concatenate-like block: the outer loops fused and parallel (one
    division per row, not per element).  The innermost loop is cut where a
    condition on it changes value (the seams of a concatenation), so that each
    piece reads one input linearly and is vectorised; a short one is unrolled."""
    outer = loops[:-1] or loops
    par = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    if math.prod(extents) >= 4096:
        sch.parallel(par)
    if len(loops) < 2:
        return
    inner_ext = extents[-1]
    cuts = _seams(sch.get(block_rv), inner_ext)
    if cuts and all(c % info.lanes == 0 for c in cuts) and inner_ext % info.lanes == 0:
        bounds = [0, *cuts, inner_ext]
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        pieces = sch.loop_partition(loops[-1], sizes[:-1] + [None])
        for piece in pieces:      # (a piece may not start at 0, which split refuses)
            sch.vectorize(piece)
    elif inner_ext <= 16:
        sch.unroll(loops[-1])


def _seams(block, extent: int) -> list[int]:
    """Constants K with ``K <= v`` / ``v < K`` in *block*'s body, *v* its innermost
    iter var: where a concatenation switches input along that axis."""
    import re
    name = re.escape(block.iter_vars[-1].var.name)
    num = r"(?:T\.int(?:32|64)\()?(\d+)\)?"
    text = str(block.body)
    found = {int(k) for k in re.findall(num + r"\s*<=\s*" + name + r"\b", text)}
    found |= {int(k) for k in re.findall(r"\b" + name + r"\s*<\s*" + num, text)}
    return sorted(k for k in found if 0 < k < extent)


def rule_elementwise(func: tirx.PrimFunc, info: CpuInfo):
    sch = s_tir.Schedule(func)
    blocks = _root_blocks(sch)
    if not blocks or any(not _is_spatial(sch.get(b)) for b in blocks):
        return None
    params = _func_outputs(func)
    _inline_injective(sch, params)
    for b in _root_blocks(sch):
        _schedule_elementwise_block(sch, b, info)
    return sch


def tile_shape(cext: int, rext: int, info: CpuInfo, nc: int | None = None,
               streaming: bool = False) -> tuple[int | None, int]:
    """(nc, rw): channels per tile (the vector axis, extent *cext*) and the
    register-block length along the pixel axis (extent *rext*).

    The micro-kernel keeps ``rw * v`` vector accumulators (``v = nc/lanes``)
    live and per reduction step loads ``rw`` broadcasts and ``v`` weight
    vectors (``streaming``: a vector per FMA, as depthwise convolution and
    pooling).  A step costs ``max(latency, FMAs/ports, loads/ports)``
    cycles; the tile with the best FMA throughput that fits the register
    file (accumulators + operands + 1 spare) wins, ties to more accumulators.
    *nc* fixes the channel tile (weights already packed for it).
    """
    lanes, regs = info.lanes, info.registers
    if nc is not None:
        shapes = [nc]
    else:
        # whole vectors (rule_reduction unrolls a multi-vector tile vector by vector)
        shapes = [v * lanes for v in (1, 2, 3, 4) if cext % (v * lanes) == 0]
        if not shapes:      # channels not a multiple of the vector: a power-of-two part
            pow2 = 1        # of a vector (odd-length vectors are handled element-wise)
            while pow2 * 2 <= lanes and cext % (pow2 * 2) == 0:
                pow2 *= 2
            shapes = [pow2]
        if streaming and any(cand >= 2 * lanes for cand in shapes):
            # a vector per FMA from the input (depthwise, pooling): one-vector tiles
            # measured 3-7x slower than two-or-more-vector ones on Zen 4 (AVX-512 and
            # AVX2 alike: mobilenetv2's 3x3 depthwise layers), whatever the port model says
            shapes = [cand for cand in shapes if cand >= 2 * lanes]
    best = {True: None, False: None}     # keyed by "rw divides the pixel extent"
    for cand in shapes:
        v = -(-cand // lanes)
        for rw in range(1, max(rext, 1) + 1):
            acc = rw * v
            # operands: the v weight vectors, plus (broadcasting) the input scalar
            # and spares; a streamed input vector is an FMA's memory operand instead
            if acc + v + (0 if streaming else 3) > regs:
                break
            loads = (acc if streaming else rw) + v
            cycles = max(info.fma_latency, acc / info.fma_ports, loads / info.load_ports)
            waste = -(-rext // rw) * rw / rext
            score = (round(acc / cycles / waste, 2), -loads / acc, acc)
            exact = rext % rw == 0
            if best[exact] is None or score > best[exact][0]:
                best[exact] = (score, cand, rw)
    # a partial last block puts a predicate on every FMA of every block (measured 2-3x
    # slower for the first convolution of a network), so a block length dividing the
    # extent wins unless it is clearly worse (49 pixels: 2x5 beats 1x7 by 40%)
    pick = best[True]
    if pick is None or (best[False] is not None and best[False][0][0] > 1.1 * pick[0][0]):
        pick = best[False]
    if pick is None:
        return shapes[0], 1
    return pick[1], pick[2]


def _packed_nc(block, cext: int) -> int | None:
    """The channel tile of pre-packed weights read by *block*: a read whose last
    dim ``nc`` divides the channels, with ``cext / nc`` among its other dims
    (``[K/nc, KH, KW, C, nc]``, Winograd's ``[E, K/nc, C, nc]``)."""
    for r in block.reads:
        shape = [_int(d) for d in r.source.shape]
        if len(shape) >= 3 and None not in shape and shape[-1] < cext \
                and cext % shape[-1] == 0 and cext // shape[-1] in shape[:-1]:
            return shape[-1]
    return None


def rule_reduction(func: tirx.PrimFunc, info: CpuInfo):
    sch = s_tir.Schedule(func)
    blocks = _root_blocks(sch)
    reductions = [b for b in blocks if _is_reduction(sch.get(b))]
    if len(reductions) != 1:
        return None
    main = reductions[0]
    main_name = _block_name(sch, main)
    params = _func_outputs(func)

    # producers with a bounds check (padding) stay a separate loop nest for kernels
    # that broadcast their input (dense conv: the check would sit on every scalar
    # load of the inner loop); kernels that load input vectors (depthwise conv,
    # pooling) read the padding in place instead of materialising a padded copy
    blk0 = sch.get(main)
    sp0 = [iv for iv in blk0.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    streaming0 = bool(sp0) and sum(
        1 for r in blk0.reads if any(_uses(rg.min, sp0[-1].var) for rg in r.region)) > 1
    # (a few input channels -- a network's first layer -- may be another: a padded
    # 3-channel image vectorises badly; inline when the checks, one per broadcast
    # load, cost less than that copy, ~3 operations per padded element)
    ext0 = [_int(iv.dom.extent) or 1 for iv in blk0.iter_vars]
    red_size = math.prod(e for e, iv in zip(ext0, blk0.iter_vars)
                         if iv.iter_type == tirx.IterVar.CommReduce)
    out_size = math.prod(e for e, iv in zip(ext0, blk0.iter_vars)
                         if iv.iter_type == tirx.IterVar.DataPar)
    chunks = max(1, (ext0[len(sp0) - 1] if sp0 else 1) // (2 * info.lanes))
    keep = []
    for b in sch.get_producers(main):
        blk = sch.get(b)
        if not (_is_spatial(blk) and _has_select(blk.body)) or streaming0:
            continue
        padded = math.prod(_int(iv.dom.extent) or 1 for iv in blk.iter_vars)
        pixels = out_size // max(1, ext0[len(sp0) - 1] if sp0 else 1)
        if pixels * chunks * red_size < 3 * padded:
            continue                                  # inline: checks are cheaper
        keep.append(b)
    _inline_injective(sch, params, keep=keep)
    main = sch.get_sblock(main_name)
    block = sch.get(main)
    loops = _canonical_loops(sch, main)
    if loops is None:
        return None
    ivs = list(block.iter_vars)
    kinds = [iv.iter_type for iv in ivs]
    spatial = [i for i, k in enumerate(kinds) if k == tirx.IterVar.DataPar]
    reduce_ = [i for i, k in enumerate(kinds) if k == tirx.IterVar.CommReduce]
    if not spatial or not reduce_ or len(spatial) + len(reduce_) != len(ivs):
        return None
    # the vector axis: the last spatial iter, which must index the output's innermost dim
    vi = spatial[-1]
    write = block.writes[0]
    last_index = write.region[-1].min
    if not (isinstance(last_index, tirx.Var) and last_index.same_as(ivs[vi].var)):
        return None
    cext = _int(ivs[vi].dom.extent)
    # the pixel axis: the spatial iters before it with extent > 1 (h, w).  Several are
    # fused into one -- in the blocks' own iteration space (transform_block_layout),
    # so that a register block of rw pixels may wrap rows and compute-at regions stay
    # exact (a loop-level fuse would make the epilogue's region a bounding box of rows)
    pix = [i for i in spatial[:-1] if _int(ivs[i].dom.extent) > 1]
    vvar = ivs[vi].var
    streaming = sum(1 for r in block.reads
                    if any(_uses(rg.min, vvar) for rg in r.region)) > 1
    if not streaming:
        # a register block shares its weight vectors: only axes the weights do not
        # depend on may be blocked (Winograd's tile position e indexes the weights)
        weights = [r for r in block.reads if any(_uses(rg.min, vvar) for rg in r.region)]
        pix = [i for i in pix if not any(_uses(rg.min, ivs[i].var)
                                         for r in weights for rg in r.region)]
    rext = 1
    for i in pix:
        rext *= _int(ivs[i].dom.extent)

    # (streaming: every reduction step loads a vector of the vector axis from an input,
    # as depthwise convolution and pooling do, rather than broadcast a scalar)
    nc, rw = tile_shape(cext, rext, info, nc=_packed_nc(block, cext), streaming=streaming)

    # the epilogue: consumers of main (inlined chains end in output blocks)
    if _writes_param(sch, main, params):
        epilogues = [sch.cache_write(main, 0, "local")]
        main = sch.get_sblock(main_name)
    else:
        epilogues = list(sch.get_consumers(main))
        sch.set_scope(main, 0, "local")
    if len(pix) > 1:
        if not (pix == list(range(pix[0], pix[-1] + 1)) and pix[-1] == vi - 1):
            return None
        extents = [_int(iv.dom.extent) for iv in ivs]
        # the accumulator buffer (dims = the spatial iters) gets the fused pixel dim too
        bpix = [spatial.index(i) for i in pix]
        bext = [extents[i] for i in spatial]
        sch.transform_layout(main, ("write", 0), _fuse_map(len(spatial), bpix, bext))
        sch.transform_block_layout(main, _fuse_map(len(ivs), pix, extents))
        for epi in epilogues:
            eivs = sch.get(epi).iter_vars
            if [_int(iv.dom.extent) for iv in eivs] != [extents[i] for i in spatial] or \
                    len(_canonical_loops(sch, epi) or ()) != len(eivs):
                return None
            sch.transform_block_layout(epi, _fuse_map(len(eivs), pix, extents))
        # positions after fusing (transform_block_layout may re-label unit-extent
        # reduction iters as spatial, so don't re-derive them from the new block)
        shift = len(pix) - 1

        def moved(i):
            return i if i < pix[0] else (pix[0] if i <= pix[-1] else i - shift)

        spatial = sorted({moved(i) for i in spatial})
        reduce_ = [moved(i) for i in reduce_]
        vi = moved(vi)
        pix = [pix[0]]
        ivs = list(sch.get(main).iter_vars)
    loops = sch.get_loops(main)
    if len(loops) != len(ivs):
        return None

    co, ci = _tile_split(sch, loops[vi], nc, max(nc, 4 * info.lanes))
    outer_spatial = [loops[i] for i in spatial[:-1] if i not in pix]
    inner = []
    if pix:
        if rw > 1:
            po, pi = _tile_split(sch, loops[pix[0]], rw, max(rw, 32))
            outer_spatial.append(po)
            inner.append(pi)
        else:
            outer_spatial.append(loops[pix[0]])
    red = [loops[i] for i in reduce_]
    # a tile of several vectors is unrolled vector by vector: LLVM legalises a wide
    # vector type (3 x 8 lanes especially) into far worse code than separate registers
    lanes_loop = []
    if nc > info.lanes and nc % info.lanes == 0:
        cv, ci = sch.split(ci, [None, info.lanes])
        lanes_loop = [cv]
    order = [co] + outer_spatial + red + inner + lanes_loop + [ci]
    sch.reorder(*order)
    par = sch.fuse(co, *outer_spatial) if outer_spatial else co
    for epi in epilogues:
        sch.reverse_compute_at(epi, par, preserve_unit_loops=True)
    # parallelise / vectorise / unroll first: once the reduction is decomposed the
    # update block alone is no longer a reduction block and the checks refuse
    sch.parallel(par)
    if _int(sch.get(red[-1]).extent) <= 8:
        sch.unroll(red[-1])
    for lp in inner + lanes_loop:
        sch.unroll(lp)
    sch.vectorize(ci)
    for epi in epilogues:
        tile = sch.get_loops(epi)[1:]
        if tile and _vectorizable(sch.get(epi).body):
            inner_ext = _int(sch.get(tile[-1]).extent)
            if inner_ext and inner_ext > 1:
                sch.vectorize(tile[-1])
    init = sch.decompose_reduction(main, red[0])
    init_loops = sch.get_loops(init)
    if sch.get(init_loops[-1]).kind != tirx.ForKind.VECTORIZED:
        sch.vectorize(init_loops[-1])
    for b in keep:
        _schedule_elementwise_block(sch, b, info)
    return sch


def _tile_split(sch, loop, factor: int, max_inner: int):
    """Split *loop* by *factor*: an exact split as a *sampled* tile whose decision is
    *factor*, so the schedule's trace -- which ``mxc tune`` seeds MetaSchedule's
    search with -- carries a tile size its mutators vary (MutateTileSize moves
    factors between the two); a partial last tile as a plain split."""
    extent = _int(sch.get(loop).extent)
    if extent and extent % factor == 0:
        tiles = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=max_inner,
                                        decision=[extent // factor, factor])
        return sch.split(loop, tiles)
    return sch.split(loop, [None, factor])


def _fuse_map(ndim: int, pix: list[int], extents: list[int]):
    """Index map fusing the adjacent iteration positions *pix* (row-major) into one."""
    from tvm.tirx.function import IndexMap

    def fmap(*v):
        out, fused = [], None
        for i, x in enumerate(v):
            if i in pix:
                fused = x if fused is None else fused * extents[i] + x
                if i == pix[-1]:
                    out.append(fused)
            else:
                out.append(x)
        return out

    return IndexMap.from_func(fmap, ndim=ndim)


def _uses(expr, var) -> bool:
    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr, []))


def rule_fallback(func: tirx.PrimFunc, info: CpuInfo):
    """Parallelise the outermost data-parallel loop of each root block."""
    sch = s_tir.Schedule(func)
    done = False
    for b in _root_blocks(sch):
        loops = sch.get_loops(b)
        blk = sch.get(b)
        if not loops:
            continue
        lead = []
        for lp, iv in zip(loops, blk.iter_vars):
            if iv.iter_type != tirx.IterVar.DataPar:
                break
            lead.append(lp)
        if len(loops) != len(blk.iter_vars) or not lead:
            continue
        try:
            sch.parallel(sch.fuse(*lead) if len(lead) > 1 else lead[0])
            done = True
        except Exception:  # noqa: BLE001
            continue
    return sch if done else None


def rule_winograd(func: tirx.PrimFunc, info: CpuInfo):
    from .winograd import rule_winograd as rule
    return rule(func, info)


def rule_int8(func: tirx.PrimFunc, info: CpuInfo):
    from .int8 import rule_int8 as rule
    return rule(func, info)


RULES = (("winograd", rule_winograd), ("int8", rule_int8), ("reduction", rule_reduction),
         ("elementwise", rule_elementwise), ("fallback", rule_fallback))


def default_schedule(func: tirx.PrimFunc, info: CpuInfo):
    """(rule name, ``s_tir.Schedule``) of the first rule that fits *func*, else (None, None).

    The schedule is traced: ``mxc tune`` stores it in the tuning database as a
    measured record, so tuned kernels never lose to the default ones."""
    for name, rule in RULES:
        try:
            sch = rule(func, info)
        except Exception as exc:  # noqa: BLE001 - a rule that does not fit
            log.debug("schedule rule %s failed: %s", name, exc)
            continue
        if sch is not None:
            return name, sch
    return None, None


def schedule_func(func: tirx.PrimFunc, info: CpuInfo):
    """(rule name, scheduled PrimFunc) for *func*, or (None, func) when no rule applies."""
    name, sch = default_schedule(func, info)
    if sch is None:
        return None, func
    return name, sch.mod["main"].with_attr(_SCHEDULED, True)


def _is_scheduled(func) -> bool:
    return bool(func.attrs is not None and _SCHEDULED in func.attrs and
                int(func.attrs[_SCHEDULED]) == 1)


def cpu_schedule_pass(target: Target, stats: dict | None = None) -> tvm.transform.Pass:
    """A module pass giving every unscheduled PrimFunc a default CPU schedule."""
    info = cpu_info(target)

    @tvm.transform.module_pass(opt_level=0, name="MxcCpuDefaultSchedule")
    def _pass(mod, _ctx):
        def schedule(gv, func):
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                return None
            name, new = schedule_func(func, info)
            if stats is not None:
                stats[gv.name_hint] = name
            return new if name is not None else None

        return rewrite_functions(mod, schedule)

    return _pass
