"""mxc's default CPU schedules (``mxc/backends/tvm/schedules/cpu.py``).

The schedules choose register tiles, cut loops and vectorise; every choice
must leave the numbers unchanged.  Each case below is built to reach one
path of the rules (channel tiles of one, two, three vectors or a part of
one; pixel counts the register block divides or not; depthwise, grouped,
strided and padded convolutions; concatenations cut at their seams;
transposes) and the compiled model is compared with the numpy reference
backend.  ``tile_shape`` is checked against the invariants its cost model
promises.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm.build import build_module
from mxc.backends.tvm.converter import lower_graph
from mxc.backends.tvm.schedules.cpu import CpuInfo, tile_shape
from mxc.backends.tvm.schedules.base.register_tile import (MAX_TILE_VECTORS, operand_registers,
                                                           tile_rate, vector_piece)
from mxc.backends.tvm.schedules.base.microarch import MICROARCHS
from conftest import ISA_TARGETS, isa_target

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

AVX2 = CpuInfo(lanes=8, registers=16, threads=2)

#: one target per vector width the schedules choose from (16 lanes / 32 registers,
#: 8 lanes / 16 registers); run where this CPU can execute the code
TARGETS = ISA_TARGETS


_target = isa_target


def _params(sym, shapes, seed=0):
    rng = np.random.RandomState(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    names = sym.list_arguments() + sym.list_auxiliary_states()
    out = {}
    for name, shape in zip(names, list(arg_shapes) + list(aux_shapes)):
        if name in shapes:
            continue
        value = rng.uniform(0.5, 2.0, shape) if name.endswith("var") else rng.randn(*shape)
        out[name] = value.astype(np.float32)
    return out


def _check(sym, shapes, rtol=1e-4, atol=1e-4, scaled_atol=0.0, target="llvm"):
    """Compiled vs reference.  *scaled_atol*: an absolute tolerance relative to the
    output's largest magnitude -- Winograd's float32 rounding error is bounded by
    the magnitudes summed into a tile, not by each output element."""
    params = _params(sym, shapes)
    rng = np.random.RandomState(1)
    feeds = {k: rng.randn(*v).astype(np.float32) for k, v in shapes.items()}
    model = mxc.compile(sym, params, shapes, target=target)
    got = model.run(feeds)
    want = run_graph(sym.graph, {**params, **feeds})
    for g, w in zip(got, want):
        tol = max(atol, scaled_atol * float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=tol)


def _conv_block(x, channels, kernel, stride=1, groups=1, act="relu", name="c"):
    pad = (kernel // 2, kernel // 2)
    y = S.Convolution(x, kernel=(kernel, kernel), stride=(stride, stride), pad=pad,
                      num_filter=channels, num_group=groups, name=name)
    y = S.BatchNorm(y, fix_gamma=False, name=name + "_bn")
    if act == "relu6":
        return S.clip(y, a_min=0.0, a_max=6.0, name=name + "_relu6")
    return S.Activation(y, act_type=act, name=name + "_act")


# (input channels, output channels, spatial size, kernel, stride, groups)
CONV_CASES = {
    "1x1-three-vector-tile": (24, 144, 14, 1, 1, 1),     # nc = 24 (3 x 8 lanes)
    "1x1-pixels-prime-square": (80, 64, 7, 1, 1, 1),    # 49 pixels: partial blocks
    "1x1-channels-not-lanes": (6, 36, 12, 1, 1, 1),     # 36 channels: half-vector tile
    "1x1-1000-outputs": (32, 1000, 13, 1, 1, 1),        # 169 pixels, one-vector tile
    "1x1-1000-one-pixel": (64, 1000, 1, 1, 1, 1),       # after global pooling: 5 x 8 lanes
    "3x3-stride2-first-layer": (3, 8, 33, 3, 2, 1),     # padded 3-channel image
    "3x3-dense": (16, 32, 10, 3, 1, 1),
    "depthwise-stride1": (36, 36, 15, 3, 1, 36),
    "depthwise-stride2": (24, 24, 16, 3, 2, 24),
    "grouped": (16, 32, 9, 3, 1, 4),
    "7x7-stride2": (3, 16, 20, 7, 2, 1),
}


@pytest.mark.parametrize("isa", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_convolution_schedules_match_the_reference(case, isa):
    cin, cout, size, kernel, stride, groups = CONV_CASES[case]
    x = S.var("data")
    y = _conv_block(x, cout, kernel, stride, groups, act="relu6" if groups > 1 else "relu")
    _check(y, {"data": (1, cin, size, size)}, target=_target(isa))


def test_residual_add_epilogue_and_pooling():
    x = S.var("data")
    a = _conv_block(x, 16, 3, name="a")
    b = S.Convolution(a, kernel=(1, 1), num_filter=16, name="b")
    y = S.Activation(b + a, act_type="relu", name="res")
    y = S.Pooling(y, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="mp")
    y = S.Pooling(y, kernel=(1, 1), global_pool=True, pool_type="avg", name="gap")
    y = S.FullyConnected(S.Flatten(y), num_hidden=10, name="fc")
    _check(y, {"data": (1, 8, 14, 14)})


@pytest.mark.parametrize("split", [(16, 16), (24, 8), (5, 11)])
def test_channel_concatenation(split):
    """Concatenations along channels (cut at seams that are vector multiples or not)."""
    x = S.var("data")
    a = _conv_block(x, split[0], 1, name="a")
    b = _conv_block(x, split[1], 3, name="b")
    y = S.Concat(a, b, dim=1, name="cat")
    y = S.Convolution(y, kernel=(1, 1), num_filter=8, name="mix")
    _check(y, {"data": (1, 4, 11, 11)})


def _kernel_rules(sym, shapes, target="llvm", ctx=None):
    params = _params(sym, shapes)
    mod = lower_graph(sym.graph, shapes=shapes, params=params)
    stats: dict = {}
    build_module(mod, target, stats=stats, ctx=ctx)
    return stats


def test_transpose_and_concatenate_get_the_elementwise_rule():
    """Layout transposes and seam-cut concatenations are vectorised elementwise
    kernels, not the parallel-only fallback (which was 3-6x slower)."""
    x = S.var("data")
    a = _conv_block(x, 16, 1, name="a")
    b = _conv_block(x, 16, 3, name="b")
    y = S.Concat(a, b, dim=1, name="cat")
    rules = _kernel_rules(y, {"data": (1, 3, 12, 12)})
    movers = {k: v for k, v in rules.items() if "transpose" in k or "concatenate" in k}
    assert movers, rules
    assert set(movers.values()) == {"elementwise"}, movers


@pytest.mark.parametrize("isa", sorted(TARGETS))
@pytest.mark.parametrize("channels,kernel,stride", [(3, 7, 2), (3, 3, 1), (4, 3, 2),
                                                    (5, 3, 1)])
def test_a_thin_network_input_is_read_in_place(channels, kernel, stride, isa):
    """An NCHW input of at most THIN_INPUT_CHANNELS channels (an image) feeds its
    convolution without a transposed copy; wider ones are still copied channels-last.
    Either way the outputs match the reference."""
    from mxc.backends.tvm.schedules.layout import THIN_INPUT_CHANNELS
    x = S.var("data")
    y = _conv_block(x, 16, kernel, stride=stride, name="stem")
    shapes = {"data": (1, channels, 19, 19)}
    target = _target(isa)
    rules = _kernel_rules(y, shapes, target)
    copies = [k for k in rules if "transpose" in k]
    # the one copy left turns the NHWC result back to NCHW at the function's output
    assert len(copies) == (1 if channels <= THIN_INPUT_CHANNELS else 2), rules
    _check(y, shapes, target=target)


# ---------------------------------------------------------------------------
# the tile model
# ---------------------------------------------------------------------------
def _operands(v: int, streaming: bool, rext: int) -> int:
    """Operand registers as the model counts them: no spares in tiles wider than
    MAX_TILE_VECTORS over several pixels (their assembly keeps v weights + 1 broadcast)."""
    return operand_registers(v, streaming, spares=v <= MAX_TILE_VECTORS or rext <= 1)


@pytest.mark.parametrize("cext", [4, 6, 8, 16, 24, 36, 64, 96, 144, 1000, 1280])
@pytest.mark.parametrize("rext", [1, 7, 49, 169, 196, 3136, 12544])
@pytest.mark.parametrize("streaming", [False, True])
def test_tile_shape_invariants(cext, rext, streaming):
    nc, rw = tile_shape(cext, rext, AVX2, streaming=streaming)
    assert cext % nc == 0, "the channel tile divides the channels"
    if cext % AVX2.lanes == 0:
        assert nc % AVX2.lanes == 0, "whole vectors when the channels allow"
    vectors = -(-nc // AVX2.lanes)
    assert 1 <= rw <= max(rext, 1)
    operands = _operands(vectors, streaming, rext)    # streamed inputs: memory operands
    assert rw * vectors + operands <= AVX2.registers or rw == 1, \
        "accumulators and operands fit the register file"
    if streaming and cext % (2 * AVX2.lanes) == 0:
        assert nc >= 2 * AVX2.lanes, "streaming tiles of at least two vectors"


def test_tile_shape_prefers_block_lengths_that_divide_the_pixels():
    # 12544 pixels, 8 channels: 8 divides 12544, 12 does not (and is only 4% better)
    assert tile_shape(8, 12544, AVX2) == (8, 8)
    # 196 pixels, 144 channels: a dividing block exists for the two-vector tile
    nc, rw = tile_shape(144, 196, AVX2)
    assert 196 % rw == 0
    # 49 pixels: 7 (dividing) keeps 7 accumulators, 2x5 keeps 10 -- 5 is taken
    assert tile_shape(1280, 49, AVX2) == (16, 5)


@pytest.mark.parametrize("arch", sorted(MICROARCHS))
@pytest.mark.parametrize("cext,rext,streaming", [(64, 3136, False), (512, 49, False),
                                                 (1000, 169, False), (144, 3136, True),
                                                 (24, 12544, False)])
def test_tile_shape_fits_every_microarchitecture(arch, cext, rext, streaming):
    """Every row of the cost-model table gives a tile of whole (sub-)vectors that
    fits its own register file."""
    info = MICROARCHS[arch]
    nc, rw = tile_shape(cext, rext, info, streaming=streaming)
    assert cext % nc == 0
    unit = info.lanes if nc % info.lanes == 0 else nc
    vectors = nc // unit
    if cext % info.lanes == 0:
        assert nc % info.lanes == 0, "whole vectors when the channels allow"
    assert rw * vectors + _operands(vectors, streaming, rext) <= info.registers or rw == 1


def test_cost_model_row_comes_from_the_target():
    """The table row is picked by the target's CPU name, and its vector width only
    where the target enables it."""
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.schedules.base.microarch import cpu_info
    rows = {t: cpu_info(resolve_target(t)) for t in (
        "llvm -mcpu=znver3", "llvm -mcpu=znver4", "llvm -mcpu=cascadelake",
        "llvm -mcpu=haswell", "llvm -mcpu=sapphirerapids")}
    assert rows["llvm -mcpu=znver3"].name == "znver3" and rows["llvm -mcpu=znver3"].lanes == 8
    assert rows["llvm -mcpu=znver4"].name == "znver4" and rows["llvm -mcpu=znver4"].lanes == 16
    assert rows["llvm -mcpu=cascadelake"].name == "skylake-avx512"
    assert rows["llvm -mcpu=haswell"].registers == 16
    assert rows["llvm -mcpu=sapphirerapids"].registers == 32
    no512 = cpu_info(resolve_target("llvm -mcpu=znver4 -mattr=-avx512f"))
    assert no512.lanes == 8, no512


@pytest.mark.parametrize("arch,cext,expected", [
    ("znver4", 1000, 40), ("znver3", 1000, 40), ("skylake-avx512", 1000, 40),
    ("generic-sse", 1000, 20), ("skylake-avx512", 512, 128), ("znver4", 512, 64),
    ("znver3", 1280, 40)])
def test_one_pixel_tiles_keep_enough_fmas_in_flight(arch, cext, expected):
    """A dense layer has one pixel, so only the channel tile can supply independent
    accumulators: it takes ``fma_latency x fma_ports`` vector pieces where the
    channels divide into them (1000 = 25 x 5 pieces of 8 lanes; SSE: of 4), never
    one latency-bound chain."""
    info = MICROARCHS[arch]
    nc, rw = tile_shape(cext, 1, info)
    assert (nc, rw) == (expected, 1)
    pieces = nc // vector_piece(nc, info.lanes)
    assert pieces >= min(info.fma_latency * info.fma_ports, 5)
    assert pieces + pieces + 3 <= info.registers


@pytest.mark.parametrize("arch", sorted(MICROARCHS))
@pytest.mark.parametrize("cext", [6, 12, 24, 36, 40, 1000])
@pytest.mark.parametrize("rext", [49, 169, 784, 3136])
def test_tiles_of_several_sub_vector_pieces_take_exact_register_blocks(arch, cext, rext):
    """Narrow unrolled pieces and a predicated last block together measured 2x
    slower (mobilenetv2's 6 -> 36 layer on AVX2: 12 x 3 over 3136 pixels), so a tile of
    several sub-vector pieces only takes a block length dividing the pixels."""
    info = MICROARCHS[arch]
    nc, rw = tile_shape(cext, rext, info)
    piece = vector_piece(nc, info.lanes)
    if nc // piece > 1 and piece < info.lanes:
        assert rext % rw == 0, (nc, rw)


def test_sub_vector_tiles_on_avx2_and_avx512():
    # 36 channels in 4-lane pieces over 3136 pixels (hand-derived from the model): on
    # AVX2 three pieces fit only 2 exact pixels (6 accumulators, 1.5 FMAs/cycle) and lose
    # to 1 piece x 8 (1.78); on Zen 4's 32 registers 3 pieces x 8 pixels (24 FMAs in 24
    # cycles) edge out 1 x 28 (28 in 29)
    assert tile_shape(36, 3136, MICROARCHS["znver3"]) == (4, 8)
    assert tile_shape(36, 3136, MICROARCHS["znver4"]) == (12, 8)


@pytest.mark.parametrize("arch", sorted(MICROARCHS))
@pytest.mark.parametrize("cext,rext", [(32, 12544), (96, 3136), (960, 49), (144, 784),
                                       (576, 196)])
def test_overlapping_window_tiles_fit_every_tap(arch, cext, rext):
    """A stride-1 depthwise kernel keeps the weight vectors of each of its 3 unrolled taps
    live beside its accumulators and the shared input vector: they fit the row's register
    file; a tile of several vectors takes a block dividing the pixels wherever one keeps
    at least ``fma_latency`` accumulators (else one-vector tiles are tried too)."""
    from mxc.backends.tvm.schedules.base.register_tile import operand_registers
    info = MICROARCHS[arch]
    nc, rw = tile_shape(cext, rext, info, streaming=True, taps=3)
    v = nc // vector_piece(nc, info.lanes)
    assert rw * v + operand_registers(v, True, 3) <= info.registers
    assert operand_registers(v, True, 3) == 3 * v + 1
    exact = [(c, r) for c in range(info.lanes, cext + 1, info.lanes) if cext % c == 0
             for r in range(1, rext + 1) if rext % r == 0
             and r * (c // info.lanes) + 3 * (c // info.lanes) + 1 <= info.registers
             and r * (c // info.lanes) >= info.fma_latency]
    if exact and nc > info.lanes:
        assert rext % rw == 0, (nc, rw)


def test_overlapping_windows_on_16_and_32_registers():
    # 32 channels over 112x112, stride 1: 14 accumulators + 6 weight vectors spilled on
    # AVX2's 16 registers; 2 x 4 pixels fit.  960 channels over 7x7: 16-channel tiles fit
    # only 4-pixel blocks, a partial last one -- one vector x 7 pixels is exact
    assert tile_shape(32, 12544, MICROARCHS["znver3"], streaming=True, taps=3) == (16, 4)
    assert tile_shape(960, 49, MICROARCHS["znver3"], streaming=True, taps=3) == (8, 7)
    # without overlap (stride 2) the input is each FMA's memory operand: unchanged
    assert tile_shape(96, 784, MICROARCHS["znver3"], streaming=True) == (16, 7)
    assert tile_shape(96, 784, MICROARCHS["znver4"], streaming=True) == (32, 14)


@pytest.mark.parametrize("arch", sorted(MICROARCHS))
@pytest.mark.parametrize("cext,rext", [(1000, 169), (1000, 49), (960, 196), (192, 289),
                                       (64, 3136), (1280, 49)])
def test_wide_channel_tiles_divide_fit_and_beat_the_narrow_ones(arch, cext, rext):
    """Tiles of more than MAX_TILE_VECTORS vectors (taken where loads or broadcasts bound
    the best narrow tile's step) divide the channels, fit the row's registers with
    their operands counted as the assembly keeps them (accumulators, v weights, one
    broadcast) and are expected by the model to run faster than every narrow tile."""
    info = MICROARCHS[arch]
    nc, rw = tile_shape(cext, rext, info)
    piece = vector_piece(nc, info.lanes)
    v = nc // piece
    assert cext % nc == 0
    assert rw * v + _operands(v, False, rext) <= info.registers
    if v > MAX_TILE_VECTORS:
        assert operand_registers(v, False, spares=False) == v + 1
        narrow = max(tile_rate(c, r, rext, info) for c in range(piece, MAX_TILE_VECTORS * piece
                                                               + 1, piece) if cext % c == 0
                     for r in range(1, rext + 1)
                     if r * (c // piece) + operand_registers(c // piece, False)
                     <= info.registers)
        assert tile_rate(nc, rw, rext, info) > narrow


@pytest.mark.parametrize("arch", sorted(a for a, r in MICROARCHS.items()
                                         if r.registers == 16 and r.lanes == 8))
def test_16_register_rows_take_five_vectors_for_1000_channels(arch):
    """1000 = 125 x 8 channels: the only tile of at most 4 vectors is one vector, a
    broadcast per FMA, its loads outnumbering its FMAs.  5 vectors x 2 pixels (10
    accumulators + 5 weights + 1 broadcast = 16 registers) load 7 operands for 10 FMAs;
    legalize packs the weights for the same tile (it asks tile_shape too), and the
    schedule, reading the packed tile, gets the same register block."""
    info = MICROARCHS[arch]
    assert tile_shape(1000, 169, info) == (40, 2)
    assert tile_shape(1000, 169, info, nc=40) == (40, 2)     # the schedule, weights packed
    assert 2 * 5 + _operands(5, False, 169) == info.registers


def test_embedded_broadcast_rows_keep_their_tiles_for_1000_channels():
    # AVX-512 folds the broadcast into the FMA: 8 channels x 13 pixels stay exact and fast
    for arch in ("znver4", "skylake-avx512", "icelake-server", "sapphirerapids"):
        assert tile_shape(1000, 169, MICROARCHS[arch]) == (8, 13)


def test_tile_shape_keeps_packed_channel_tile():
    assert tile_shape(64, 3136, AVX2, nc=32)[0] == 32


# ---------------------------------------------------------------------------
# Winograd F(m, 3)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("m", [2, 4])
def test_winograd_matrices_compute_a_valid_correlation(m):
    """A^T [(G g G^T) * (B^T d B)] A is the m x m valid correlation of d with g."""
    from mxc.backends.tvm.schedules.base.winograd_transforms import transform_matrices
    a, b, g = transform_matrices(m)
    rng = np.random.RandomState(m)
    d = rng.randn(m + 2, m + 2)
    k = rng.randn(3, 3)
    want = np.array([[np.sum(d[i:i + 3, j:j + 3] * k) for j in range(m)] for i in range(m)])
    got = a.T @ ((g @ k @ g.T) * (b.T @ d @ b)) @ a
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


#: F(4, 3)'s float32 error relative to the output scale (measured ~2e-5 after two
#: stacked Winograd layers; MXNet's corpus models allow rtol 1e-3)
WINOGRAD_ATOL = 1e-4

# (channels in, channels out, side, padding): sides that tile exactly or leave partial
# tiles, with F(4, 3) (>= F4_MIN_TILES 4x4 tiles: 24x24 and 23x23 make 36) or F(2, 3)
WINOGRAD_CASES = {
    "f4-exact": (16, 32, 24, 1),
    "f4-partial-tiles": (16, 24, 23, 1),
    "f2-small": (32, 16, 8, 1),
    "f2-partial-tiles": (16, 24, 13, 1),
    "f2-7x7": (32, 16, 7, 1),
    "no-padding": (16, 16, 12, 0),
}


@pytest.mark.parametrize("n,side,m", [(1, 8, 2), (1, 13, 2), (1, 14, 2), (1, 20, 2),
                                      (1, 21, 4), (1, 24, 4), (1, 27, 4), (1, 56, 4),
                                      (2, 16, 4), (8, 13, 4), (8, 7, 4)])
def test_winograd_takes_f4_only_over_enough_tiles(n, side, m):
    """F(4, 3) needs F4_MIN_TILES (32) 4x4 output tiles, batch included, to reuse its
    weights (2.25x F(2, 3)'s): 20x20 makes 5x5 = 25 tiles, 21x21 6x6 = 36; a batch of
    two 16x16 images 2 x 16 = 32; a batch of eight 7x7 ones 8 x 2 x 2 = 32."""
    from mxc.backends.tvm.schedules.base.winograd_transforms import F4_MIN_TILES, tile_size
    assert F4_MIN_TILES == 32
    assert tile_size(n, side, side) == m


@pytest.mark.parametrize("isa", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(WINOGRAD_CASES))
def test_winograd_convolutions_match_the_reference(case, isa):
    cin, cout, side, pad = WINOGRAD_CASES[case]
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(pad, pad), num_filter=cout, name="c")
    y = S.BatchNorm(y, fix_gamma=False, name="bn")
    y = S.Activation(y, act_type="relu", name="act")
    shapes = {"data": (1, cin, side, side)}
    target = _target(isa)
    rules = _kernel_rules(y, shapes, target)
    assert any(k.startswith("winograd_input") for k in rules), rules
    assert None not in rules.values() and "fallback" not in rules.values(), rules
    _check(y, shapes, scaled_atol=WINOGRAD_ATOL, target=target)


def _parallel_tasks(func, block_name):
    """For each iteration ``i`` of *func*'s parallel loop (inner loops at 0), the iter
    values of its block *block_name*: where task ``i`` starts."""
    import tvm_ffi
    from tvm import sym, tirx
    loops, realize = [], []

    def visit(node):
        if isinstance(node, tirx.For):
            loops.append(node)
        elif getattr(getattr(node, "block", None), "name_hint", "") == block_name:
            realize.append(node)

    tvm_ffi.structural_walk(func.body, [(tvm_ffi.Object, visit)])
    (par,) = [lp for lp in loops if lp.kind == tirx.ForKind.PARALLEL]
    (real,) = realize
    tasks = []
    for i in range(int(par.extent)):
        ana = sym.Analyzer()
        for lp in loops:
            ana.bind(lp.loop_var, i if lp.same_as(par) else 0)
        tasks.append([int(ana.simplify(v)) for v in real.iter_values])
    return tasks


@pytest.mark.parametrize("arch", ["znver3", "znver4"])
def test_winograd_product_tasks_read_the_weights_in_order(arch):
    """The batched product's parallel tasks run tile position first, then channel block:
    consecutive tasks read consecutive slices of the packed weights [E, K/nc, C, nc], so
    each thread streams one contiguous range of them (with the channel block first,
    squeezenet and resnet18 ran 4-6% slower)."""
    from tvm import te
    from mxc.backends.tvm.schedules.families.reduction import rule_reduction
    from mxc.backends.tvm.schedules.families.winograd import batch_matmul
    v = te.placeholder((16, 49, 64), name="v")
    u = te.placeholder((16, 8, 64, 32), name="u")
    func = te.create_prim_func([v, u, batch_matmul(v, u)])
    sch = rule_reduction(func, MICROARCHS[arch])
    tasks = _parallel_tasks(sch.mod["main"], "winograd_bgemm_update")
    # iter values (e, p, k, rc): the weight slice read is U[e, k // 32]
    slices = [e * 8 + k // 32 for e, _, k, _ in tasks]
    assert slices == sorted(slices) and len(set(slices)) == 16 * 8


def test_winograd_residual_and_fire_module_epilogues():
    """The output transform with a residual add, and a squeezenet fire module whose
    concatenation fuses into it."""
    x = S.var("data")
    a = _conv_block(x, 16, 3, name="a")                     # winograd
    b = S.Convolution(a, kernel=(3, 3), pad=(1, 1), num_filter=16, name="b")
    r = S.Activation(b + x, act_type="relu", name="res")    # residual epilogue
    sq = _conv_block(r, 16, 1, name="squeeze")
    e1 = _conv_block(sq, 32, 1, name="e1")
    e3 = _conv_block(sq, 32, 3, name="e3")                  # winograd + concat
    y = S.Concat(e1, e3, dim=1, name="fire")
    _check(y, {"data": (1, 16, 10, 10)}, scaled_atol=WINOGRAD_ATOL)


@pytest.mark.parametrize("side,transformed", [(6, False), (7, True)])
def test_auto_winograd_from_7x7(side, transformed):
    """auto transforms from 7x7 (ResNet's last stage, 16 F(2, 3) tiles) up: MIN_SIZE."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=16, name="c")
    rules = _kernel_rules(y, {"data": (1, 16, side, side)})
    assert any(k.startswith("winograd_input") for k in rules) == transformed, rules


def test_winograd_can_be_switched_off():
    # (MXC_WINOGRAD=0 reaches this switch through the options layer: test_compile_options.py)
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.build_context import build_context
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=16, name="c")
    ctx = build_context(resolve_target("llvm"), winograd="off", record=False)
    rules = _kernel_rules(y, {"data": (1, 16, 16, 16)}, ctx=ctx)
    assert not any("winograd" in k for k in rules), rules


# ---------------------------------------------------------------------------
# reduction kernels other than convolutions, and the TIR facts the rules read
# ---------------------------------------------------------------------------
def _reductions():
    """softmax (two reductions: the fallback rule), sum over the last axis and over a
    middle one, a global mean (the reduction rule) and an L2 norm (a fused square)."""
    a, b, c, d = S.var("a"), S.var("b"), S.var("c"), S.var("d")
    heads = [S.softmax(a, axis=-1), S.sum(b, axis=-1), S.sum(c, axis=1),
             S.mean(d, axis=(2, 3)), S.norm(b, ord=2, axis=1)]
    shapes = {"a": (4, 100), "b": (8, 48), "c": (6, 10, 24), "d": (2, 32, 7, 7)}
    return S.Group(heads), shapes


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_reduction_kernels_match_the_reference(isa):
    sym, shapes = _reductions()
    _check(sym, shapes, target=_target(isa))


def test_reduction_kernels_get_the_reduction_rule():
    sym, shapes = _reductions()
    rules = _kernel_rules(sym, shapes)
    assert rules and all(rule is not None for rule in rules.values()), rules
    sums = {k: v for k, v in rules.items() if "sum" in k or "mean" in k}
    assert sums and set(sums.values()) == {"reduction"}, rules


def _block_bodies(func):
    from tvm import s_tir
    from mxc.backends.tvm.schedules.base.module_utils import root_blocks
    sch = s_tir.Schedule(func)
    return {sch.get(b).name_hint: sch.get(b) for b in root_blocks(sch)}


def test_tir_facts_come_from_the_structure_not_the_text():
    from tvm import te, tirx
    from mxc.backends.tvm.schedules.base.tir_queries import (constant_bounds, has_bounds_check,
                                                        is_vectorizable)
    # a buffer whose name spells the text the old predicates looked for
    x = te.placeholder((4, 20), name="Select_if_then_else_T_sinh_")
    pad = te.compute((4, 24), lambda i, j: tirx.if_then_else(
        tirx.all(j >= 2, j < 22), x[i, j - 2], tirx.const(0, "float32")), name="pad")
    cat = te.compute((4, 24), lambda i, j: tirx.Select(j < 16, pad[i, j], tirx.sinh(pad[i, j])),
                     name="cat")
    copy = te.compute((4, 20), lambda i, j: x[i, j] + 1, name="copy")
    blocks = _block_bodies(te.create_prim_func([x, cat, copy]))
    assert has_bounds_check(blocks["pad"].body) and has_bounds_check(blocks["cat"].body)
    assert not has_bounds_check(blocks["copy"].body)
    assert is_vectorizable(blocks["pad"].body) and is_vectorizable(blocks["copy"].body)
    assert not is_vectorizable(blocks["cat"].body)                 # sinh stays scalar
    j = blocks["pad"].iter_vars[-1].var
    assert constant_bounds(blocks["pad"].body, j) == {2, 22}
    assert constant_bounds(blocks["cat"].body, blocks["cat"].iter_vars[-1].var) == {16}
    assert constant_bounds(blocks["copy"].body, blocks["copy"].iter_vars[-1].var) == set()


def test_the_batch_axis_stays_out_of_the_register_block():
    """A register block spans an image's pixels (h, w), never the batch: with n fused
    in, every input address became a nest of divisions in the innermost loop."""
    from tvm import s_tir, te
    from mxc.backends.tvm.schedules.families.reduction import _analyse
    x = te.placeholder((4, 13, 13, 32), name="x")
    w = te.placeholder((32, 48), name="w")
    rc = te.reduce_axis((0, 32), name="rc")
    y = te.compute((4, 13, 13, 48),
                   lambda n, h, v, k: te.sum(x[n, h, v, rc] * w[rc, k], axis=rc), name="conv")
    sch = s_tir.Schedule(te.create_prim_func([x, w, y]))
    nest = _analyse(sch, sch.get_sblock("conv"))
    assert nest.pixels == [1, 2] and nest.pixel_extent == 13 * 13


@pytest.mark.parametrize("isa", sorted(TARGETS))
@pytest.mark.parametrize("case", ["1x1-1000-outputs", "3x3-dense", "depthwise-stride2"])
def test_batched_convolutions_match_the_reference(case, isa):
    cin, cout, size, kernel, stride, groups = CONV_CASES[case]
    y = _conv_block(S.var("data"), cout, kernel, stride, groups,
                    act="relu6" if groups > 1 else "relu")
    _check(y, {"data": (3, cin, size, size)}, target=_target(isa))
