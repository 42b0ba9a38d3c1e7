"""INT8 and bfloat16 kernels on AArch64 dot products (``schedules/base/arm_*_step*.py``).

Issue 37 item 4: INT8 through ``sdot`` where the CPU has dotprod (Neoverse N1,
Cortex-A76/A78AE), ``usdot`` for uint8 data where it has i8mm (Neoverse V1/V2),
and the int32 path (``smlal``) on a Cortex-A72, which has neither;
``--precision bf16`` through ``bfdot`` where the CPU has bf16 (Neoverse V1/V2),
refused in ARM terms elsewhere.  bfloat16 results are checked against the float64
product within the bf16 class's tolerance (``range_error`` <= 2%, and not exact).

Oracles:

* the assembly LLVM generates for the kernels (no cross tools needed: TVM's own
  LLVM prints it), for the instruction each path must use and must not;
* the exact integer product (numpy int64) of the same codes, where the kernels
  are run: cross-linked with ``aarch64-linux-gnu-g++`` and run by mxc's runtime
  under ``qemu-aarch64-static -cpu max`` (which has dotprod and i8mm) in the arm64
  root ``tools/arm_root.py`` builds (``$MXC_ARM_ROOT``, else ``~/.cache/mxc/arm64-root``).
  Those tests skip, saying what is missing.  uint8
  data on ``sdot`` is shifted by -128 and corrected: the extreme codes (255, -128)
  are where a wrong correction would show.

Nothing depends on this machine's CPU.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.schedules.base.int8_steps import data_shift  # noqa: E402
from mxc.backends.tvm.schedules.base.microarch import cpu_info, int8_dot  # noqa: E402
from test_int8_vnni import _asm, _conv_module, _dense_module  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _target(cpu: str):
    return resolve_target(f"llvm -mtriple=aarch64-linux-gnu -mcpu={cpu}")


#: (data dtype, C, K, H=W, kernel, stride, pad): a 3x3, a thin 7x7 stem (rows folded),
#: a strided 1x1 with channels off the register, output channels not a multiple of 4
CONVS = {
    "u8-3x3": ("uint8", 32, 64, 10, 3, 1, 1),
    "s8-7x7-s2-c3": ("int8", 3, 32, 15, 7, 2, 3),
    "u8-1x1-s2-c30-k40": ("uint8", 30, 40, 7, 1, 2, 0),
    "s8-3x3-k22": ("int8", 16, 22, 6, 3, 1, 1),
}
#: (data dtype, M, C, N)
DENSES = {"u8-dense": ("uint8", 4, 64, 40), "s8-dense": ("int8", 3, 50, 10)}

#: the instruction each CPU's int8 kernels step with, per data dtype (None: int32 path)
STEPS = {"neoverse-n1": {"uint8": "sdot", "int8": "sdot"},
         "neoverse-v1": {"uint8": "usdot", "int8": "sdot"},
         "cortex-a72": {"uint8": None, "int8": None}}
DOT_OPS = ("sdot", "udot", "usdot", "smmla")


def _count(asm: str, op: str) -> int:
    return len(re.findall(rf"^\s+{op}\s+v\d+\.4s", asm, re.M))


def _weights(rng, shape, extreme):
    if extreme:          # all -128 / 127: the largest sums, and the correction's worst case
        return np.where(rng.rand(*shape) < 0.5, -128, 127).astype(np.int8)
    return rng.randint(-128, 128, shape).astype(np.int8)


def _codes(rng, dtype, shape, extreme):
    if extreme:          # uint8 255 is int8 127 after the -128 shift; int8 -128 stays put
        return np.full(shape, 255 if dtype == "uint8" else -128, dtype=dtype)
    info = np.iinfo(dtype)
    return rng.randint(info.min, info.max + 1, shape).astype(dtype)


def _conv_reference(x, w, stride, pad):
    n, h, wd, _ = x.shape
    kh, kw, _, k = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oh, ow, k), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nhwc,ck->nhwk", patch, w[i, j].astype(np.int64))
    return out


def _cases(extreme: bool):
    """(name, module, input, exact reference) of every conv and dense case."""
    out = []
    for seed, (name, (xdt, c, k, hw, ks, stride, pad)) in enumerate(CONVS.items()):
        rng = np.random.RandomState(seed)
        w = _weights(rng, (ks, ks, c, k), extreme)
        x = _codes(rng, xdt, (1, hw, hw, c), extreme)
        out.append((name, _conv_module(x.shape, xdt, w, stride, pad, plus=None), x,
                    _conv_reference(x, w, stride, pad)))
    for seed, (name, (xdt, m, c, n)) in enumerate(DENSES.items()):
        rng = np.random.RandomState(100 + seed)
        w = _weights(rng, (c, n), extreme)
        x = _codes(rng, xdt, (m, c), extreme)
        out.append((name, _dense_module(x.shape, xdt, w), x,
                    x.astype(np.int64) @ w.astype(np.int64)))
    return out


# ---------------------------------------------------------------------------
# the family each CPU gets
# ---------------------------------------------------------------------------
def test_dotprod_cpus_take_sdot_i8mm_cpus_usdot_and_the_others_the_int32_path():
    for cpu in ("neoverse-n1", "cortex-a76", "cortex-a78ae"):
        assert int8_dot(_target(cpu)) == "neon-dotprod", cpu
    for cpu in ("neoverse-v1", "neoverse-v2"):
        assert int8_dot(_target(cpu)) == "neon-i8mm", cpu
    for cpu in ("cortex-a72", "cortex-a53", "cortex-a57"):
        assert int8_dot(_target(cpu)) == "", cpu
    # 32-bit ARM: the dot-product steps are AArch64 intrinsics
    assert int8_dot(resolve_target("llvm -mtriple=armv7l-linux-gnueabihf -mcpu=cortex-a7 "
                                   "-mattr=+neon")) == ""
    assert cpu_info(_target("neoverse-n1")).lanes == 4


def test_the_data_shift_goes_to_the_operand_s_signedness():
    """x86 shifts int8 data up into vpdpbusd's unsigned operand; sdot needs uint8 data
    shifted down; usdot and sdot on their own signedness shift nothing."""
    assert data_shift("avx512vnni", "int8") == 128
    assert data_shift("avx512vnni", "uint8") == 0
    assert data_shift("neon-dotprod", "uint8") == -128
    assert data_shift("neon-dotprod", "int8") == 0
    assert data_shift("neon-i8mm", "uint8") == 0


# ---------------------------------------------------------------------------
# assembly
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cpu", list(STEPS))
@pytest.mark.parametrize("case", ["u8-3x3", "s8-7x7-s2-c3", "u8-dense", "s8-dense"])
def test_int8_kernels_step_with_the_cpu_s_dot_instruction(cpu, case):
    name, mod, x, _ = next(c for c in _cases(False) if c[0] == case)
    asm = _asm(mod, _target(cpu))
    want = STEPS[cpu][str(x.dtype)]
    counts = {op: _count(asm, op) for op in DOT_OPS}
    if want is None:        # no dotprod: the int32 path (widening or plain multiply-add)
        assert not any(counts.values()), counts
        assert re.search(r"^\s+(smlal2?|smull2?|mla|madd)\s", asm, re.M), \
            "no integer multiply-add"
    else:
        assert counts[want] > 0, counts
        assert sum(counts.values()) == counts[want], counts


# ---------------------------------------------------------------------------
# numerics under emulation
# ---------------------------------------------------------------------------
def _arm_root_tool():
    """tools/arm_root.py (builds the arm64 root; says what emulation lacks; runs its Python)."""
    spec = importlib.util.spec_from_file_location("arm_root", REPO / "tools" / "arm_root.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _require_emulator():
    """(tools/arm_root.py, the arm64 root), or skip naming what is missing."""
    if shutil.which("aarch64-linux-gnu-g++") is None:
        pytest.skip("no C++ cross compiler aarch64-linux-gnu-g++ "
                    "(apt-get install g++-aarch64-linux-gnu)")
    tool = _arm_root_tool()
    root = tool.default_root()
    why = tool.missing(root)
    if why:
        pytest.skip("ARM emulation needs " + "; ".join(why))
    return tool, root


_RUNNER = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from mxc.runtime import _tvm as rt
a = sys.argv[2:]
for lib, xin, yout in zip(a[0::3], a[1::3], a[2::3]):
    vm = rt.create_vm(rt.load_module(lib))
    np.save(yout, rt.to_numpy(vm["main"](rt.from_numpy(np.load(xin)))))
"""


