"""AMX tile kernels (``mxc/backends/tvm/schedules/base/amx.py``, ``bf16_amx.py``, ``int8_amx.py``).

No machine this was written on has AMX, so the oracles are two:

* **emulation** (``MXC_EMULATE_AMX=1``): each tile step is built as scalar loops
  with the instruction's definition, the same function with the same pointers
  and byte strides; everything around it -- packing, tiling, strides, fused
  epilogues -- runs on this CPU for a target that has this CPU's features plus
  AMX, and is compared with numpy: float64 products of the bfloat16-rounded
  operands (bf16; float32 accumulation error) and the exact int64 product (int8).
  The emulation itself is checked against the instruction's definition written
  independently in numpy (``dense_kernel``).
* **assembly** for ``-mcpu=sapphirerapids`` (what emulation cannot run): the tile
  configuration LLVM writes (``ldtilecfg``), the tile instructions, the release.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tvm")
ml_dtypes = pytest.importorskip("ml_dtypes")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.build_context import build_context  # noqa: E402
from mxc.backends.tvm.schedules.base import amx  # noqa: E402
from test_bf16 import _conv_module as _bf16_conv, _dense_module as _bf16_dense  # noqa: E402
from test_bf16 import _ref_conv, _round  # noqa: E402
from test_int8_vnni import _conv_module as _int8_conv, _conv_reference  # noqa: E402
from test_int8_vnni import _dense_module as _int8_dense  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

SPR = "llvm -mcpu=sapphirerapids"


def _asm_of(exe) -> str:
    return "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports if m.kind == "llvm")


def _count(asm: str, ins: str) -> int:
    return len(re.findall(rf"\t{ins}\b", asm))


def _functions_using(asm: str, ins: str) -> set[str]:
    """The assembly's functions (labels not ``.L``-local) with instruction *ins*."""
    found, func = set(), None
    for line in asm.splitlines():
        label = re.match(r"^([\w.$]+):", line)
        if label and not label.group(1).startswith(".L"):
            func = label.group(1)
        if re.search(rf"\t{ins}\b", line):
            found.add(func)
    return found


@pytest.fixture
def emulated(amx_emulated):
    return amx_emulated


@pytest.fixture
def int8_emulated(amx_int8_emulated):
    return amx_int8_emulated


def _run(mod, target, x, precision="fp32", stats=None, winograd=None):
    ctx = build_context(target, precision=precision, winograd=winograd)
    exe = build_module(mod, target, stats=stats, ctx=ctx)
    out = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    return out, ctx.records.precision


# ---------------------------------------------------------------------------
# the emulation against the instruction's definition
# ---------------------------------------------------------------------------
def _instruction(kind, a, b_packed):
    """numpy: ``C[m, n] = sum_k A[m, g*k + j] * B[n/16][k][16 * g ... ]`` per the ISA's
    pseudo-code: A row-major, B packed ``[n/16, k/g, 16*g]`` (lane-major groups of g)."""
    g = amx.OPERANDS[kind][3]
    blocks, steps, _ = b_packed.shape
    b = b_packed.reshape(blocks, steps, 16, g).transpose(1, 3, 0, 2).reshape(steps * g, -1)
    if kind == "tdpbusd":
        return a.astype(np.int64) @ b.astype(np.int64)
    widen = lambda v: v.view(ml_dtypes.bfloat16).astype(np.float64)   # noqa: E731
    return widen(a) @ widen(b)


