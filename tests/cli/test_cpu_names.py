"""A CPU name LLVM does not know is refused, however the target names it.

Original failure: ``--cpu nonsense`` was refused, but ``--target 'llvm
-mcpu=nonsense'`` (and the JSON form) built generic code and exited 0: LLVM
only warns about an unknown processor.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tvm")

from mxc.backends.tvm.targets import parse_target_text, resolve_target  # noqa: E402
from mxc.cli import main  # noqa: E402
from mxc.errors import BackendError  # noqa: E402

from test_first_hour import PARAMS, SYMBOL  # noqa: E402

COMPILE = ["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "-q"]


@pytest.mark.parametrize("how", [["--cpu", "nonsense"],
                                 ["--target", "llvm -mcpu=nonsense"],
                                 ["--target", '{"kind": "llvm", "mcpu": "nonsense"}'],
                                 ["--target", "cuda", "--cpu", "nonsense"]])
def test_unknown_cpu_is_refused_the_same_way_everywhere(tmp_path, capsys, how):
    out = tmp_path / "m.mxc"
    assert main([*COMPILE, *how, "-o", str(out)]) == BackendError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nonsense' is not a CPU LLVM knows" in err[-1]
    # the known CPUs are listed (a few of every vendor, and the portable baseline)
    assert all(name in err[-1] for name in ("generic", "haswell", "znver4", "sapphirerapids"))
    assert not out.exists()


def test_a_misspelt_cpu_gets_a_suggestion(capsys):
    with pytest.raises(BackendError, match=r"did you mean 'sapphirerapids'"):
        parse_target_text("llvm -mcpu=sapphirerapid")


def test_the_python_api_and_a_cuda_host_are_checked_too():
    with pytest.raises(BackendError, match="'nonsense' is not a CPU"):
        resolve_target({"kind": "llvm", "mcpu": "nonsense"})
    with pytest.raises(BackendError, match="'nonsence' is not a CPU"):
        resolve_target({"kind": "cuda", "arch": "sm_80",
                        "host": {"kind": "llvm", "mcpu": "nonsence"}})


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512", "skylake_avx512",
                                 "sapphirerapids", "x86-64-v2", "generic"])
def test_known_cpus_still_pass(cpu):
    assert parse_target_text(f"llvm -mcpu={cpu}")["mcpu"] == cpu
    assert str(resolve_target({"kind": "llvm", "mcpu": cpu}).attrs["mcpu"]) == cpu
