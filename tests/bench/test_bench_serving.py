"""Smoke run of bench/bench_serving.py on the tiny MLP: it compiles, serves the three
ways and writes its report (no timing is asserted: benchmarks are not timed tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_bench_serving_smoke(tmp_path):
    pytest.importorskip("tvm")
    out = tmp_path / "serving.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(REPO / "bench" / "bench_serving.py"), "--models", "mlp",
                    "--k", "2", "--calls", "2", "--blocks", "1", "--json", str(out)],
                   env=env, check=True, capture_output=True, text=True, timeout=300)
    (res,) = json.loads(out.read_text())["results"]
    assert res["model"] == "mlp" and res["k"] == 2
    assert set(res["images_per_s"]) == {"batch K, 1 thread", "batch 1, K threads",
                                        "batch 1, 1 long-lived thread", "batch 1, churn"}
    assert all(rate > 0 for rate in res["images_per_s"].values())
