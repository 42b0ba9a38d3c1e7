"""Smoke runs of ``bench/bench_compile.py`` and ``bench/bench_reference_ops.py``.

No timing is asserted: each script runs on tiny sizes and prints its table
(every stage, every case) and, asked for, its slowest kernels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str) -> str:
    res = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_bench_compile_reports_every_stage_and_the_slowest_kernels():
    out = _run("bench/bench_compile.py", "psp:32x6", "--kernels", "2")
    header = next(line for line in out.splitlines() if line.startswith("| model |"))
    for stage in ("passes", "partition", "lower", "build", "runtime graph", "total"):
        assert stage in header
    assert any(line.startswith("| psp:32x6 |") for line in out.splitlines()), out
    kernels = out.split("slowest kernels to generate (s)")[1].strip().splitlines()[:2]
    assert len(kernels) == 2 and all(float(k.split()[0]) >= 0 for k in kernels), out


def test_bench_reference_ops_times_every_case():
    out = _run("bench/bench_reference_ops.py", "--rois", "3", "--boxes", "40", "--runs", "1")
    rows = [line.split("|")[1].strip() for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| case")]
    assert rows == ["roialign", "roialign_adaptive", "roipooling", "box_nms", "box_nms_classes",
                    "proposal"], out


def _table_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]


def test_bench_compile_check_compares_with_mxnets_outputs(corpus):
    """``--check``: the corpus MLP compiled agrees with MXNet's outputs (its io.npz) to
    the corpus's own tolerance, and the row names the model and its node count."""
    import json
    d = corpus / "models" / "mlp"
    out = _run("bench/bench_compile.py", str(d), "--check")
    (row,) = _table_rows(out)
    nodes = len(json.loads((d / "symbol.json").read_text())["nodes"])
    assert row[0] == "mlp" and int(row[1]) == nodes, out
    meta = json.loads((d / "meta.json").read_text())
    assert float(row[-2]) <= float(meta.get("atol", 1e-4)) * 10, out


def test_bench_reference_ops_times_whole_models(corpus):
    """``--model DIR``: one reference run, its slowest op types, and MXNet's outputs
    reproduced (the reference is the oracle: float rounding at most)."""
    out = _run("bench/bench_reference_ops.py", "--model", str(corpus / "models" / "mlp"))
    (row,) = _table_rows(out)
    assert row[0] == "mlp" and "FullyConnected" in row[3], out
    assert float(row[4]) < 1e-4, out
