"""bench/mca_arm.py: AArch64 hot loops, their multiply-adds, and the int8 steps' work."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.mca_arm import hot_loops, innermost_loops, work  # noqa: E402

# an outer loop around the hot one (4 ld1r broadcasts, 8 sdot), as the int8 kernels are
ASM = """\t.type\tconv_compute_,@function
conv_compute_:
\tmov\tx9, xzr
.LBB4_2:
\tmovi\tv0.2d, #0000000000000000
\tmov\tw15, #16
.LBB4_3:
\tldur\tq18, [x13, #-256]
\tsubs\tx15, x15, #1
\tld1r\t{ v16.4s }, [x16]
\tldr\tq19, [x13], #16
\tsdot\tv0.4s, v16.16b, v18.16b
\tld1r\t{ v17.4s }, [x16]
\tsdot\tv2.4s, v16.16b, v19.16b
\tsdot\tv1.4s, v17.16b, v18.16b
\tsdot\tv3.4s, v17.16b, v19.16b
\tb.ne\t.LBB4_3
\tadd\tx9, x9, #1
\tcmp\tx9, x10
\tb.ne\t.LBB4_2
\tret
"""


def test_innermost_aarch64_loop_and_its_multiply_adds():
    lines = ASM.splitlines()[2:]
    (body,) = innermost_loops(lines)
    assert body[0].strip().startswith("ldur") and body[-1].strip().startswith("b.ne")
    assert sum(work(ln, arm=True) for ln in body) == 4 * 16
    assert work("\tfmla\tv0.4s, v1.4s, v2.4s", arm=True) == 4
    assert work("\tsmlal2\tv0.4s, v1.8h, v2.8h", arm=True) == 4
    assert work("\tvpdpbusd\t%zmm1, %zmm2, %zmm3", arm=False) == 64


def test_llvm_mca_simulates_the_aarch64_loop():
    if shutil.which("llvm-mca") is None:
        pytest.skip("no llvm-mca (apt-get install llvm)")
    (loop,) = hot_loops(ASM, "neoverse-n1", "llvm-mca")
    assert loop.kernel == "conv" and loop.macs == 64 and loop.instructions == 4
    assert 1 <= loop.cycles < 20


def test_dot_flops_counts_the_tensorized_int8_steps():
    pytest.importorskip("tvm")
    from bench.mca_arm import dot_flops
    from mxc.backends.tvm.build import relax_pipeline, resolve_target
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
    from test_int8_vnni import _dense_module

    target = resolve_target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")
    mod = relax_pipeline(target)(_dense_module((4, 64), "int8", np.ones((64, 40), np.int8)))
    (func,) = [f for gv, f in mod.functions_items() if gv.name_hint == "dense_int8"]
    assert dot_flops(func) == 2 * 4 * 64 * 40
