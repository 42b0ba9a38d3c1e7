"""Every x86-64 class mxc's kernels differ on, from whichever machine runs the suite.

For each class of :data:`isa_classes.ISA_CLASSES` (AVX2, AVX2 with AVX-VNNI,
AVX-512, AVX512-VNNI, AVX512-BF16, AMX) a float32 convolution, an int8
convolution and a ``--precision bf16`` convolution are compiled for the class's
LLVM CPU, and:

* the **assembly** must use the class's instructions: 256-bit registers only on
  AVX2 CPUs (a ``zmm`` there is SIGILL), 512-bit FMAs on AVX-512 ones; the int8
  dot product the class has (``vpdpbusd`` on ymm or zmm, ``tdpbusd`` tiles); the
  bfloat16 product (``vdpbf16ps``, ``tdpbf16ps``) or, without one, a refusal
  that names what is missing;
* where this machine can execute the class's code, the kernels **run** and are
  compared with numpy: float64 for float32, exact int64 for int8, float64
  products of the rounded operands for bf16.  Where it cannot, that part skips
  naming the missing features; the assembly is checked all the same.

With ``MXC_TEST_TARGET`` naming one class's CPU, only that class is tested (the
matrix of ``tools/isa_matrix.py`` runs each in turn).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tvm")
ml_dtypes = pytest.importorskip("ml_dtypes")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from conftest import TEST_TARGET  # noqa: E402
from isa_classes import ISA_CLASSES, IsaClass, class_of_cpu  # noqa: E402
from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.build_context import build_context  # noqa: E402
from mxc.backends.tvm.precision import check_request  # noqa: E402
from mxc.backends.tvm.schedules.base.microarch import cpu_info, kernel_class  # noqa: E402
from mxc.backends.tvm.targets import missing_on_host  # noqa: E402
from mxc.errors import BackendError  # noqa: E402
from test_bf16 import _conv_module as _float_conv, _ref_conv, _round  # noqa: E402
from test_int8_vnni import _conv_module as _int8_conv, _conv_reference  # noqa: E402

pytestmark = pytest.mark.isa


def _classes() -> list[IsaClass]:
    """The classes this run tests: ``MXC_TEST_TARGET``'s alone, else all of them."""
    if TEST_TARGET != "llvm":
        cls = class_of_cpu(str(resolve_target(TEST_TARGET).attrs.get("mcpu", "")))
        if cls is not None:
            return [cls]
    return list(ISA_CLASSES.values())


CLASSES = pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.name)


def _build(mod, cls: IsaClass, precision: str = "fp32"):
    target = resolve_target(cls.target)
    ctx = build_context(target, precision=precision, winograd="off")   # the direct kernels
    exe = build_module(mod, target, ctx=ctx)
    asm = "\n".join(str(m.inspect_source("asm")) for m in exe.mod.imports if m.kind == "llvm")
    return exe, asm


def _count(asm: str, pattern: str) -> int:
    return len(re.findall(pattern, asm))


def _run_here(exe, cls: IsaClass, x: np.ndarray) -> np.ndarray:
    """Run *exe* on this machine, or skip naming what it lacks for *cls*'s code."""
    missing = missing_on_host(resolve_target(cls.target))
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)} to run {cls.name} code "
                    f"({cls.cpu}); its assembly was checked")
    return relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


@CLASSES
def test_the_class_is_the_one_the_kernel_families_make(cls, simulated_host):
    """The table's class is the one mxc's cost model names for the class's CPU (the
    benchmark report's ``x86 class``), and a run standing in for that CPU sees it as
    this machine's class."""
    assert kernel_class(cpu_info(resolve_target(cls.target))) == cls.name
    if simulated_host == cls.cpu:
        assert kernel_class(cpu_info(resolve_target("llvm"))) == cls.name


@CLASSES
def test_float32_convolution_uses_the_class_vectors(cls):
    rng = np.random.RandomState(0)
    x = rng.randn(1, 32, 14, 14).astype("float32")
    w = rng.randn(32, 32, 3, 3).astype("float32")
    exe, asm = _build(_float_conv(x.shape, w, (1, 1), (1, 1)), cls)
    wide_fmas = _count(asm, r"\tvfmadd\w+ps\t[^\n]*zmm")
    narrow_fmas = _count(asm, r"\tvfmadd\w+ps\t[^\n]*ymm")
    if cls.vector == "ymm":
        assert "zmm" not in asm and narrow_fmas > 0, (cls.name, narrow_fmas)
    else:
        assert wide_fmas > 0, cls.name
    y = _run_here(exe, cls, x)
    want = _ref_conv(x.astype(np.float64), w.astype(np.float64), 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@CLASSES
def test_int8_convolution_uses_the_class_dot_product(cls):
    rng = np.random.RandomState(1)
    x = rng.randint(0, 256, (1, 64, 14, 14)).astype(np.uint8)
    w = rng.randint(-128, 128, (32, 64, 3, 3)).astype(np.int8)
    exe, asm = _build(_int8_conv(x.shape, "uint8", w, (1, 1), (1, 1)), cls)
    assert _count(asm, rf"\t(\{{vex\}} )?{cls.int8_dot}\b") > 0, cls.name
    if cls.int8_dot not in ("vpdpbusd", "tdpbusd"):      # no VNNI: no dot-product instruction
        assert not re.search(r"\t(\{vex\} )?(vpdpbusd|tdpbusd)\b", asm), cls.name
    if cls.vector == "ymm":
        assert "zmm" not in asm, cls.name
    y = _run_here(exe, cls, x)
    np.testing.assert_array_equal(y, _conv_reference(x, w, 1, 1))


@CLASSES
def test_bf16_precision_uses_the_class_product_or_is_refused(cls):
    rng = np.random.RandomState(2)
    x = rng.randn(1, 64, 14, 14).astype("float32")
    w = rng.randn(64, 64, 3, 3).astype("float32")
    mod = _float_conv(x.shape, w, (1, 1), (1, 1))
    if not cls.bf16_dot:
        with pytest.raises(BackendError, match="neither AVX512-BF16 nor AMX-BF16"):
            check_request("bf16", resolve_target(cls.target))   # what mxc.compile asks first
        return
    exe, asm = _build(mod, cls, "bf16")
    assert _count(asm, rf"\t{cls.bf16_dot}\b") > 0, cls.name
    y = _run_here(exe, cls, x)
    want = _ref_conv(_round(x).astype(np.float64), _round(w).astype(np.float64), 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