@pytest.mark.parametrize("extreme", [False, True], ids=["random", "extreme"])
@pytest.mark.parametrize("cpu", list(STEPS))
def test_int8_kernels_are_the_exact_integer_product_under_emulation(cpu, extreme, tmp_path):
    tool, root = _require_emulator()
    runner = tmp_path / "run.py"
    runner.write_text(_RUNNER)
    argv, refs = [], {}
    for name, mod, x, ref in _cases(extreme):
        lib, xin, yout = (tmp_path / f"{name}{ext}" for ext in (".so", ".x.npy", ".y.npy"))
        build_module(mod, _target(cpu)).export_library(str(lib), cc="aarch64-linux-gnu-g++")
        np.save(xin, x)
        argv += [str(lib), str(xin), str(yout)]
        refs[name] = (yout, ref)
    # one emulated process for every case: starting python under qemu costs seconds
    cmd, env = tool.emulated_python(root, str(runner), str(REPO), *argv, cpu="max")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, (yout, ref) in refs.items():
        got = np.load(yout)
        assert got.dtype == np.int32 and got.shape == ref.shape, name
        np.testing.assert_array_equal(got.astype(np.int64), ref, err_msg=f"{name} on {cpu}")


# ---------------------------------------------------------------------------
# --precision bf16: bfdot where the CPU has bf16
# ---------------------------------------------------------------------------
def _bf16_cases():
    """(name, float32 module, input, float64 reference): a 3x3 conv with a fused epilogue
    and a dense layer, both large enough for the bf16 kernels (:func:`bf16.worth_it`)."""
    from test_bf16 import _conv_module as conv, _dense_module as dense, _ref_conv
    rng = np.random.RandomState(7)
    w = rng.randn(32, 32, 3, 3).astype(np.float32)
    x = rng.randn(1, 32, 10, 10).astype(np.float32)
    wd = rng.randn(64, 48).astype(np.float32)
    xd = rng.randn(4, 64).astype(np.float32)
    return [("bf16-conv", conv(x.shape, w, 1, 1), x, _ref_conv(x.astype(np.float64), w, 1, 1)),
            ("bf16-dense", dense(xd.shape, wd), xd, xd.astype(np.float64) @ wd)]


