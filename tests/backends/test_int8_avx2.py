"""INT8 kernels on AVX2 without VNNI (``mxc/backends/tvm/schedules/base/int8_avx2.py``).

Oracle: the exact integer product (numpy int64) of the same codes.  ``vpmaddubsw``
saturates its int16 pair sums, so each layer's weights choose between it and an
exact widened ``vpmaddwd`` sequence; the cases put each path under its worst
data: weights whose pairs sit at the limit (``|w0| + |w1| = 128``) for the fast
path, and all-extreme weights (-128 / 127 against uint8 255, the +128-shifted
int8 -128) for the exact one, where ``vpmaddubsw`` would saturate.  The kernels
compiled for ``-mcpu=znver3`` (AVX2, no VNNI, no AVX-512) run on any AVX2 host;
their assembly is checked for the instructions and register width each path
promises, and Alder Lake's (AVX-VNNI: ``{vex} vpdpbusd`` on ymm) is compiled only.
The int8 corpus models compiled for znver3 match MXNet's outputs.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.ir.expr import Constant  # noqa: E402

import mxc  # noqa: E402
from conftest import require_corpus, require_runnable_target  # noqa: E402
from mxc.backends.tvm.build import build_module, resolve_target  # noqa: E402
from mxc.backends.tvm.schedules.base.int8_steps import STEP_ATTR  # noqa: E402
from mxc.backends.tvm.schedules.families.int8 import pack_weights  # noqa: E402
from mxc.backends.tvm.schedules.base.int8_avx2 import PAIR_LIMIT, saturation_free  # noqa: E402
from mxc.backends.tvm.schedules.base.microarch import int8_dot  # noqa: E402
from oracle import assert_close  # noqa: E402
from test_int8_vnni import INT8_MODELS, _asm, _conv_module as _vnni_conv, _dense_module, _run  # noqa: E402
from test_int8_vnni import check_int8_corpus_model  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

AVX2 = "llvm -mcpu=znver3"

#: (data dtype, C, K, H=W, kernel, stride, pad): a 3x3, a thin 7x7 stem (rows folded),
#: a strided 1x1 with channels off the register
CONVS = {
    "u8-3x3": ("uint8", 32, 64, 12, 3, 1, 1),
    "s8-7x7-s2-c3": ("int8", 3, 32, 19, 7, 2, 3),
    "u8-1x1-s2-c30-k40": ("uint8", 30, 40, 7, 1, 2, 0),
}


def _conv_module(x_shape, x_dtype, w_hwio, stride, pad):
    """The bare channels-last convolution (NHWC x HWIO -> int32)."""
    return _vnni_conv(x_shape, x_dtype, w_hwio, stride, pad, plus=None)


def _conv_reference(x, w, stride, pad):
    """NHWC x HWIO in int64, zero padding (int8 data's zero is the code 0)."""
    n, h, wd, c = x.shape
    kh, kw, _, k = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, oh, ow, k), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nhwc,ck->nhwk", patch, w[i, j].astype(np.int64))
    return out


def _weights(rng, shape, kind):
    """*kind* "limit": weights in ``[-64, 64]``, half of them at +-64, so that pairs reach
    ``|w0| + |w1| = 128`` (the most ``vpmaddubsw`` takes exactly) however the kernel
    pairs them (channels, a thin layer's folded taps); "extreme": every weight -128 or
    127 (it would saturate)."""
    sign = np.where(rng.rand(*shape) < 0.5, -1, 1)
    if kind == "extreme":
        return np.where(sign < 0, -128, 127).astype(np.int8)
    half = PAIR_LIMIT // 2
    w = np.where(rng.rand(*shape) < 0.5, sign * half, rng.randint(-half, half + 1, shape))
    return w.astype(np.int8)


