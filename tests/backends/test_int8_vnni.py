"""INT8 convolution/dense kernels on VNNI (``mxc/backends/tvm/schedules/families/int8.py``) and their fallback.

Oracle: the exact integer product (numpy int64) of the same codes -- an int8
convolution accumulating in int32 has one right answer, so every comparison
is exact.  The cases reach each path of the kernel: uint8 data, int8 data
(the +128 shift and its compensation, padding read as the shifted zero),
input channels not a multiple of 4, output channels not a multiple of the
register, a thin layer's kernel rows folded into 4-byte groups, strides,
a dense layer, and the extreme codes (no saturation
anywhere: ``vpdpbusd`` accumulates, it does not saturate).  The same cases
run for a target with AVX512-VNNI (this CPU, where it has it), AVX2 only and
AVX-512 without VNNI (the AVX2 kernels, ``test_int8_avx2.py`` checks them under
saturating weights) and SSE only (the plain int32 fallback); targets this CPU
cannot run (Sapphire Rapids, Alder Lake's AVX-VNNI) are compiled and their
assembly checked.  The int8 corpus models are checked on the int32 fallback
here (their VNNI build is the default target of ``tests/models``, their AVX2
build ``test_int8_avx2.py``'s).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import mxc  # noqa: E402
from conftest import require_corpus  # noqa: E402
from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.schedules.base.microarch import int8_dot  # noqa: E402
from mxc.backends.tvm.targets import missing_on_host  # noqa: E402
from oracle import assert_close  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

VNNI = "llvm"                                   # this CPU (the VNNI path where it has VNNI)
#: targets without VNNI: the AVX2 kernels (vpmaddubsw / vpmaddwd), and SSE's plain int32
FALLBACKS = {"avx2": "llvm -mcpu=haswell", "avx512-no-vnni": "llvm -mcpu=skylake-avx512",
             "int32": "llvm -mcpu=nehalem"}

#: (data dtype, C, K, H=W, kernel, stride, pad)
CONVS = {
    "u8-3x3": ("uint8", 32, 64, 14, 3, 1, 1),
    "s8-7x7-s2-c3": ("int8", 3, 32, 20, 7, 2, 3),
    "u8-1x1-s2-c30-k40": ("uint8", 30, 40, 7, 1, 2, 0),
    "s8-3x3-k24": ("int8", 64, 24, 6, 3, 1, 1),
    "u8-5x5-c6": ("uint8", 6, 16, 9, 5, 1, 2),       # kernel rows folded: 30 taps -> 32
}


def _runnable(text: str) -> str:
    missing = missing_on_host(resolve_target(text))
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} for {text}")
    return text


def _conv_module(x_shape, x_dtype, w, stride, pad, plus=3):
    """``conv2d(x, w) + plus`` (a fused epilogue); ``plus=None``: the bare convolution."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, x_dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w, "int8"), strides=stride,
                                           padding=pad, out_dtype="int32",
                                           data_layout="NHWC" if plus is None else "NCHW",
                                           kernel_layout="HWIO" if plus is None else "OIHW"))
            if plus is not None:
                y = bb.emit(relax.op.add(y, relax.const(np.int32(plus))))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    return bb.get()


def _dense_module(x_shape, x_dtype, w_ck):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(x_shape, x_dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(bb.emit(relax.op.matmul(x, relax.const(w_ck, "int8"),
                                                       out_dtype="int32")))
        bb.emit_func_output(y)
    return bb.get()


def _conv_reference(x, w, stride, pad):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, k, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.int64))
    return out + 3


def _codes(rng, dtype, shape, extreme=False):
    info = np.iinfo(dtype)
    if extreme:   # the largest |products|: every sum at its int32 extreme for this size
        return np.full(shape, info.min if dtype == "int8" else info.max, dtype=dtype)
    return rng.randint(info.min, info.max + 1, shape).astype(dtype)


def _run(mod, target, x, stats=None):
    exe = build_module(mod, target, stats=stats)
    return relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


def _asm(mod, target) -> str:
    exe = build_module(mod, target)
    return "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports
                     if m.kind == "llvm")


