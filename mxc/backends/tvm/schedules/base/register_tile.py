"""The register-tile model: how many output channels (``nc``) and pixels (``rw``) one
micro-kernel keeps in registers, and the loop splits that carry the choice.

Every register-blocked kernel shares it -- the float32 reduction rule
(:mod:`..families.reduction`: direct and depthwise convolutions, pooling, dense), the
packing of weights at legalization (:mod:`..legalize`), the channel padding rewrite
(:mod:`..channel_padding`) and the dot-product kernels (:mod:`.dot_kernel`: int8, bf16)
-- so it lives in ``base/``, below them all, and imports no rule.  The model's per-CPU
inputs are a :data:`~.microarch.MICROARCHS` row; the constants below hold for every
row (they were measured on Zen 4, AVX2 and AVX-512 code alike).
"""

from __future__ import annotations

from .microarch import CpuInfo
from .tir_queries import as_int

#: channel tiles tried, in whole vectors (a multi-vector tile is unrolled vector by vector)
MAX_TILE_VECTORS = 4

#: channel tiles tried when too few pixels can be blocked to hide the FMA latency (a
#: dense layer: one pixel): 1000 classes = 5 x 8-lane pieces x 25 tiles.  One accumulator
#: chain made mobilenetv2's 1280 -> 1000 layer latency-bound (4 cycles per FMA)
LATENCY_TILE_VECTORS = 8

#: registers a broadcasting micro-kernel keeps besides accumulators and weight vectors:
#: the broadcast input scalar, live for the tile's v FMAs (40 channels x 2 pixels on 16
#: registers, Zen 4 as znver3 code: 10 accumulators + 5 weights + 1 broadcast = ymm0-15,
#: no stack reference in the inner loop)
BROADCAST_OPERAND_REGISTERS = 1

#: ... and spares, kept free in tiles of at most MAX_TILE_VECTORS vectors and in one-pixel
#: (dense) tiles: the picks measured with them (LLVM may load the next step's operands
#: early).  Wider float tiles over several pixels (:func:`tile_shape`: where loads or
#: the FMA latency bound the best narrow one) count none
BROADCAST_SPARE_REGISTERS = 2

#: a kernel streaming a vector per FMA from its input (depthwise, pooling) takes tiles of
#: at least this many vectors: one-vector tiles measured 3-7x slower on Zen 4 (AVX-512
#: and AVX2 alike: mobilenetv2's 3x3 depthwise layers), whatever the port model says --
#: unless, its taps' windows overlapping (:func:`tile_shape`), the best such tile leaves a
#: partial last block or keeps fewer accumulators than the FMA latency (16 registers, a
#: stride-1 3x3 window, 7x7 pixels: 16 channels fit 4-pixel
#: blocks only, which leave a partial one; 8 channels x 7 pixels measured 1.5x faster on
#: Zen 4 as AVX2 code)
STREAMING_MIN_VECTORS = 2

#: registers a streaming micro-kernel whose neighbouring pixels read overlapping windows
#: keeps besides accumulators and weight vectors: the input vector it loads once for
#: several taps (without overlap the input is each FMA's memory operand)
STREAMING_OPERAND_REGISTERS = 1

#: a register block that leaves a partial last block must beat the best exact one by this
#: factor: the partial block puts a predicate on every FMA of every block (measured 2-3x
#: slower for the first convolution of a network); 49 pixels: 2x5 beats 1x7 by 40%
PARTIAL_BLOCK_MARGIN = 1.1

#: tile scores are compared at this many decimals, so near-ties go to more accumulators
SCORE_DECIMALS = 2


# ---------------------------------------------------------------------------
# the register-tile model
# ---------------------------------------------------------------------------
def vector_piece(nc: int, lanes: int) -> int:
    """The vector width a tile of *nc* channels is computed in: a whole register
    when *nc* is a multiple of one, else the largest power of two below that
    divides *nc* (1000 channels on AVX-512: 8-lane pieces)."""
    piece = lanes
    while piece > 1 and nc % piece:
        piece //= 2
    return piece