def _data(rng, dtype, shape, extreme):
    if extreme:   # uint8 255; int8 -128 is 0 after the +128 shift, 127 is 255
        return np.full(shape, 255 if dtype == "uint8" else 127, dtype=dtype)
    info = np.iinfo(dtype)
    return rng.randint(info.min, info.max + 1, shape).astype(dtype)


def _families(caplog) -> set[str]:
    return {r.getMessage().split("(")[1].split(")")[0] for r in caplog.records
            if "int8" in r.getMessage() and "kernel (" in r.getMessage()}


def test_avx2_targets_take_the_avx2_family_and_vnni_targets_keep_theirs():
    assert int8_dot(resolve_target(AVX2)) == "avx2"
    assert int8_dot(resolve_target("llvm -mcpu=haswell")) == "avx2"
    assert int8_dot(resolve_target("llvm -mcpu=alderlake")) == "avxvnni"
    assert int8_dot(resolve_target("llvm -mcpu=nehalem")) == ""       # SSE only: int32


def test_saturation_check_reads_the_pairs_one_instruction_adds():
    """Bytes 0-1 and 2-3 of a lane's 4 share an int16 lane; 1-2 never do."""
    w = np.zeros((1, 1, 4, 8), np.int8)
    w[0, 0, 1], w[0, 0, 2] = 127, 127              # channels 1 and 2: different pairs
    assert saturation_free(pack_weights(w, 8)[0])
    w[0, 0, 0] = 2                                  # 2 + 127 = 129 in pair (0, 1)
    assert not saturation_free(pack_weights(w, 8)[0])
    w[0, 0, 0] = 1                                  # 1 + 127 = 128: the limit
    assert saturation_free(pack_weights(w, 8)[0])
    w[0, 0, 3] = -2                                 # |-2| + 127 in pair (2, 3)
    assert not saturation_free(pack_weights(w, 8)[0])


@pytest.mark.parametrize("weights,family", [("limit", "avx2"), ("extreme", "avx2-exact")])
@pytest.mark.parametrize("case", list(CONVS))
def test_avx2_int8_conv_is_the_exact_integer_product(case, weights, family, caplog):
    target = require_runnable_target(AVX2)
    xdt, c, k, hw, ks, stride, pad = CONVS[case]
    rng = np.random.RandomState(list(CONVS).index(case))
    w = _weights(rng, (ks, ks, c, k), weights)
    for extreme in (False, True):
        x = _data(rng, xdt, (1, hw, hw, c), extreme)
        with caplog.at_level(logging.DEBUG, logger="mxc.backends.tvm.schedules.families.int8"):
            got = _run(_conv_module(x.shape, xdt, w, stride, pad), target, x)
        want = _conv_reference(x, w, stride, pad)
        np.testing.assert_array_equal(got, want, err_msg=f"{case} {weights} extreme={extreme}")
    assert _families(caplog) == {family}


@pytest.mark.parametrize("weights,family", [("limit", "avx2"), ("extreme", "avx2-exact")])
@pytest.mark.parametrize("xdt", ["uint8", "int8"])
def test_avx2_int8_dense_is_the_exact_integer_product(xdt, weights, family, caplog):
    target = require_runnable_target(AVX2)
    rng = np.random.RandomState(3)
    w = _weights(rng, (1, 1, 100, 250), weights)[0, 0]
    for extreme in (False, True):
        x = _data(rng, xdt, (3, 100), extreme)
        with caplog.at_level(logging.DEBUG, logger="mxc.backends.tvm.schedules.families.int8"):
            got = _run(_dense_module(x.shape, xdt, w), target, x)
        np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))
    assert _families(caplog) == {family}


@pytest.mark.parametrize("weights,present,absent", [
    ("limit", "vpmaddubsw", ("vpdpbusd", "%zmm", "vpmulld")),
    ("extreme", "vpmaddwd", ("vpmaddubsw", "vpdpbusd", "%zmm", "vpmulld",
                             "vpsraw", "vpsllw", "vpsrlw"))])
