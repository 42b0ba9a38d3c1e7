"""AMX tile micro-kernels (``mxc/backends/tvm/schedules/amx.py``): compiled, not run.

No machine this was written on has AMX, so the oracle is the assembly: built
for ``-mcpu=sapphirerapids``, each kernel must configure the tiles
(``ldtilecfg``, written by LLVM's tile-configuration pass), load them, do
one tile product per step -- ``(m/16) (n/16) (k/depth)`` of them -- with
three tile loads each, and release the tiles.  The compile pipeline does not
select these kernels yet (their results are unchecked), so they are built
here on their own.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402

from mxc.backends.tvm.schedules import amx  # noqa: E402


def _asm(func, mcpu: str) -> str:
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu})
    return tvm.tirx.build(tvm.IRModule({"main": func}), target=target).inspect_source("asm")


@pytest.mark.parametrize("kind", list(amx.KINDS))
def test_amx_dense_assembly_on_sapphirerapids(kind):
    depth = amx.KINDS[kind][2]
    asm = _asm(amx.dense_kernel(kind, 32, 48, 2 * depth), "sapphirerapids")
    assert asm.count(f"\t{kind}\t") == 2 * 3 * 2        # one per 16x16 block and step
    assert "ldtilecfg" in asm and "tilerelease" in asm
    assert asm.count("tileloadd") == 3 * asm.count(f"\t{kind}\t")


def test_amx_shapes_and_kinds_are_checked():
    with pytest.raises(ValueError, match="multiples of 16"):
        amx.dense_kernel("tdpbf16ps", 20, 16, 32)
    with pytest.raises(ValueError, match="no AMX tile product"):
        amx.helper_ir("tdpfp16ps")