@pytest.mark.parametrize("kind", list(amx.KINDS))
def test_emulated_tile_steps_follow_the_instructions_definition(kind):
    depth, (a_type, b_type, acc, g) = amx.KINDS[kind][2], amx.OPERANDS[kind]
    m, n, k = 32, 48, 2 * depth
    rng = np.random.default_rng(0)
    if kind == "tdpbusd":
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(-128, 128, (n // 16, k // g, 16 * g)).astype(np.int8)
    else:
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16).view(np.uint16)
        b = rng.standard_normal((n // 16, k // g, 16 * g)).astype(ml_dtypes.bfloat16) \
            .view(np.uint16)
    kernel = amx.dense_kernel(kind, m, n, k, emulate=True)   # as MXC_EMULATE_AMX=1 builds
    func = tvm.tirx.build(tvm.IRModule({"main": kernel}),
                          target=resolve_target("llvm"))
    out = tvm.runtime.tensor(np.zeros((m, n), acc))
    func(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    want = _instruction(kind, a, b)
    if kind == "tdpbusd":
        np.testing.assert_array_equal(out.numpy(), want)
    else:
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-5 * np.abs(want).max())


# ---------------------------------------------------------------------------
# bfloat16 on tiles (emulated)
# ---------------------------------------------------------------------------
BF16_CONVS = {   # c, k, side, kernel, pad: stride 1, >= 32 input channels, 16-channel blocks
    "3x3-c48-k64-14x14": (48, 64, 14, 3, 1),        # channels padded 48 -> 64, rows of 14
    "1x1-c64-k48-8x8": (64, 48, 8, 1, 0),
    "3x3-c32-k32-20x20": (32, 32, 20, 3, 1),        # tiles of 10 rows, two per image row
    # stride 2: the input split by column phase (amx.phase_split); odd padded width 17
    "3x3-s2-c64-k32-15x15": (64, 32, 15, 3, 1, 2),
    "1x1-s2-c64-k64-14x14": (64, 64, 14, 1, 0, 2),
}


@pytest.mark.parametrize("case", list(BF16_CONVS))
def test_bf16_conv_on_emulated_tiles_matches_the_rounded_product(case, emulated):
    c, k, side, kern, pad, *stride = BF16_CONVS[case]
    stride = stride[0] if stride else 1
    rng = np.random.RandomState(2)
    x = rng.randn(1, c, side, side).astype("float32")
    w = rng.randn(k, c, kern, kern).astype("float32")
    stats = {}
    y, record = _run(_bf16_conv(x.shape, w, (stride, stride), (pad, pad)), emulated, x, "bf16",
                     stats)
    assert record["kernels"] == 1 and record["tile_kernels"] == 1
    assert "bf16_amx" in stats.values(), stats
    want = _ref_conv(_round(x), _round(w), stride, pad)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


def test_bf16_dense_on_emulated_tiles(emulated):
    rng = np.random.RandomState(3)
    x, w = rng.randn(8, 96).astype("float32"), rng.randn(96, 48).astype("float32")
    stats = {}
    y, record = _run(_bf16_dense(x.shape, w), emulated, x, "bf16", stats)
    assert record["tile_kernels"] == 1 and "bf16_amx" in stats.values(), stats
    want = _round(x) @ _round(w)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("shape,stride", [
    ((1, 64, 14, 14), 3),     # stride 3: no phase split for it
    ((1, 16, 14, 14), 1),     # 16 input channels: padding to a tile row doubles the work
    ((1, 64, 3, 3), 1),       # rows of 3 pixels
])
def test_layers_tiles_do_not_fit_keep_the_vector_kernel(shape, stride, emulated):
    rng = np.random.RandomState(4)
    x = rng.randn(*shape).astype("float32")
    w = rng.randn(32, shape[1], 3, 3).astype("float32")
    stats = {}
    y, record = _run(_bf16_conv(x.shape, w, (stride, stride), (1, 1)), emulated, x, "bf16",
                     stats, winograd="off")          # the direct vector kernel's oracle
    assert record["kernels"] == 1 and not record.get("tile_kernels")
    assert "bf16_amx" not in stats.values(), stats
    want = _ref_conv(_round(x), _round(w), stride, 1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


# ---------------------------------------------------------------------------
# int8 on tiles (emulated): exact
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("xdt,c,side,kern,pad,stride", [
    ("uint8", 64, 14, 3, 1, 1),
    ("int8", 96, 8, 3, 1, 1),          # the +128 shift; 96 channels padded to 128
    ("uint8", 128, 7, 1, 0, 1),
    ("int8", 64, 15, 3, 1, 2),         # stride 2 by column phase, the shifted padding
    ("uint8", 64, 16, 1, 0, 2)])       # a 1x1 downsample: no padding, yet split
def test_int8_conv_on_emulated_tiles_is_exact(xdt, c, side, kern, pad, stride, int8_emulated):
    rng = np.random.RandomState(5)
    info = np.iinfo(xdt)
    x = rng.randint(info.min, info.max + 1, (1, c, side, side)).astype(xdt)
    w = rng.randint(-128, 128, (32, c, kern, kern)).astype(np.int8)
    stats = {}
    y, _ = _run(_int8_conv(x.shape, xdt, w, (stride, stride), (pad, pad)), int8_emulated, x,
                stats=stats)
    assert "int8_amx" in stats.values(), stats
    np.testing.assert_array_equal(y, _conv_reference(x, w, stride, pad))


@pytest.mark.parametrize("c", [64, 66 * 64])   # 66 tile rows x 2 blocks: 3 calls of 22 steps
def test_int8_dense_on_emulated_tiles_is_exact(c, int8_emulated):
    assert amx.tile_blocks(32) == 2
    assert amx.tile_steps("tdpbusd", c, 2) == (1 if c == 64 else 22)
    rng = np.random.RandomState(6)
    x = rng.randint(-128, 128, (16, c)).astype(np.int8)
    w = rng.randint(-128, 128, (c, 32)).astype(np.int8)
    stats = {}
    y, _ = _run(_int8_dense(x.shape, "int8", w), int8_emulated, x, stats=stats)
    assert "int8_amx" in stats.values(), stats
    np.testing.assert_array_equal(y, x.astype(np.int64) @ w.astype(np.int64))


# ---------------------------------------------------------------------------
# the real instructions, in the assembly
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(amx.KINDS))
def test_amx_dense_assembly_on_sapphirerapids(kind):
    depth = amx.KINDS[kind][2]
    func = amx.dense_kernel(kind, 32, 48, 2 * depth)
    asm = tvm.tirx.build(tvm.IRModule({"main": func}),
                         target=resolve_target(SPR)).inspect_source("asm")
    assert _count(asm, kind) == 2 * 3 * 2        # one per 16x16 block and step
    assert "ldtilecfg" in asm and "tilerelease" in asm
    # the accumulator loaded and stored once per block, across its two steps
    assert _count(asm, "tileloadd") == 2 * 3 * (1 + 2 * 2)
    assert _count(asm, "tilestored") == 2 * 3


def test_sapphirerapids_convolutions_run_on_tiles_and_other_cpus_do_not():
    rng = np.random.RandomState(7)
    w = rng.randn(64, 48, 3, 3).astype("float32")
    bf16_mod = _bf16_conv((1, 48, 14, 14), w, (1, 1), (1, 1))
    int8_mod = _int8_conv((1, 64, 14, 14), "uint8", rng.randint(-128, 128, (32, 64, 3, 3))
                          .astype(np.int8), (1, 1), (1, 1))
    strided = _bf16_conv((1, 64, 14, 14), rng.randn(32, 64, 3, 3).astype("float32"), (2, 2),
                         (1, 1))
    for mod, precision, kind, out in ((bf16_mod, "bf16", "tdpbf16ps", 64),
                                      (int8_mod, "fp32", "tdpbusd", 32),
                                      (strided, "bf16", "tdpbf16ps", 32)):
        target = resolve_target(SPR)
        asm = _asm_of(build_module(mod, target, ctx=build_context(target, precision=precision)))
        products, stores = _count(asm, kind), _count(asm, "tilestored")
        assert products and "ldtilecfg" in asm and "tilerelease" in asm, kind
        # each thread configures its own tiles: the configuration and release are in the
        # parallel body that runs the products (TVM's ``*_compute_`` closure)
        users = _functions_using(asm, kind)
        assert users == _functions_using(asm, "ldtilecfg") == _functions_using(asm, "tilerelease")
        assert all(f.endswith("_compute_") for f in users), users
        # 64 input channels: two bf16 steps (48 padded) per accumulator load and store;
        # a call's blocks share each step's A tile
        steps, blocks = 64 // amx.tile_channels(kind), amx.tile_blocks(out)
        assert stores * steps == products and blocks > 1
        assert _count(asm, "tileloadd") == stores + products + products // blocks
        for other in ("llvm -mcpu=cooperlake", "llvm -mcpu=znver4"):   # BF16/VNNI, no AMX
            target = resolve_target(other)
            asm = _asm_of(build_module(mod, target,
                                       ctx=build_context(target, precision=precision)))
            assert "tileloadd" not in asm and not _count(asm, kind), other


def test_an_emulated_build_says_so_and_needs_no_amx(emulated):
    from mxc.backends.tvm.manifest import target_info
    from mxc.cli.inspect_cmd import cpu_needs_line
    # the options' emulate_amx (MXC_EMULATE_AMX=1 read when they were made), not the
    # environment at manifest time: the manifest says what the build did
    assert "emulated" not in target_info(emulated)["host"]
    host = target_info(emulated, emulate_amx=True)["host"]
    assert {"amx-tile", "amx-bf16", "amx-int8"} <= set(host["emulated"])
    assert not any(f.startswith("amx") for f in host["features"])
    assert "emulated: amx-bf16, amx-int8, amx-tile" in cpu_needs_line(host)
    assert "this CPU has them" in cpu_needs_line(host)