def _targets():
    return {"vnni": VNNI, **FALLBACKS}


@pytest.mark.parametrize("kind", list(_targets()))
@pytest.mark.parametrize("case", list(CONVS))
def test_int8_conv_is_the_exact_integer_product(case, kind):
    target = _runnable(_targets()[kind])
    xdt, c, k, hw, ks, stride, pad = CONVS[case]
    rng = np.random.RandomState(list(CONVS).index(case))
    x = _codes(rng, xdt, (1, c, hw, hw))
    w = _codes(rng, "int8", (k, c, ks, ks))
    stats: dict = {}
    got = _run(_conv_module(x.shape, xdt, w, stride, pad), target, x, stats)
    np.testing.assert_array_equal(got, _conv_reference(x, w, stride, pad))
    dot = bool(int8_dot(resolve_target(target)))
    assert ("int8" in stats.values()) == dot, stats


@pytest.mark.parametrize("kind", list(_targets()))
@pytest.mark.parametrize("xdt", ["uint8", "int8"])
def test_int8_extreme_codes_do_not_saturate(xdt, kind):
    target = _runnable(_targets()[kind])
    rng = np.random.RandomState(0)
    x = _codes(rng, xdt, (1, 64, 5, 5), extreme=True)
    w = np.full((32, 64, 3, 3), -128, dtype=np.int8)
    got = _run(_conv_module(x.shape, xdt, w, 1, 1), target, x)
    np.testing.assert_array_equal(got, _conv_reference(x, w, 1, 1))


@pytest.mark.parametrize("kind", list(_targets()))
def test_int8_conv_with_nothing_fused_writes_its_output_directly(kind):
    """Channels-last in and out, no epilogue: the kernel's own block writes the result."""
    target = _runnable(_targets()[kind])
    rng = np.random.RandomState(7)
    x = _codes(rng, "uint8", (1, 9, 9, 16))                 # NHWC
    w = _codes(rng, "int8", (3, 3, 16, 32))                 # HWIO
    got = _run(_conv_module(x.shape, "uint8", w, 1, 1, plus=None), target, x)
    want = _conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), 1, 1) - 3
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("kind", list(_targets()))
@pytest.mark.parametrize("xdt", ["uint8", "int8"])
def test_int8_dense_is_the_exact_integer_product(xdt, kind):
    target = _runnable(_targets()[kind])
    rng = np.random.RandomState(1)
    x = _codes(rng, xdt, (2, 100))
    w = _codes(rng, "int8", (100, 1000))
    got = _run(_dense_module(x.shape, xdt, w), target, x)
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))


def test_vnni_build_uses_vpdpbusd_and_the_fallback_does_not():
    if int8_dot(resolve_target(VNNI)) not in ("avx512vnni", "avxvnni"):   # "avx2": no VNNI
        pytest.skip("this CPU has no VNNI")
    xdt, c, k, hw, ks, stride, pad = CONVS["s8-3x3-k24"]
    w = np.ones((k, c, ks, ks), dtype=np.int8)
    mod = _conv_module((1, c, hw, hw), xdt, w, stride, pad)
    assert "vpdpbusd" in _asm(mod, VNNI)
    assert "vpdpbusd" not in _asm(mod, FALLBACKS["avx2"])


@pytest.mark.parametrize("cpu,register", [("znver4", "%zmm"), ("sapphirerapids", "%zmm"),
                                          ("alderlake", "%ymm")])
def test_vnni_targets_compile_to_vpdpbusd(cpu, register):
    """AVX512-VNNI (zmm) on Zen 4 and a Xeon, AVX-VNNI (ymm, VEX) on Alder Lake: compiled
    whatever this CPU is (run by the tests above where it has VNNI).

    (Sapphire Rapids takes AMX tiles where they fit: tests/backends/test_amx.py.)"""
    target = f"llvm -mcpu={cpu}"
    assert int8_dot(resolve_target(target)) == ("avxvnni" if cpu == "alderlake" else "avx512vnni")
    xdt, c, k, hw, ks, stride, pad = CONVS["u8-3x3"]
    w = np.ones((k, c, ks, ks), dtype=np.int8)
    lines = [ln for ln in _asm(_conv_module((1, c, hw, hw), xdt, w, stride, pad), target)
             .splitlines() if "vpdpbusd" in ln]
    assert lines and all(register in ln for ln in lines), lines[:3]


