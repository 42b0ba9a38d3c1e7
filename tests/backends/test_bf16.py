"""bfloat16 convolution/dense kernels (``schedules/families/bf16.py``) and ``--precision``.

Oracle: numpy float64 products of the bfloat16-rounded operands (``ml_dtypes``'
round-to-nearest-even, independent of the kernel's own integer rounding):
the kernel accumulates those exact products in float32, so it must agree to
float32 accumulation error -- far tighter than the bf16 tolerance class
against the unrounded float32 reference, which is checked too.  Cases: odd
input channels (padding to pairs), output channels not a multiple of 16,
stride and padding, a fused epilogue, a dense layer.  Targets this CPU cannot
run (Sapphire Rapids) are compiled and their assembly checked for
``vdpbf16ps``; CPUs without bfloat16 dot products are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")
ml_dtypes = pytest.importorskip("ml_dtypes")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import mxc  # noqa: E402
from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.precision import BF16_TOLERANCE, check_request, range_error  # noqa: E402
from mxc.backends.tvm.schedules.families import bf16  # noqa: E402
from mxc.backends.tvm.targets import missing_on_host  # noqa: E402
from mxc.errors import BackendError  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

ZEN4 = "llvm -mcpu=znver4"
SPR = "llvm -mcpu=sapphirerapids"
#: AVX512-BF16 without AMX (an Intel Xeon whose every bf16 layer is a vector kernel)
CPX = "llvm -mcpu=cooperlake"
NO_BF16 = ("llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512", "llvm -mcpu=znver3")


def _runnable(text: str) -> str:
    missing = missing_on_host(resolve_target(text))
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} for {text}")
    return text


def _round(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _conv_module(x_shape, w_oihw, stride, pad, epilogue=True):
    """``relu(conv2d(x, w) + 0.5)``: the epilogue stays fused, in float32 (or the bare
    convolution)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w_oihw), strides=stride, padding=pad))
            if epilogue:
                y = bb.emit(relax.op.nn.relu(relax.op.add(y, relax.const(np.float32(0.5)))))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    return bb.get()


def _dense_module(x_shape, w_ck):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(bb.emit(relax.op.matmul(x, relax.const(w_ck))))
        bb.emit_func_output(y)
    return bb.get()


