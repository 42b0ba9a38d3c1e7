"""The benchmark harness: its FLOP counter on hand-computed cases and an end-to-end smoke run.

No timing is asserted (benchmarks are never timed unit tests); the smoke run
only checks that ``bench/bench_models.py`` compiles, checks and times the
tiny ``examples/mlp`` model and writes its reports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mxc
from mxc import sym as S

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.flops import graph_flops  # noqa: E402
from bench.timing import percentile, summarize  # noqa: E402


def test_flops_convolution_hand_computed():
    # 3x3 conv, 3 -> 4 channels, pad 1 on 8x8: every one of the 4*8*8 outputs is a
    # 3*3*3-term dot product -> 256 * 27 MACs = 13824 FLOPs (bias not counted)
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    res = graph_flops(y, {"data": (1, 3, 8, 8)})
    assert res["total"] == 2 * (4 * 8 * 8) * (3 * 3 * 3) == 13824
    assert res["by_op"] == {"Convolution": 13824} and res["unknown"] == []


def test_flops_grouped_conv_fc_and_a_small_network():
    x = S.var("data")
    # 2 groups: each output sees 4/2 input channels -> (1*4*4*4) * 2*3*3 MACs
    conv = S.Convolution(x, kernel=(3, 3), num_filter=4, num_group=2, name="gconv")
    assert graph_flops(conv, {"data": (1, 4, 6, 6)})["total"] == 2 * 64 * 18
    # FullyConnected flattens (2,3,2,2) -> (2,12): 2 * 2 * 5 * 12
    fc = S.FullyConnected(x, num_hidden=5, name="fc")
    assert graph_flops(fc, {"data": (2, 3, 2, 2)})["total"] == 240
    # conv -> relu -> pooling -> FC: only conv and FC count
    h = S.Activation(S.Convolution(x, kernel=(3, 3), num_filter=8, name="c1"), act_type="relu")
    h = S.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    out = S.FullyConnected(h, num_hidden=10, name="fc1")
    res = graph_flops(out, {"data": (1, 1, 10, 10)})
    conv_flops = 2 * (8 * 8 * 8) * (1 * 3 * 3)     # out 1x8x8x8, 9 MACs each
    fc_flops = 2 * 10 * (8 * 4 * 4)                 # pooled 8x4x4 -> 10
    assert res["by_op"] == {"Convolution": conv_flops, "FullyConnected": fc_flops}
    assert res["total"] == conv_flops + fc_flops
    assert res["nodes"] == {"Convolution": 1, "FullyConnected": 1}


def test_flops_dot_and_batch_dot():
    a, b = S.var("a"), S.var("b")
    assert graph_flops(S.dot(a, b), {"a": (3, 4), "b": (4, 5)})["total"] == 2 * 15 * 4
    assert graph_flops(S.dot(a, b, transpose_a=True),
                       {"a": (4, 3), "b": (4, 5)})["total"] == 2 * 15 * 4
    assert graph_flops(S.batch_dot(a, b), {"a": (2, 3, 4), "b": (2, 4, 5)})["total"] == 240


def test_timing_summary_statistics():
    times = [i / 1000 for i in range(1, 11)]  # 1..10 ms
    assert percentile([x * 1e3 for x in times], 50) == pytest.approx(5.5)
    s = summarize(times)
    assert s["n"] == 10
    assert s["median_ms"] == pytest.approx(5.5)
    assert s["p10_ms"] == pytest.approx(1.9) and s["p90_ms"] == pytest.approx(9.1)
    assert s["min_ms"] == pytest.approx(1.0) and s["max_ms"] == pytest.approx(10.0)


def test_output_check_flags_a_mismatch():
    from bench.bench_models import check_outputs

    want = [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)]
    assert check_outputs([want[0] + 1e-7], want, 1e-4, 1e-5)["ok"] is True
    bad = want[0].copy()
    bad[1, 2] += 0.5
    res = check_outputs([bad], want, 1e-4, 1e-5)
    assert res["ok"] is False and "1/12 elements" in res["detail"]
    assert check_outputs([want[0][:2]], want, 1e-4, 1e-5)["ok"] is False


def test_harness_end_to_end_on_the_mlp_example(tmp_path):
    if not hasattr(mxc, "compile"):
        pytest.skip("mxc.compile is not available yet")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    cmd = [sys.executable, str(REPO / "bench" / "bench_models.py"), "--models",
           str(REPO / "examples" / "mlp" / "mlp"), "--runs", "3", "--warmup", "1",
           "--no-ceiling", "--output", str(md), "--json", str(js)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    table = md.read_text()
    assert "| mlp | data 4x784 |" in table and "ok (" in table
    assert "MISMATCH" not in table and "FAILED" not in table
    report = json.loads(js.read_text())
    assert report["schema"] == "mxc-bench-models/1"
    (entry,) = report["models"]
    res = entry["engines"]["mxc"]
    assert res["check"]["ok"] is True
    assert res["latency"]["n"] == 3 and len(res["times_s"]) == 3
    assert res["compile_s"] > 0 and res["variant"] == "untuned"
    # three FullyConnected layers 784->128->64->10 at batch 4
    assert entry["flops"]["total"] == 2 * 4 * (784 * 128 + 128 * 64 + 64 * 10)
    assert report["machine"]["threads"]["TVM_NUM_THREADS"] == str(report["settings"]["threads"])