INT8_MODELS = ["int8_resnet18_v1_w0.5_mkldnn", "int8_resnet18_v1_classic",
               "int8_mobilenet0.5_nocalib"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_corpus_model_on_the_int32_fallback_matches_mxnet(name):
    check_int8_corpus_model(name, _runnable(FALLBACKS["int32"]))


def check_int8_corpus_model(name: str, target) -> None:
    """Compile the wave-2 INT8 model *name* for *target*; its outputs are MXNet's to the
    model's tolerance (the int32 accumulators are exact, the float epilogues may differ)."""
    root = require_corpus("wave2/models") / name
    meta = json.loads((root / "meta.json").read_text())
    params = mxc.nd.load(root / "model.params")
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    model = mxc.compile(mxc.sym.load(root / "symbol.json"), (args, aux),
                        shapes={k: v.shape for k, v in feeds.items()}, target=target)
    for i, got in enumerate(model.session().run(feeds)):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i} ({target})")


# the oneDNN-fused and the classic graph (mobilenet's 1x1 layers are test_amx.py's 1x1 case)
@pytest.mark.corpus
@pytest.mark.parametrize("name", INT8_MODELS[:2])
def test_int8_corpus_model_on_emulated_amx_tiles_matches_mxnet(name, amx_emulated, caplog):
    """The AMX-INT8 build (tile steps emulated): convolutions on tiles, and MXNet's
    outputs to float32 rounding -- an int32 accumulation has one right answer, so only
    the float dequantization may differ in the last bits (the VNNI build's own margin)."""
    root = require_corpus("wave2/models") / name
    params = mxc.nd.load(root / "model.params")
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    with caplog.at_level("DEBUG", logger="mxc.backends.tvm.schedules.families.int8"):
        model = mxc.compile(mxc.sym.load(root / "symbol.json"), (args, aux),
                            shapes={k: v.shape for k, v in feeds.items()}, target=amx_emulated)
    assert any("conv2d_nhwc_int8_amx kernel" in r.getMessage() for r in caplog.records)
    for i, got in enumerate(model.session().run(feeds)):
        want = io[f"out__{i}"]
        np.testing.assert_allclose(np.asarray(got), want, rtol=0,
                                   atol=1e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.corpus
def test_every_int8_convolution_of_the_quantized_resnet_runs_on_vnni():
    """The oneDNN-quantized ResNet's convolutions and its dense layer all reach the VNNI
    kernel (none falls back silently to the int32 path)."""
    from mxc.backends.tvm import lower_model
    if not int8_dot(resolve_target(VNNI)):
        pytest.skip("this CPU has no VNNI")
    root = require_corpus("wave2/models") / "int8_resnet18_v1_w0.5_mkldnn"
    params = mxc.nd.load(root / "model.params")
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    lowered = lower_model(mxc.sym.load(root / "symbol.json"), (args, aux),
                          shapes={"data": (1, 3, 112, 112)})
    stats: dict = {}
    build_module(lowered.module, lowered.target, stats=stats)
    int8 = {name: rule for name, rule in stats.items() if "int8" in name}
    assert len(int8) >= 12 and set(int8.values()) == {"int8"}, int8
    assert not [name for name in stats if "conv2d" in name and "int8" not in name], stats


def test_tuning_builder_workers_can_replay_the_int8_schedules():
    """``mxc tune`` seeds the search with the default schedule's trace, which tensorizes
    with mxc's intrinsics: a fresh builder worker must have them registered."""
    import subprocess
    import sys
    code = ("from mxc.backends.tvm.tune.workers import builder_init; builder_init()\n"
            "from tvm import s_tir\n"
            "from mxc.backends.tvm.schedules.base.int8_steps import DOT_STEPS, dot_intrinsic_name\n"
            "print(all(s_tir.TensorIntrin.get(dot_intrinsic_name(f), allow_missing=True)\n"
            "          is not None for f in DOT_STEPS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr[-2000:]