def _ref_conv(x, w, stride, pad, relu=True):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for dy in range(kh):
        for dx in range(kw):
            win = xp[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", win, w[:, :, dy, dx])
    return np.maximum(out + 0.5, 0) if relu else out


def _build(mod, target, stats=None, winograd=None):
    from mxc.backends.tvm.build_context import build_context
    ctx = build_context(resolve_target(target), precision="bf16", winograd=winograd)
    exe = build_module(mod, target, stats=stats, ctx=ctx)
    return exe, ctx.records.precision


def _asm(exe) -> str:
    return "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports if m.kind == "llvm")


CONVS = {   # c, k, side, kernel, stride, pad
    "3x3-c30-k40": (30, 40, 14, 3, 1, 1),
    "5x5-s2-c15": (15, 32, 20, 5, 2, 2),
    "1x1-c64-k48": (64, 48, 7, 1, 1, 0),
    # a network's 3-channel input: NCHW data read in place by the rounding copy
    "7x7-s2-c3-stem": (3, 64, 30, 7, 2, 3),
    # 29x29 = 841 pixels: the cost model's best tile (64 x 5) leaves a partial block,
    # whose predicate made the tensorize fail (inceptionv3's 71x71 layer ran scalar)
    "3x3-c32-k64-29x29": (32, 64, 29, 3, 1, 1),
    # thin layers (squeezenet1.1's fire modules, mobilenetv2's 1x1 layers): bfloat16
    # since it measured faster there (bf16.MIN_REDUCTION, bf16.MIN_CHANNELS)
    "1x1-c32-k128": (32, 128, 14, 1, 1, 0),
    "1x1-c128-k16": (128, 16, 13, 1, 1, 0),
    "1x1-c144-k24": (144, 24, 12, 1, 1, 0),
}


def test_dot_kernels_take_register_blocks_that_divide_the_pixels():
    from mxc.backends.tvm.schedules.base.microarch import MICROARCHS
    from mxc.backends.tvm.schedules.base.register_tile import tile_shape
    for row in ("znver4", "sapphirerapids"):
        info = MICROARCHS[row]
        assert 841 % tile_shape(64, 841, info)[1]             # float32: partial allowed
        nc, rw = tile_shape(64, 841, info, exact=True)
        assert 841 % rw == 0 and nc % 16 == 0
        assert tile_shape(192, 71 * 71, info, exact=True)[1] in (1, 71)


@pytest.mark.parametrize("case", list(CONVS))
def test_bf16_conv_matches_rounded_product(case):
    c, k, side, kern, stride, pad = CONVS[case]
    rng = np.random.RandomState(1)
    x = rng.randn(1, c, side, side).astype("float32")
    w = rng.randn(k, c, kern, kern).astype("float32")
    stats = {}
    exe, record = _build(_conv_module(x.shape, w, (stride, stride), (pad, pad)),
                         _runnable(ZEN4), stats, winograd="off")   # the direct kernels
    assert record["kernels"] == 1
    assert "bf16" in stats.values(), stats          # the vdpbf16ps schedule, not a fallback
    y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    want = _ref_conv(_round(x), _round(w), stride, pad)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
    exact = _ref_conv(x.astype(np.float64), w.astype(np.float64), stride, pad)
    assert range_error(y, exact) <= BF16_TOLERANCE


def test_bf16_dense_matches_rounded_product():
    rng = np.random.RandomState(2)
    x, w = rng.randn(3, 70).astype("float32"), rng.randn(70, 40).astype("float32")
    exe, record = _build(_dense_module(x.shape, w), _runnable(ZEN4))
    assert record["kernels"] == 1
    y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    want = _round(x) @ _round(w)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("target", [ZEN4, SPR])
def test_bf16_assembly_has_the_dot_instruction(target):
    w = np.random.RandomState(3).randn(32, 16, 3, 3).astype("float32")   # 144 x 32: bf16
    exe, _ = _build(_conv_module((1, 16, 8, 8), w, (1, 1), (1, 1)), target,
                    winograd="off")                                  # the direct kernel
    assert "vdpbf16ps" in _asm(exe)
    exe32 = build_module(_conv_module((1, 16, 8, 8), w, (1, 1), (1, 1)), target)
    assert "vdpbf16ps" not in _asm(exe32)     # fp32 (the default) never rounds


@pytest.mark.parametrize("target", [ZEN4, CPX])
def test_thin_layers_compile_to_the_dot_instruction(target):
    """A 32 -> 128 and a 128 -> 16 1x1 layer (squeezenet1.1's fire modules) build the
    ``vdpbf16ps`` kernel on Zen 4 and on Cooper Lake (AVX512-BF16 without AMX)."""
    rng = np.random.RandomState(9)
    for c, k in ((32, 128), (128, 16)):
        w = rng.randn(k, c, 1, 1).astype("float32")
        stats = {}
        exe, record = _build(_conv_module((1, c, 13, 13), w, (1, 1), (0, 0)), target, stats)
        assert record["kernels"] == 1 and "bf16" in stats.values(), (c, k, stats)
        assert "vdpbf16ps" in _asm(exe), (c, k)


@pytest.mark.parametrize("target", [ZEN4, CPX])
def test_one_vector_tiles_fold_the_broadcast_into_the_instruction(target):
    """80 output channels over 13x13 pixels: a 16-channel x 13-pixel register tile, whose
    broadcast pairs are each used once -- folded into ``vdpbf16ps`` as an embedded
    broadcast (``{1to16}``), not loaded by a ``vbroadcastss`` apiece.  A 64-channel tile
    shares each broadcast among four instructions from a register."""
    rng = np.random.RandomState(8)
    one = _asm(_build(_conv_module((1, 64, 13, 13), rng.randn(80, 64, 1, 1).astype("float32"),
                                   (1, 1), (0, 0)), target)[0])
    dots = [ln for ln in one.splitlines() if "vdpbf16ps" in ln]
    assert dots and all("{1to16}" in ln for ln in dots), dots[:4]
    four = _asm(_build(_conv_module((1, 64, 28, 28), rng.randn(64, 64, 3, 3).astype("float32"),
                                    (1, 1), (1, 1)), target, winograd="off")[0])
    assert "vdpbf16ps" in four and "{1to16}" not in four and "vbroadcastss" in four


@pytest.mark.parametrize("target", NO_BF16)
def test_bf16_refused_without_bf16_dot_products(target):
    with pytest.raises(BackendError, match="neither AVX512-BF16 nor AMX-BF16"):
        check_request("bf16", resolve_target(target))


def test_precision_choice_is_checked():
    with pytest.raises(BackendError, match="precision must be one of"):
        mxc.backends.tvm.options.CompileOptions(precision="fp16")


def _mlp():
    data = mxc.sym.var("data")
    net = mxc.sym.FullyConnected(data, num_hidden=64, name="fc1")
    net = mxc.sym.Activation(net, act_type="relu")
    net = mxc.sym.FullyConnected(net, num_hidden=32, name="fc2")
    rng = np.random.RandomState(4)
    params = {"fc1_weight": rng.randn(64, 80).astype("float32"),
              "fc1_bias": rng.randn(64).astype("float32"),
              "fc2_weight": rng.randn(32, 64).astype("float32"),
              "fc2_bias": rng.randn(32).astype("float32")}
    return net, params


def test_compile_precision_bf16_manifest_and_outputs():
    _runnable(ZEN4)
    net, params = _mlp()
    x = np.random.RandomState(5).randn(2, 80).astype("float32")
    m = mxc.compile(net, params, {"data": x.shape}, target=ZEN4, precision="bf16")
    assert m.manifest["precision"] == {"mode": "bf16", "kernels": 2}
    h = np.maximum(_round(x) @ _round(params["fc1_weight"].T) + params["fc1_bias"], 0)
    want = _round(h) @ _round(params["fc2_weight"].T) + params["fc2_bias"]
    np.testing.assert_allclose(m.run({"data": x})[0], want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())


def test_compile_precision_bf16_refused_for_haswell():
    net, params = _mlp()
    with pytest.raises(BackendError, match="haswell has neither"):
        mxc.compile(net, params, {"data": (1, 80)}, target="llvm -mcpu=haswell",
                    precision="bf16")


def test_precision_auto_reports_its_check():
    _runnable(ZEN4)
    net, params = _mlp()
    m = mxc.compile(net, params, {"data": (1, 80)}, target=ZEN4, precision="auto")
    prec = m.manifest["precision"]
    assert prec["requested"] == "auto"
    assert prec["check"]["passed"] == (prec["check"]["max_error"] <= BF16_TOLERANCE)
    assert prec["mode"] == ("bf16" if prec["check"]["passed"] else "fp32")
    fallback = mxc.compile(net, params, {"data": (1, 80)}, target="llvm -mcpu=haswell",
                           precision="auto")
    assert fallback.manifest["precision"]["mode"] == "fp32"


def test_small_layers_stay_float32():
    """16 input channels of a 1x1 layer (a reduction of 16), 8 outputs, or a thin layer
    whose outputs end in a partial 16-lane vector (32 -> 72): float32 kernels."""
    for c, k in ((16, 48), (48, 8), (32, 72)):
        w = np.random.RandomState(6).randn(k, c, 1, 1).astype("float32")
        _, record = _build(_conv_module((1, c, 8, 8), w, (1, 1), (0, 0)), ZEN4)
        assert record["kernels"] == 0, (c, k)
    assert bf16.worth_it(32, 16) and not bf16.worth_it(31, 16) and not bf16.worth_it(32, 15)
    # a partial last vector: only with a reduction that hides its predicated epilogue
    assert not bf16.worth_it(63, 72) and bf16.worth_it(64, 72) and bf16.worth_it(32, 80)


def test_precision_auto_keeps_fp32_when_the_check_fails(monkeypatch):
    """A class no bfloat16 result can meet: auto must fall back to the float32 build."""
    from mxc.backends.tvm import precision
    _runnable(ZEN4)
    monkeypatch.setattr(precision, "BF16_TOLERANCE", 1e-12)
    net, params = _mlp()
    x = np.random.RandomState(7).randn(1, 80).astype("float32")
    m = mxc.compile(net, params, {"data": (1, 80)}, target=ZEN4, precision="auto",
                    check_inputs={"data": x})
    prec = m.manifest["precision"]
    assert prec["mode"] == "fp32" and prec["kernels"] == 0
    assert prec["check"]["passed"] is False and prec["check"]["inputs"] == "given"
    assert prec["check"]["max_error"] > 1e-12


def test_bf16_rounding_keeps_nan_and_inf():
    """The kernel's own float32 -> bfloat16 rounding (integer arithmetic) on the specials:
    a NaN input stays NaN where it reaches, an infinity stays infinite."""
    rng = np.random.RandomState(8)
    x = rng.randn(1, 32, 6, 6).astype("float32")
    x[0, 0, 1, 1], x[0, 5, 4, 4] = np.nan, np.inf
    w = np.abs(rng.randn(32, 32, 3, 3)).astype("float32")   # no inf * 0 or inf - inf
    exe, record = _build(_conv_module(x.shape, w, (1, 1), (1, 1), epilogue=False),
                         _runnable(ZEN4))
    assert record["kernels"] == 1
    y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    with np.errstate(invalid="ignore"):
        want = _ref_conv(_round(x), _round(w), 1, 1, relu=False)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(want))
    assert np.isnan(y).any() and np.isinf(y).any()