def tile_shape(cext: int, rext: int, info: CpuInfo, nc: int | None = None,
               streaming: bool = False, exact: bool = False,
               taps: int = 1) -> tuple[int | None, int]:
    """(nc, rw): channels per tile (the vector axis, extent *cext*) and the
    register-block length along the pixel axis (extent *rext*).

    The micro-kernel keeps ``rw * v`` vector accumulators (``v`` vector
    pieces of :func:`vector_piece` width per tile) live and per reduction
    step loads ``rw`` broadcasts and ``v`` weight vectors (``streaming``: a
    vector per FMA, as depthwise convolution and pooling).  A step costs
    ``max(latency, FMAs/ports, loads/ports)`` cycles; the tile with the best
    FMA throughput that fits the register file (accumulators + operands + 1
    spare) wins, ties to more accumulators.  *nc* fixes the channel tile
    (weights already packed for it).

    Tiles of up to :data:`MAX_TILE_VECTORS` pieces are tried first.  When the
    best of them cannot keep ``fma_latency x fma_ports`` FMAs in flight (too
    few pixels to block: a dense layer, a 1x1 convolution after global
    pooling), tiles of up to :data:`LATENCY_TILE_VECTORS` pieces are tried
    too: there the channels must supply the independent accumulators.  So
    they are where the best narrow tile's loads outnumber its FMAs (per port)
    over several pixels (float kernels: not *exact*, whose tensorized int8 steps
    keep other operands): 1000 channels = 125 x 8 divide into one-vector tiles
    only, a broadcast per FMA, while 5 vectors x 2 pixels load 7 operands for
    10 FMAs (on 16 registers, AVX2: 8 x 10 ran at 54 GFLOP/s, 40 x 2 at 98).

    *exact*: only register blocks that divide *rext* (a tensorized micro-kernel,
    :func:`.dot_kernel.rule_dot`, cannot take the predicate a partial last block puts on it).

    *taps*: reduction steps unrolled in the micro-kernel whose inputs overlap at
    neighbouring pixels (a stride-1 3x3 window's columns).  A streaming kernel keeps
    every tap's ``v`` weight vectors live across the register block there: LLVM loads
    each input vector once and multiplies it by the weights of every tap it meets
    (mobilenetv2's stride-1 3x3 depthwise layers: 14 accumulators + 6 weight vectors
    spilled on 16 registers, 2.2x slower than 8 accumulators on Zen 4 as AVX2 code; at
    stride 2 the same tiles measured no loss on either width, so they count one tap).
    """
    if nc is not None:
        return _best_tile([nc], rext, info, streaming, exact, taps)
    piece = vector_piece(cext, info.lanes)
    shapes = _tile_candidates(cext, piece, MAX_TILE_VECTORS)
    in_flight = info.fma_latency * info.fma_ports
    wide = [cand for cand in shapes if cand >= STREAMING_MIN_VECTORS * info.lanes]
    if streaming and wide:
        nc, rw = _best_tile(wide, rext, info, streaming, exact, taps)
        # kept unless overlapping taps leave it a partial block or one too short to
        # cover the FMA latency
        if taps == 1 or len(wide) == len(shapes) or \
                rext % rw == 0 and rw * (nc // piece) >= min(info.fma_latency, rext):
            return nc, rw
    nc, rw = _best_tile(shapes, rext, info, streaming, exact, taps)
    if not streaming and (rw * (nc // piece) < in_flight
                          or rext > 1 and not exact and _load_bound(nc, rw, info)):
        more = _tile_candidates(cext, piece, LATENCY_TILE_VECTORS)
        if len(more) > len(shapes):
            nc, rw = _best_tile(more, rext, info, streaming, exact, taps)
    return nc, rw


def _load_bound(nc: int, rw: int, info: CpuInfo) -> bool:
    """Whether a broadcasting step of *nc* x *rw* issues more loads (per load port)
    than FMAs (per FMA port): the bound of :func:`tile_rate` when latency is not."""
    v = nc // vector_piece(nc, info.lanes)
    return (rw + v) / info.load_ports > rw * v / info.fma_ports


def _tile_candidates(cext: int, piece: int, max_pieces: int) -> list[int]:
    """Channel tiles of 1..*max_pieces* vector pieces that divide *cext*."""
    return [v * piece for v in range(1, max_pieces + 1) if cext % (v * piece) == 0]


def _best_tile(shapes: list[int], rext: int, info: CpuInfo, streaming: bool,
               exact_blocks: bool = False, taps: int = 1) -> tuple[int, int]:
    """The (nc, rw) of the register-tile model's best pick among channel tiles *shapes*."""
    regs = info.registers
    best = {True: None, False: None}     # keyed by "rw divides the pixel extent"
    for cand in shapes:
        piece = vector_piece(cand, info.lanes)
        v = cand // piece
        # several sub-vector pieces and a partial last block: both put extra work on every
        # step (unrolled narrow FMAs, a predicate on each), measured 2x slower together
        exact_only = v > 1 and piece < info.lanes
        for rw in range(1, max(rext, 1) + 1):
            if exact_only and rext % rw:
                continue
            acc = rw * v
            if acc + operand_registers(v, streaming, taps, spares=v <= MAX_TILE_VECTORS
                                       or rext <= 1 or exact_blocks) > regs:
                break
            loads = (acc if streaming else rw) + v
            score = (round(tile_rate(cand, rw, rext, info, streaming), SCORE_DECIMALS),
                     -loads / acc, acc)
            exact = rext % rw == 0
            if best[exact] is None or score > best[exact][0]:
                best[exact] = (score, cand, rw)
    # a block length dividing the extent wins unless it is clearly worse
    pick = best[True]
    if not exact_blocks and (pick is None or (
            best[False] is not None and best[False][0][0] > PARTIAL_BLOCK_MARGIN * pick[0][0])):
        pick = best[False]
    if pick is None:
        return shapes[0], 1
    return pick[1], pick[2]


def operand_registers(v: int, streaming: bool, taps: int = 1, spares: bool = True) -> int:
    """Vector registers a tile of *v* pieces keeps besides its accumulators: broadcasting,
    the v weight vectors, the input scalar and spares (*spares* false: none, as tiles
    wider than MAX_TILE_VECTORS over several pixels count them); streaming, the weight vectors of
    every overlapping tap (:func:`tile_shape`) and, where taps share it, the input vector."""
    if streaming:
        return v * taps + (STREAMING_OPERAND_REGISTERS if taps > 1 else 0)
    spare = BROADCAST_SPARE_REGISTERS if spares or v <= MAX_TILE_VECTORS else 0
    return v + BROADCAST_OPERAND_REGISTERS + spare


def tile_rate(nc: int, rw: int, rext: int, info: CpuInfo, streaming: bool = False) -> float:
    """The model's useful FMAs per cycle for a tile of *nc* channels x *rw* pixels over
    *rext* pixels: a step costs ``max(latency, FMAs/ports, loads/ports)`` cycles, and a
    partial last block's idle accumulators count as lost.

    Ranks tiles of one channel count, whose pieces all have one width, so it counts
    vector operations at the full-width rates; :func:`lane_rate` compares counts."""
    return _step_rate(nc, rw, rext, info, streaming, info.fma_ports, info.load_ports)


def lane_rate(nc: int, rw: int, rext: int, info: CpuInfo, streaming: bool = False) -> float:
    """:func:`tile_rate` in float lanes per cycle, its operations issued at the rates of
    their width (:meth:`.microarch.CpuInfo.ports`): what compares channel counts whose pieces
    differ -- 1000 channels in 8-lane pieces against 1008 in 16-lane ones run at the
    same rate on Zen 4 and at half of it on a Xeon with two 512-bit FMA units."""
    piece = vector_piece(nc, info.lanes)
    fma, load = info.ports(piece)
    return piece * _step_rate(nc, rw, rext, info, streaming, fma, load)


def _step_rate(nc, rw, rext, info, streaming, fma_ports, load_ports) -> float:
    v = nc // vector_piece(nc, info.lanes)
    acc = rw * v
    loads = (acc if streaming else rw) + v
    cycles = max(info.fma_latency, acc / fma_ports, loads / load_ports)
    waste = -(-rext // rw) * rw / rext
    return acc / cycles / waste


def tile_split(sch, loop, factor: int, max_inner: int):
    """Split *loop* by *factor*: an exact split as a *sampled* tile whose decision is
    *factor*, so the schedule's trace -- which ``mxc tune`` seeds MetaSchedule's
    search with -- carries a tile size its mutators vary (MutateTileSize moves
    factors between the two); a partial last tile as a plain split."""
    extent = as_int(sch.get(loop).extent)
    if extent and extent % factor == 0:
        tiles = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=max_inner,
                                        decision=[extent // factor, factor])
        return sch.split(loop, tiles)
    return sch.split(loop, [None, factor])


def fuse_map(ndim: int, pix: list[int], extents: list[int]):
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
