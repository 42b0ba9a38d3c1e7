"""Channel padding of channels-last activations (``schedules/channel_padding.py``).

Activations whose channels split into narrow vector pieces are kept padded to
whole vectors between the ops that can take them.  The padding must never show:
models that pad are compared with the numpy reference backend on AVX2 and
AVX-512 targets, including inputs holding inf and NaN (a padded lane computed as
``inf * 0`` would turn real outputs into NaN), and the padded widths are checked
against values derived by hand from each cost-model row.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm.schedules.channel_padding import keeps_zero, padded_channels
from mxc.backends.tvm.schedules.base.microarch import MICROARCHS
from conftest import ISA_TARGETS, isa_target

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

TARGETS = ISA_TARGETS


_target = isa_target


# (row, channels, padded): pieces under 8 floats wide are padded -- to whole registers
# when the channels span more than one, else to 8; 4 channels or fewer stay
PADDED = [
    ("znver4", 36, 48), ("znver4", 6, 8), ("znver4", 12, 16), ("znver4", 20, 32),
    ("znver4", 4, 4), ("znver4", 24, 24), ("znver4", 40, 40), ("znver4", 1000, 1000),
    ("skylake-avx512", 36, 48), ("znver3", 36, 40), ("znver3", 6, 8), ("znver3", 12, 16),
    ("znver3", 24, 24), ("znver3", 3, 3), ("generic-sse", 6, 8), ("generic-sse", 36, 36),
]


@pytest.mark.parametrize("row,channels,padded", PADDED)
def test_padded_channel_counts_per_microarchitecture(row, channels, padded):
    assert padded_channels(channels, MICROARCHS[row]) == padded


# (row, channels, pixels, padded) for counts of whole registers or of pieces at least 8
# floats wide, in float lanes per cycle.  1000 classes on AVX2 (znver3: 16 registers, 2
# FMA and 2 load ports) are 125 registers: the best one-register tile (8 x 10 pixels)
# loads 11 vectors per 10 FMAs, so tile_shape takes 5 registers x 2 pixels (7 loads per
# 10 FMAs, 5 cycles), as fast in the model as 1008 = 63 x 16 as 16 x 5: not padded
# (squeezenet on znver3 code either way: paired ratio 1.00).  40 on AVX2 would need 20%
# more (the cap is 1/16).  On AVX-512 rows 1000 is
# 8-lane pieces: the best tile over 169 pixels is 8 x 13 (13 FMAs, 14 loads), 7 cycles
# where they issue 2 a cycle -- 104 lanes / 7 = 14.9 a cycle.  A Xeon with two 512-bit
# FMA units issues 2 zmm FMAs too: 1024 = 64 x 16 as 32 x 13 (26 FMAs, 15 loads, 13
# cycles) makes 32 a cycle, 2.2x.  Zen 4 and Ice Lake client issue 1 zmm FMA a cycle, so
# whole registers gain only the narrow pieces' load-bound cycle: 1024 at 16 a cycle
# is 67.3 / 64 = 1.05x (measured on Zen 4: the head alone 12-21% faster, squeezenet 5%),
# 1008 = 63 x 16 as 16 x 13 (13 FMAs, 14 loads) 16 a cycle on Ice Lake client (1.07x).
# Over 49 pixels on the Xeon row 1008 as 48 x 7 (21 FMAs, 10 loads) beats 1024 as
# 32 x 7 (14 FMAs, 9 loads), both at 32 a cycle, by its 16 fewer channels
WHOLE = [
    ("znver3", 1000, 169, 1000), ("znver3", 40, 3136, 40), ("znver4", 1000, 169, 1024),
    ("skylake-avx512", 1000, 49, 1008), ("skylake-avx512", 1000, 169, 1024),
    ("icelake-client", 1000, 169, 1008), ("znver3", 64, 169, 64),
]


@pytest.mark.parametrize("row,channels,pixels,padded", WHOLE)
def test_whole_register_counts_pad_only_where_the_tile_model_gains(row, channels, pixels,
                                                                   padded):
    assert padded_channels(channels, MICROARCHS[row], pixels) == padded


@pytest.mark.parametrize("row", sorted(MICROARCHS))
def test_counts_with_multi_register_tiles_pad_only_for_one_pixel(row):
    """A count of whole pairs of registers has two-register tiles, which with a register
    block of pixels reach the model's peak: never padded.  With one pixel (a layer after
    global pooling) the channel tile alone must hide the FMA latency, and 416 = 26 x 16
    on AVX-512 allows two-register tiles only (2 FMAs in flight where 4 x ports are
    needed): padded to 432 = 27 x 16, three-register tiles."""
    info = MICROARCHS[row]
    for channels in range(2 * info.lanes, 2049, 2 * info.lanes):
        for pixels in (49, 169, 3136):
            assert padded_channels(channels, info, pixels) == channels, (channels, pixels)
    if info.lanes == 16 and info.fma_ports == 1:
        assert padded_channels(416, info, 1) == 432


@pytest.mark.parametrize("row", sorted(MICROARCHS))
def test_padding_only_grows_and_never_leaves_narrow_pieces(row):
    info = MICROARCHS[row]
    for channels in range(1, 1300):
        for pixels in (None, 1, 169):
            got = padded_channels(channels, info, pixels)
            assert got >= channels
            if got != channels:
                assert got % min(8, info.lanes) == 0, channels
                assert got - channels < 4 * info.lanes, channels


def test_keeps_zero_evaluates_what_the_padded_lanes_hold():
    zero = np.zeros(1, np.float32)
    assert keeps_zero("relax.add", [zero, zero])
    assert not keeps_zero("relax.add", [zero, np.array([1.0], np.float32)])
    assert keeps_zero("relax.multiply", [zero, np.array([3.0, -2.0], np.float32)])
    assert not keeps_zero("relax.multiply", [zero, np.array([np.inf], np.float32)])
    assert keeps_zero("relax.maximum", [zero, np.array([-1.0, 0.0], np.float32)])
    assert not keeps_zero("relax.minimum", [zero, np.array([-1.0], np.float32)])
    # mxc's relu: where(x > 0 or isnan(x), x, 0); bool lanes are False
    assert keeps_zero("relax.isnan", [zero])
    assert keeps_zero("relax.where", [np.zeros(1, bool), zero, zero])
    assert not keeps_zero("relax.where", [np.zeros(1, bool), zero,
                                                np.array([6.0], np.float32)])
    assert not keeps_zero("relax.sigmoid", [zero])        # not in the table: cut
    assert not keeps_zero("relax.isfinite", [zero])


def _params(sym, shapes, seed=0):
    rng = np.random.RandomState(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    names = sym.list_arguments() + sym.list_auxiliary_states()
    out = {}
    for name, shape in zip(names, list(arg_shapes) + list(aux_shapes)):
        if name not in shapes:
            value = rng.uniform(0.5, 2.0, shape) if name.endswith("var") else rng.randn(*shape)
            out[name] = value.astype(np.float32)
    return out


def _inverted_residual(x, narrow, wide, name):
    """mobilenetv2's block: 1x1 expand, relu6, 3x3 depthwise, relu6, 1x1 project, + x."""
    y = S.Convolution(x, kernel=(1, 1), num_filter=wide, name=name + "_expand")
    y = S.clip(y, a_min=0.0, a_max=6.0)
    y = S.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=wide, num_group=wide,
                      name=name + "_dw")
    y = S.BatchNorm(y, fix_gamma=False, name=name + "_bn")
    y = S.clip(y, a_min=0.0, a_max=6.0)
    y = S.Convolution(y, kernel=(1, 1), num_filter=narrow, name=name + "_project")
    return y + x