def test_avx2_build_uses_its_instructions_on_ymm(weights, present, absent):
    """Compiled, whatever this CPU is: the path's instruction, ymm only, no VNNI and no
    plain int32 multiply left in the kernel; the exact path widens nothing per step (no
    shifts: its weights are int16 when packed, its data in the padding copy)."""
    w = _weights(np.random.RandomState(0), (3, 3, 32, 64), weights)
    asm = _asm(_conv_module((1, 12, 12, 32), "uint8", w, 1, 1), AVX2)
    assert present in asm and "%ymm" in asm
    assert not [a for a in absent if a in asm], [a for a in absent if a in asm]


def test_alderlake_build_uses_vex_vpdpbusd_on_ymm():
    """AVX-VNNI: the "avxvnni" family, ``{vex} vpdpbusd`` on ymm, no zmm (this CPU has no
    AVX-VNNI: compiled only)."""
    w = _weights(np.random.RandomState(0), (3, 3, 32, 64), "extreme")
    asm = _asm(_conv_module((1, 12, 12, 32), "uint8", w, 1, 1), "llvm -mcpu=alderlake")
    lines = [ln for ln in asm.splitlines() if "vpdpbusd" in ln]
    assert lines and all("{vex}" in ln and "%ymm" in ln for ln in lines), lines[:3]
    assert "%zmm" not in asm and "vpmaddubsw" not in asm


def test_the_exact_family_multiplies_int16_pairs_widened_once():
    """AVX2's exact step reads int16 operands: the weights packed ``[K/8, KH, KW, C/2, 8,
    2]`` int16 at legalization, the data widened in ``pad_temp`` (int8 codes
    sign-extended, no +128 shift and so no compensation argument)."""
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.schedules.legalize import cpu_legalize_map
    w = _weights(np.random.RandomState(0), (3, 3, 32, 20), "extreme")
    ctx = build_context(resolve_target(AVX2), record=False)
    mod = relax.transform.LegalizeOps(cpu_legalize_map(ctx))(
        _conv_module((1, 12, 12, 32), "int8", w, 1, 1))
    consts = [c.value.numpy() for c in _constants(mod["main"])]
    assert [(c.shape, str(c.dtype)) for c in consts] == [((3, 3, 3, 16, 8, 2), "int16")]
    kernel = next(f for gv, f in mod.functions.items() if "int8" in gv.name_hint)
    assert 'T.Cast("int16"' in kernel.script() and "128" not in kernel.script()


def _constants(func):
    """The tensor constants *func* reads."""
    found = []
    relax.analysis.post_order_visit(func.body, lambda e: isinstance(e, Constant)
                                    and hasattr(e.value, "numpy") and found.append(e))
    return found


def test_the_family_is_carried_on_the_kernel():
    """The legalization's choice is on the kernel's block; the schedule reads it there."""
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.schedules.legalize import cpu_legalize_map
    w = _weights(np.random.RandomState(0), (3, 3, 32, 64), "extreme")
    ctx = build_context(resolve_target(AVX2), record=False)
    mod = relax.transform.LegalizeOps(cpu_legalize_map(ctx))(
        _conv_module((1, 12, 12, 32), "uint8", w, 1, 1))
    scripts = [f.script() for gv, f in mod.functions.items() if "int8" in gv.name_hint]
    assert scripts and f'"{STEP_ATTR}": "avx2-exact"' in scripts[0]


@pytest.mark.corpus
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_corpus_model_on_avx2_matches_mxnet(name, caplog):
    """MXNet's outputs to the model's tolerance (as the VNNI build): the int32
    accumulators are exact on both, so only the float epilogues may differ."""
    target = require_runnable_target(AVX2)
    with caplog.at_level(logging.DEBUG, logger="mxc.backends.tvm.schedules.families.int8"):
        check_int8_corpus_model(name, target)
    assert _families(caplog) <= {"avx2", "avx2-exact"} and _families(caplog), caplog.text[-500:]
