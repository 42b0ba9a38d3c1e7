"""tvmc's habits (issue 22, item 10), each reproduced.

Original failures: ``--tuning-records`` was an unknown flag (tvmc's name of the
tuning log, mxc's ``--db``); ``compile --dump-code`` did not exist; ``--print-top 0``
ran and printed nothing (exit 0) and ``--threads 0`` failed late (exit 4).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mxc.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
SYMBOL, PARAMS = str(MLP / "mlp-symbol.json"), str(MLP / "mlp-0000.params")
COMPILE = ["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "-q"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "mxc.cli", *args], capture_output=True,
                          text=True, cwd=REPO)


def test_tuning_records_is_db():
    parser = build_parser()
    for verb in (["compile", SYMBOL], ["run", SYMBOL], ["tune", SYMBOL]):
        args = parser.parse_args([*verb, "--tuning-records", "records/"])
        assert args.db == "records/", verb
    # it reaches the compile as the database: a path that is none is refused as one
    r = cli(*COMPILE, "--tuning-records", str(REPO / "no-such-db"), "-o", "/dev/null")
    assert r.returncode == 7 and "tuning database" in r.stderr and "no-such-db" in r.stderr


def test_zero_counts_are_usage_errors(tmp_path):
    for flag in ("--print-top", "--threads", "--repeat", "--number"):
        r = cli("run", SYMBOL, "--params", PARAMS, "--fill-mode", "ones", "--shape",
                "data=4,784", flag, "0")
        assert r.returncode == 64, (flag, r.returncode, r.stderr)
        assert r.stderr.strip().endswith(f"argument {flag}: must be at least 1, not 0")
    r = cli("tune", SYMBOL, "--db", str(tmp_path / "db"), "--trials", "0")
    assert r.returncode == 64 and "argument --trials: must be at least 1" in r.stderr


def _kernels_in_asm(text: str) -> set[str]:
    """The kernels of a TVM CPU library, from its assembly: each is a global function
    ``__tvm_ffi_NAME`` (the packed entry point TVM wraps around every kernel)."""
    return set(re.findall(r"^\s*\.globl\s+__tvm_ffi_(\w+)$", text, re.M))


def test_dump_code_beside_the_artifact(tmp_path):
    pytest.importorskip("tvm")
    out = tmp_path / "mlp.mxc"
    assert main([*COMPILE, "-o", str(out), "--dump-code", "tir,ll,asm"]) == 0
    tir = (tmp_path / "mlp.mxc.tir").read_text()
    ll = (tmp_path / "mlp.mxc.ll").read_text()
    asm = (tmp_path / "mlp.mxc.asm").read_text()
    kernels = set(re.findall(r"^def (\w+)\(", tir, re.M))
    assert len(kernels) >= 3 and any(k.startswith("fused_dense") for k in kernels)
    assert "T.prim_func" in tir and "T.vectorized" in tir   # scheduled, readable TIR
    assert _kernels_in_asm(asm) == kernels                 # the same kernels, compiled
    for k in kernels:
        assert re.search(rf"^define .*@{k}\(", ll, re.M) or f"@__tvm_ffi_{k}(" in ll, k
    # the artifact is the one a compile without --dump-code writes
    from mxc.runtime import read_manifest
    assert read_manifest(out)["regions"][0]["num_nodes"] == 6


def test_dump_code_into_a_directory(tmp_path, capsys):
    pytest.importorskip("tvm")
    code = tmp_path / "code"
    assert main([*COMPILE, "-o", str(tmp_path / "mlp.mxc"), "--dump-code", str(code)]) == 0
    assert "code: " in capsys.readouterr().out
    tirs = {p.stem: p.read_text() for p in code.glob("*.tir")}
    assert set(tirs) == _kernels_in_asm((code / "mlp.asm").read_text())
    for name, text in tirs.items():            # one kernel per file
        assert re.findall(r"^def (\w+)\(", text, re.M) == [name]
    assert (code / "mlp.ll").read_text().startswith("; ModuleID")
    r = cli(*COMPILE, "-o", str(tmp_path / "x.mxc"), "--dump-code", "tir,c")
    assert r.returncode == 64 and "unknown format(s) in 'tir,c'" in r.stderr


def test_dump_code_shortens_kernel_names_too_long_for_a_file(tmp_path):
    """A fused kernel of a deep graph can be named by hundreds of ops; its file gets the
    name's start and a hash (distinct per kernel), and the TIR inside keeps the name."""
    from mxc.backends.tvm.dump_code import MAX_FILE_NAME, write_code
    long_a, long_b = "fused_" + "conv2d_add_relu_" * 40 + "a", "fused_" + "conv2d_add_relu_" * 40 + "b"
    kernels = {"short": "def short(): pass", long_a: f"def {long_a}(): pass",
               long_b: f"def {long_b}(): pass"}
    written = write_code(["tir"], tmp_path / "m.mxc", tmp_path / "code", kernels=kernels,
                         executable=None)
    names = sorted(p.name for p in written)
    assert len(set(names)) == 3 and "short.tir" in names
    assert all(len(n.encode()) <= MAX_FILE_NAME for n in names)
    for p in written:
        text = p.read_text()
        assert p.name == "short.tir" or p.name.startswith("fused_conv2d_add_relu_")
        assert text.split("(")[0].removeprefix("def ") in kernels   # the full name inside