def _padding_model():
    """6 -> 36 -> 6 channels (padded on both ISAs) through two residual blocks and
    average pooling (a max pooling's explicit -inf border padding would cut it), then
    a 6 -> 12 head ending in global pooling and a 36-channel side branch ending in a
    sigmoid: values whose uses do not all take padding stay exact."""
    x = S.var("data")
    a = S.clip(S.Convolution(x, kernel=(1, 1), num_filter=6, name="stem"), a_min=0.0, a_max=6.0)
    b1 = _inverted_residual(a, 6, 36, "b1")
    p = S.Pooling(b1, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="ap")
    b2 = _inverted_residual(p, 6, 36, "b2")
    head = S.Convolution(b2, kernel=(1, 1), num_filter=12, name="head")
    gap = S.Pooling(head, kernel=(1, 1), global_pool=True, pool_type="avg", name="gap")
    side = S.sigmoid(S.Convolution(b2, kernel=(1, 1), num_filter=36, name="side"))
    return S.Group([S.FullyConnected(S.Flatten(gap), num_hidden=5, name="fc"), side])


def _compare(got, want):
    for g, w in zip(got, want):
        assert np.array_equal(np.isnan(g), np.isnan(w)), "NaN where the reference has none"
        assert np.array_equal(np.isinf(g), np.isinf(w))
        finite = np.isfinite(w)
        np.testing.assert_allclose(g[finite], w[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_padded_network_matches_the_reference_even_with_inf_and_nan(isa):
    sym = _padding_model()
    shapes = {"data": (1, 5, 12, 12)}
    params = _params(sym, shapes)
    model = mxc.compile(sym, params, shapes, target=_target(isa))
    rng = np.random.RandomState(1)
    data = rng.randn(*shapes["data"]).astype(np.float32)
    _compare(model.run({"data": data}), run_graph(sym.graph, {**params, "data": data}))
    # an inf in one channel makes the stem's outputs +-inf, which relu6 clips to finite
    # values; padded lanes computed as inf * 0 would carry NaN into every real output
    data[0, 2, 3, 4] = np.inf
    data[0, 1, 8, 8] = -np.inf
    want = run_graph(sym.graph, {**params, "data": data})
    assert np.isfinite(want[0]).any(), "the case must keep finite outputs to compare"
    _compare(model.run({"data": data}), want)


def _layout(sym, shapes, row):
    """The main function of *sym* after the channels-last pass for cost-model *row*:
    the widths of its convolutions' results and, for each strided_slice, the op its
    operand comes from."""
    import tvm
    from tvm import relax

    from mxc.backends.tvm.converter import lower_graph
    from mxc.backends.tvm.schedules.fold import fold_constants_numpy
    from mxc.backends.tvm.schedules.layout import channels_last_pass

    mod = lower_graph(sym.graph, shapes=shapes, params=_params(sym, shapes))
    func = channels_last_pass(MICROARCHS[row])(fold_constants_numpy(mod))["main"]
    bound = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    widths, sliced = set(), []
    for value in bound.values():
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            if value.op.name == "relax.nn.conv2d":
                widths.add(int(value.ty.shape[3]))
            elif value.op.name == "relax.strided_slice":
                src = bound.get(value.args[0])
                sliced.append(src.op.name if isinstance(src, relax.Call) else None)
    return func, widths, sliced


def test_the_layout_pass_pads_only_values_whose_uses_take_padding():
    """On an AVX-512 row the blocks' 36-channel activations are kept 48 wide and the
    6-channel ones 8 wide, the head's 12 (ending in global pooling) 16 wide, cut after
    the pooling; the side branch (36, ending in a sigmoid) is not padded -- a slice
    right after a convolution would be fused into its kernel -- and the outputs keep
    their shapes."""
    sym = _padding_model()
    func, widths, sliced = _layout(sym, {"data": (1, 5, 12, 12)}, "znver4")
    assert [tuple(int(d) for d in f.shape) for f in func.ret_ty.fields] \
        == [(1, 5), (1, 36, 6, 6)]
    assert widths == {8, 48, 16, 36}, widths
    assert sliced == ["relax.mean"], sliced


@pytest.mark.parametrize("row,width", [("znver3", 1000), ("znver4", 1024),
                                       ("skylake-avx512", 1024), ("neon", 1000)])
def test_a_classifier_head_is_padded_and_cut_after_its_global_pooling(row, width):
    """squeezenet's head: 512 -> 1000 over 13x13, relu, global average pooling,
    flatten.  Where the tile model pads 1000 (see WHOLE), the convolution and relu
    stay padded and the slice comes after the pooling, which takes the padding; on
    NEON 1000 is 250 whole registers, with tiles of 2 (nothing to gain), on AVX2 125
    with tiles of 5 (40 x 2 as fast in the model as 1008 in 16 x 5)."""
    x = S.var("data")
    y = S.Activation(S.Convolution(x, kernel=(1, 1), num_filter=1000, name="conv10"),
                     act_type="relu")
    y = S.Flatten(S.Pooling(y, kernel=(13, 13), global_pool=True, pool_type="avg"))
    _func, widths, sliced = _layout(y, {"data": (1, 512, 13, 13)}, row)
    assert widths == {width}
    assert sliced == (["relax.mean"] if width != 1000 else [])


def test_narrow_pieces_issue_at_the_rows_narrow_rates():
    """Zen 4 splits a zmm FMA in two halves: one a cycle, but two ymm ones; a Xeon with
    two 512-bit FMA units issues two of either.  8 x 13 tiles (13 FMAs and 14 loads a
    step) thus take 7 cycles on both -- 104 / 7 lanes a cycle -- where the full-width
    count of vector operations (tile_rate) would say 14 cycles on Zen 4."""
    from mxc.backends.tvm.schedules.base.register_tile import lane_rate, tile_rate

    zen4, skx = MICROARCHS["znver4"], MICROARCHS["skylake-avx512"]
    assert zen4.ports(16) == (1, 1) and zen4.ports(8) == (2, 2) and zen4.ports(4) == (2, 2)
    assert skx.ports(16) == (2, 2) and skx.ports(8) == (2, 2)
    assert MICROARCHS["znver3"].ports(8) == (2, 2)          # whole registers on AVX2
    for row in (zen4, skx):
        assert lane_rate(8, 13, 169, row) == pytest.approx(8 * 13 / 7)
    assert tile_rate(8, 13, 169, zen4) == pytest.approx(13 / 14)
    # whole registers: 32 x 13 = 26 FMAs, 15 loads: 26 cycles on Zen 4, 13 on the Xeon
    assert lane_rate(32, 13, 169, zen4) == pytest.approx(16.0)
    assert lane_rate(32, 13, 169, skx) == pytest.approx(32.0)


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_padded_classifier_head_matches_the_reference(isa):
    """1000 classes padded (1024 on AVX-512; on AVX2 kept at 1000 in 40 x 2 tiles) through
    the relu and cut after the global pooling: the outputs are the reference's, inf
    inputs included."""
    x = S.var("data")
    y = S.Activation(S.Convolution(x, kernel=(1, 1), num_filter=1000, name="conv10"),
                     act_type="relu")
    sym = S.Flatten(S.Pooling(y, kernel=(13, 13), global_pool=True, pool_type="avg"))
    shapes = {"data": (1, 64, 13, 13)}
    params = _params(sym, shapes)
    model = mxc.compile(sym, params, shapes, target=_target(isa))
    data = np.random.RandomState(2).randn(*shapes["data"]).astype(np.float32)
    data[0, 5, 6, 7] = np.inf
    want = run_graph(sym.graph, {**params, "data": data})
    assert np.isfinite(want[0]).any() and not np.isfinite(want[0]).all()
    _compare(model.run({"data": data}), want)
