"""bench/mca.py: the hot loop it finds in assembly and llvm-mca's cycles for it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.mca import functions, hot_loops, innermost_loops  # noqa: E402

# a kernel with an outer loop around the hot one, then its parallel lambda: 13 ymm FMAs
# with broadcast memory operands and one weight load an iteration (14 loads)
_FMAS = "\n".join(f"\tvfmadd231ps\t{-2048 * (12 - i)}(%rbx,%r14){{1to8}}, %ymm14, %ymm{i}"
                  for i in range(13))
ASM = f"""\t.type\tconv_compute_,@function
conv_compute_:
\txorl\t%eax, %eax
\tretq
\t.type\t.L__tvm_parallel_lambda,@function
.L__tvm_parallel_lambda:
\tmovq\t%rdx, %rcx
.LBB6_2:
\txorl\t%r14d, %r14d
\t.p2align\t4
.LBB6_3:
\tvmovaps\t(%r11,%r14,8), %ymm14
{_FMAS}
\taddq\t$4, %r14
\tcmpq\t$2048, %r14
\tjne\t.LBB6_3
\tvmovups\t%ymm1, (%r8,%r9,4)
\tincl\t%eax
\tcmpl\t%edx, %eax
\tjne\t.LBB6_2
\tretq
"""


def test_the_innermost_loop_is_found_without_labels_or_directives():
    funcs = functions(ASM)
    assert [name for name, _ in funcs] == ["conv_compute_", ".L__tvm_parallel_lambda"]
    loops = innermost_loops(funcs[1][1])
    assert len(loops) == 1
    body = loops[0]
    assert body[0].strip().startswith("vmovaps") and body[-1].strip() == "jne\t.LBB6_3"
    assert sum("vfmadd231ps" in ln for ln in body) == 13


@pytest.mark.skipif(shutil.which("llvm-mca") is None, reason="llvm-mca is not installed")
def test_cycles_are_the_load_port_bound_computed_by_hand():
    """14 loads on Skylake-X's 2 load ports: 7 cycles an iteration (13 FMAs on 2 FMA
    ports would take 6.5), so 13 x 8 lanes / 7 of a 32-lane peak: 46%."""
    (loop,) = hot_loops(ASM, "skylake-avx512", peak_lanes=32)
    assert loop.kernel == "conv" and (loop.fmas, loop.lanes, loop.loads) == (13, 104, 14)
    assert loop.cycles == pytest.approx(7.0, abs=0.25)
    assert loop.peak_share == pytest.approx(104 / 7 / 32, rel=0.04)