def _chain_module(x_shape, w1, w2, residual: bool):
    """``relu(conv(h, w2) + 0.5)`` of ``h = relu(conv(x, w1) + 0.5)``; *residual*: ``h``
    is also added to the result (a second reader of ``h``)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    half = relax.const(np.float32(0.5))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.nn.conv2d(x, relax.const(w1)),
                                                      half)))
            y = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.nn.conv2d(h, relax.const(w2)),
                                                      half)))
            if residual:
                y = bb.emit(relax.op.add(y, h))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    return bb.get()


@pytest.mark.parametrize("target", [ZEN4, CPX])
@pytest.mark.parametrize("residual", [False, True])
def test_single_reader_inputs_are_rounded_by_their_producer(residual, target):
    """A bf16 layer whose input has no other reader gets it in bfloat16 from the producer's
    kernel (``round_bf16`` fused into its epilogue: half the bytes written and read);
    with a second reader (a residual add) the producer keeps writing float32 and the
    layer rounds its own copy.  The outputs are the rounded products either way."""
    rng = np.random.RandomState(10)
    x = rng.randn(1, 32, 10, 10).astype("float32")
    w1 = rng.randn(32, 32, 1, 1).astype("float32")
    w2 = rng.randn(32, 32, 1, 1).astype("float32")
    stats = {}
    exe, record = _build(_chain_module(x.shape, w1, w2, residual), target, stats)
    assert record["kernels"] == 2
    rounded = [k for k in stats if "round_bf16" in k]
    # fused into the producers (the input's transpose; the first layer unless it is read
    # twice), never a kernel of its own
    assert rounded and all(k.startswith("fused_") for k in rounded), stats
    assert any("conv2d_nhwc_bf16" in k for k in rounded) != residual, rounded
    if missing_on_host(resolve_target(target)):
        return                                   # compiled, not runnable here
    y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    h = _ref_conv(_round(x), _round(w1), 1, 0)
    want = _ref_conv(_round(h), _round(w2), 1, 0) + (h if residual else 0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