def _bf16_build(mod, cpu):
    from mxc.backends.tvm.build_context import build_context
    ctx = build_context(_target(cpu), precision="bf16", winograd="off")
    return build_module(mod, _target(cpu), ctx=ctx), ctx.records.precision


def test_bf16_is_refused_in_arm_terms_where_the_cpu_has_no_bfdot():
    from mxc.backends.tvm.precision import refusal
    assert refusal(_target("neoverse-v1")) is None
    assert refusal(_target("neoverse-v2")) is None
    why = refusal(_target("neoverse-n1"))
    assert why is not None and "BFDOT" in why and "neoverse-n1" in why and "AVX" not in why


@pytest.mark.parametrize("case", ["bf16-conv", "bf16-dense"])
def test_bf16_kernels_step_with_bfdot(case):
    name, mod, _, _ = next(c for c in _bf16_cases() if c[0] == case)
    exe, prec = _bf16_build(mod, "neoverse-v1")
    assert prec["mode"] == "bf16" and prec["kernels"] == 1
    asm = "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports if m.kind == "llvm")
    assert len(re.findall(r"^\s+bfdot\s+v\d+\.4s", asm, re.M)) > 0


def test_bf16_kernels_are_within_the_bf16_tolerance_under_emulation(tmp_path):
    from mxc.backends.tvm.precision import BF16_TOLERANCE, range_error
    tool, root = _require_emulator()
    runner = tmp_path / "run.py"
    runner.write_text(_RUNNER)
    argv, refs = [], {}
    for name, mod, x, ref in _bf16_cases():
        lib, xin, yout = (tmp_path / f"{name}{ext}" for ext in (".so", ".x.npy", ".y.npy"))
        _bf16_build(mod, "neoverse-v1")[0].export_library(str(lib), cc="aarch64-linux-gnu-g++")
        np.save(xin, x)
        argv += [str(lib), str(xin), str(yout)]
        refs[name] = (yout, ref)
    cmd, env = tool.emulated_python(root, str(runner), str(REPO), *argv, cpu="max")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, (yout, ref) in refs.items():
        got = np.load(yout)
        assert got.shape == ref.shape, name
        err = range_error(got, ref)
        assert 0 < err <= BF16_TOLERANCE, (name, err)     # bfloat16, not float32


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
