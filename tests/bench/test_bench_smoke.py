"""The benchmark harness: its FLOP counter on hand-computed cases and end-to-end smoke runs.

No timing is asserted (benchmarks are never timed unit tests); the smoke runs
only check that ``bench/bench_models.py`` compiles, checks and times the tiny
``examples/mlp`` model (and, with ``--db``, a tiny convolution untuned and
tuned) and writes its reports; the report's tables are checked on a made-up
report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import skip_where_simulated  # noqa: E402

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


def test_harness_end_to_end_on_the_mlp_example(tmp_path, simulated_host):
    skip_where_simulated(simulated_host, "bench/bench_models.py")
    if not hasattr(mxc, "compile"):
        pytest.skip("mxc.compile is not available yet")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    cmd = [sys.executable, str(REPO / "bench" / "bench_models.py"), "--models",
           str(REPO / "examples" / "mlp" / "mlp"), "--runs", "3", "--warmup", "1",
           "--no-ceiling", "--output", str(md), "--json", str(js)]
    # the user's environment without thread variables (an earlier test's mxc.runtime may
    # have set TVM_NUM_THREADS in this process)
    from bench.machine import THREAD_VARS
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                         env=env)
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
    assert res["tuning_db"] is None and "mxc-tuned" not in entry["engines"]
    # peak memory of the compile's and the run's own processes
    assert res["compile_peak_rss_bytes"] > res["peak_rss_bytes"] > 0
    assert "Peak resident memory" in table and "| mxc compile | mxc run |" in table
    # the artifact against the parameters (784*128 + 128*64 + 64*10 weights, the biases)
    assert res["params_bytes"] == 4 * (784 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10)
    assert "| mlp | mxc |" in table and res["artifact_bytes"] > 0
    # three FullyConnected layers 784->128->64->10 at batch 4
    assert entry["flops"]["total"] == 2 * 4 * (784 * 128 + 128 * 64 + 64 * 10)
    # every engine told the thread count its docs ask for; mxc sizes its own pool, so
    # TVM_NUM_THREADS stays as the user left it (unset) unless --threads is given
    threads = report["machine"]["threads"]
    assert threads["OMP_NUM_THREADS"] == str(report["settings"]["threads"])
    assert threads["TVM_NUM_THREADS"].startswith("unset")
    # the x86 class of this CPU (the peers') and of mxc's kernels, named in the report
    from mxc.backends.tvm.schedules.base.microarch import cpu_info, kernel_class
    from mxc.backends.tvm.targets import resolve_target
    host_class = kernel_class(cpu_info(resolve_target("llvm")))
    assert report["machine"]["kernel_classes"] == {"host": host_class, "mxc": host_class}
    assert f"x86 class: this CPU {host_class}" in table


def test_report_says_when_mxc_times_another_class_than_the_peers():
    from bench.machine import format_classes
    same, = format_classes({"host": "avx512-bf16", "mxc": "avx512-bf16"}, "llvm")
    assert "this CPU avx512-bf16" in same and "compare different" not in same
    other, = format_classes({"host": "avx512-bf16", "mxc": "avx2"}, "llvm -mcpu=znver3")
    assert "mxc's kernels avx2 (llvm -mcpu=znver3)" in other and "compare different" in other


# ---------------------------------------------------------------------------
# tuned and untuned columns, peak memory
# ---------------------------------------------------------------------------
def _made_up_report(tuned: bool, peers: bool) -> dict:
    def engine(name, median, **extra):
        return {"engine": name, "latency": {"n": 5, "median_ms": median, "p10_ms": median * 0.9,
                                            "p90_ms": median * 1.1},
                "check": {"ok": True, "max_abs_diff": 1e-6, "detail": "ok"},
                "peak_rss_bytes": 200 * 2 ** 20, **extra}

    engines = {"mxc": engine("mxc", 4.0, variant="untuned", compile_s=3.0,
                             compile_peak_rss_bytes=900 * 2 ** 20, host_nodes=[])}
    ratios = {}
    if tuned:
        engines["mxc-tuned"] = engine(
            "mxc-tuned", 2.0, variant="tuned", compile_s=3.5, tuning_db="/db",
            kernels=10, kernels_tuned=7, compile_peak_rss_bytes=950 * 2 ** 20,
            tuning={"seconds": 754.0, "runs": 2, "trials": 64, "trials_run": 640, "tasks": 7,
                    "status": ["done"], "log": []})
        ratios["mxc-tuned/mxc"] = 0.5
    if peers:
        engines["mxnet"] = engine("mxnet", 3.0)
        engines["onnxruntime"] = engine("onnxruntime", 1.0, peak_rss_bytes=3 * 2 ** 30)
        ratios.update({"mxc/mxnet": 4 / 3, "mxc/onnxruntime": 4.0})
        if tuned:
            ratios.update({"mxc-tuned/mxnet": 2 / 3, "mxc-tuned/onnxruntime": 2.0})
    cpu = {"model": "cpu", "available_cores": 2, "physical_cores": 2, "threads_per_core": 1,
           "isa": ["avx2"], "avx512f": False}
    return {"date": "2026-01-01T00:00:00", "command": "python bench/bench_models.py",
            "settings": {"runs": 5, "warmup": 1, "rounds": 1, "threads": 2, "target": "llvm",
                         "quiet": None, "tuning_db": "/db" if tuned else None},
            "machine": {"cpu": cpu, "memory_gib": 8, "os": "linux", "python": "3",
                        "numpy": "2", "apache-tvm": "0.27", "apache-tvm-ffi": "0.1",
                        "mxc": "0.1", "mxc_git": "abc", "threads": {}, "load_average": None},
            "ceiling": None, "peers": {"mxnet": "1.9.1"} if peers else None,
            "peer_settings": {"mxnet": "default", "onnxruntime": "all"},
            "models": [{"name": "net", "inputs": {"data": {"shape": [1, 3, 8, 8]}},
                        "flops": {"total": 2e9}, "reference": {"source": "io.npz"},
                        "notes": [], "engines": engines, "ratios": ratios}]}


def _table_rows(md: str, header_start: str) -> tuple[list[str], list[str]]:
    """(header cells, first row cells) of the table whose header starts with *header_start*."""
    lines = md.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    cells = [[c.strip() for c in line.strip().strip("|").split("|")]
             for line in (lines[i], lines[i + 2])]
    return cells[0], cells[1]


def test_report_tables_untuned_and_tuned_columns():
    from bench.bench_models import render_markdown

    md = render_markdown(_made_up_report(tuned=True, peers=True))
    head, row = _table_rows(md, "| model | input |")
    cols = dict(zip(head, row))
    assert head[3:] == ["mxc untuned", "mxc tuned", "tuned/untuned", "check (untuned, tuned)",
                        "MXNet", "ORT", "untuned/MXNet", "tuned/MXNet", "untuned/ORT",
                        "tuned/ORT"]
    assert cols["mxc untuned"].startswith("4 ms") and cols["mxc tuned"].startswith("2 ms")
    assert cols["tuned/untuned"] == "0.50×" and cols["check (untuned, tuned)"] == \
        "ok (1e-06), ok (1e-06)"
    assert (cols["untuned/MXNet"], cols["tuned/MXNet"]) == ("1.33×", "0.67×")
    assert (cols["untuned/ORT"], cols["tuned/ORT"]) == ("4.00×", "2.00×")
    # compile time of each variant, kernels from the database, the tuning time from its log
    head, row = _table_rows(md, "| model | compile untuned |")
    assert dict(zip(head, row)) == {"model": "net", "compile untuned": "3.0 s",
                                    "compile tuned": "3.5 s", "kernels tuned": "7/10",
                                    "tuning time": "13 min (2 runs, 64 trials/kernel)"}
    head, row = _table_rows(md, "| model | mxc untuned compile |")
    assert dict(zip(head, row)) == {"model": "net", "mxc untuned compile": "900 MiB",
                                    "mxc untuned run": "200 MiB",
                                    "mxc tuned compile": "950 MiB", "mxc tuned run": "200 MiB",
                                    "MXNet": "200 MiB", "ORT": "3.00 GiB"}


def test_report_tables_without_db_keep_one_mxc_column():
    from bench.bench_models import render_markdown

    md = render_markdown(_made_up_report(tuned=False, peers=False))
    head, row = _table_rows(md, "| model | input |")
    assert head == ["model", "input", "GFLOP", "mxc compile", "mxc", "check"]
    assert row[3] == "3.0 s" and "tuned" not in md.split("## Machine")[0].replace("untuned", "")
    head, row = _table_rows(md, "| model | mxc compile |")
    assert row[1:] == ["900 MiB", "200 MiB"]


def test_report_table_of_artifact_size_against_the_parameters():
    from bench.bench_models import render_markdown

    report = _made_up_report(tuned=False, peers=False)
    report["models"][0]["engines"]["mxc"].update(artifact_bytes=11 * 2 ** 20,
                                                 params_bytes=10 * 2 ** 20, load_s=0.25)
    head, row = _table_rows(render_markdown(report), "| model | engine | params |")
    assert dict(zip(head, row)) == {"model": "net", "engine": "mxc", "params": "10 MiB",
                                    "artifact": "11 MiB", "artifact/params": "1.10",
                                    "load": "250 ms"}


def _tiny_checkpoint(root: Path) -> Path:
    """A one-convolution checkpoint (prefix) with an input.npz beside it."""
    from mxc.compiler.infer import infer_shapes
    from mxc.frontend.params import save_params

    x = S.var("data")
    y = S.Activation(S.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv"),
                     act_type="relu", name="relu")
    shapes = infer_shapes(y.graph, {"data": (1, 4, 8, 8)})
    rng = np.random.RandomState(0)
    params = {f"arg:{n.name}": rng.uniform(-0.5, 0.5, shapes[(n, 0)]).astype("float32")
              for n in y.graph.input_nodes() if n.name != "data"}
    y.save(str(root / "tiny-symbol.json"))
    save_params(str(root / "tiny-0000.params"), params)
    np.savez(root / "input.npz", data=rng.uniform(-1, 1, (1, 4, 8, 8)).astype("float32"))
    return root / "tiny"


def test_harness_with_db_measures_untuned_and_tuned(tmp_path):
    pytest.importorskip("tvm")

    prefix = _tiny_checkpoint(tmp_path)
    db = tmp_path / "db"
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    cmd = [sys.executable, str(REPO / "bench" / "bench_models.py"), "--models", str(prefix),
           "--runs", "2", "--warmup", "1", "--no-ceiling", "--db", str(db),
           "--output", str(md), "--json", str(js)]
    # one command: tune into a new database (mxc tune --trials 2, the model checked for
    # 2 s: kernels of a tuned model that is not faster go back to the defaults), then
    # measure both
    out = subprocess.run(cmd + ["--tune", "2", "--tune-search", "random", "--tune-check", "2"],
                         capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    report = json.loads(js.read_text())
    assert report["settings"]["tuning_db"] == str(db)
    (entry,) = report["models"]
    untuned, tuned = entry["engines"]["mxc"], entry["engines"]["mxc-tuned"]
    assert untuned["variant"] == "untuned" and untuned["tuning_db"] is None
    assert tuned["variant"] == "tuned" and tuned["tuning_db"] == str(db)
    # the conv's record is applied unless re-measuring it against the default schedule
    # rejected it (mxc tune's verdicts)
    from mxc.backends.tvm.tune.verify import read_verdicts
    rejected = sum(v["kept"] == "default" for v in read_verdicts(db).values())
    assert tuned["kernels_tuned"] == 1 - rejected
    for res in (untuned, tuned):
        assert res["check"]["ok"] is True and res["latency"]["n"] == 2
        assert res["compile_s"] > 0 and res["peak_rss_bytes"] > 0
    assert tuned["tuning"]["runs"] == 1 and tuned["tuning"]["seconds"] > 0
    assert tuned["tuning"]["trials"] == 2
    assert set(entry["ratios"]) == {"mxc-tuned/mxc"}
    table = md.read_text()
    assert "| mxc untuned | mxc tuned | tuned/untuned |" in table
    assert "| tiny | data 1x4x8x8 |" in table and "MISMATCH" not in table
    assert "trials/kernel" in table and "| mxc tuned run |" in table
    # a --db that is no tuning database: refused before anything runs
    bad = subprocess.run(cmd[:-4] + ["--db", str(tmp_path / "nothing"), "--output", "-"],
                         capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert bad.returncode == 2 and "not a directory" in bad.stderr


def test_paired_ab_of_two_builds_of_one_model(tmp_path):
    """bench/ab.py on two artifacts of the same MLP: identical outputs, one ratio per
    block; no timing asserted."""
    pytest.importorskip("tvm")
    from bench.ab import paired
    ex = REPO / "examples" / "mlp"
    sym = mxc.sym.load(str(ex / "mlp-symbol.json"))
    params = mxc.nd.load(str(ex / "mlp-0000.params"))
    paths = [str(mxc.compile(sym, params, {"data": (4, 784)}).save(tmp_path / f"{name}.mxc"))
             for name in ("a", "b")]
    res = paired(paths, blocks=3, calls=2, warmup=1)
    assert res["diffs"] == [0.0]
    assert [len(b) for b in res["block_s"]] == [3, 3]
    r = res["ratios"][0]
    assert r["q1"] <= r["median"] <= r["q3"]


def test_report_bf16_column_and_the_cpu_bf16_amx_flags():
    from bench.bench_models import render_markdown
    from bench.machine import format_machine

    report = _made_up_report(tuned=False, peers=False)
    (entry,) = report["models"]
    entry["engines"]["mxc-bf16"] = {
        "engine": "mxc-bf16", "latency": {"n": 5, "median_ms": 1.0, "p10_ms": 0.9,
                                          "p90_ms": 1.1},
        "check": {"ok": True, "max_abs_diff": 0.05, "detail": "bf16"}}
    entry["ratios"]["mxc-bf16/mxc"] = 0.25
    report["machine"]["cpu"]["bf16_amx"] = {"avx512_bf16": True, "amx_bf16": False}
    md = render_markdown(report)
    head, row = _table_rows(md, "| model | input |")
    cols = dict(zip(head, row))
    assert head[-3:] == ["mxc bf16", "bf16 check", "bf16/fp32"]
    assert cols["mxc bf16"].startswith("1 ms") and cols["bf16/fp32"] == "0.25×"
    assert cols["bf16 check"] == "ok (0.05)"
    assert "- BF16/AMX: avx512_bf16 yes, amx_bf16 no" in format_machine(report["machine"])


def test_bf16_check_uses_the_output_range(tmp_path):
    import numpy as np
    from bench.bench_models import check_bf16

    ref = np.array([[4.0, -2.0, 1.0]], np.float32)
    spec = type("Spec", (), {"reference": [ref]})()
    out = tmp_path / "o.npz"
    np.savez(out, out0=ref + np.float32(0.04))         # 0.04 / 4 = 1% of the range
    assert check_bf16(out, spec)["ok"] is True
    np.savez(out, out0=ref + np.float32(0.4))          # 10%: beyond the bf16 class
    res = check_bf16(out, spec)
    assert res["ok"] is False and abs(res["range_error"] - 0.1) < 1e-6


def test_report_openvino_columns_beside_mxc_bf16():
    from bench.bench_models import render_markdown

    report = _made_up_report(tuned=False, peers=False)
    (entry,) = report["models"]

    def engine(name, median):
        return {"engine": name, "latency": {"n": 5, "median_ms": median, "p10_ms": median,
                                            "p90_ms": median},
                "check": {"ok": True, "max_abs_diff": 0.1, "detail": "ok"}}
    entry["engines"].update({"mxc-bf16": engine("mxc-bf16", 2.0),
                             "openvino": engine("openvino", 1.0),
                             "openvino-f32": engine("openvino-f32", 5.0)})
    entry["ratios"].update({"mxc-bf16/mxc": 0.5, "mxc/openvino-f32": 0.8,
                            "mxc-bf16/openvino": 2.0})
    head, row = _table_rows(render_markdown(report), "| model | input |")
    cols = dict(zip(head, row))
    assert head[-4:] == ["OpenVINO default", "OpenVINO f32", "mxc/OpenVINO f32",
                         "mxc bf16/OpenVINO default"]
    assert cols["OpenVINO default"].startswith("1 ms")
    assert (cols["mxc/OpenVINO f32"], cols["mxc bf16/OpenVINO default"]) == ("0.80×", "2.00×")


def test_openvino_runner_says_when_openvino_is_missing(tmp_path):
    import importlib.util
    if importlib.util.find_spec("openvino") is not None:
        pytest.skip("openvino is installed here")
    out = subprocess.run([sys.executable, str(REPO / "bench" / "peers" / "openvino_runner.py"),
                          "--model", "m.onnx", "--inputs", "in.npz"], capture_output=True,
                         text=True, timeout=120, cwd=str(tmp_path))
    assert out.returncode == 0
    assert "openvino is not installed" in json.loads(out.stdout.strip().splitlines()[-1])["error"]


def test_report_names_the_batch_and_the_precision_openvino_chose():
    """OpenVINO's default is bf16 on a CPU with AVX512-BF16 or AMX: the report says which
    precision each OpenVINO column ran in (as OpenVINO reported it), and the batch."""
    from bench.bench_models import render_markdown

    report = _made_up_report(tuned=False, peers=True)
    report["settings"]["batch"] = 8
    (entry,) = report["models"]
    for name, precision in (("openvino", "bf16"), ("openvino-f32", "f32")):
        entry["engines"][name] = {
            "engine": name, "openvino": "2026.4.1", "inference_precision": precision,
            "latency": {"n": 5, "median_ms": 1.0, "p10_ms": 1.0, "p90_ms": 1.0},
            "check": {"ok": True, "max_abs_diff": 0.1, "detail": "ok"}}
    md = render_markdown(report)
    assert "Batch-8 CPU latency" in md and "Batch-1" not in md
    (line,) = [x for x in md.splitlines() if x.startswith("- OpenVINO: ")]
    assert line.startswith("- OpenVINO: 2026.4.1;")
    assert "OpenVINO default ran in bf16; OpenVINO f32 ran in f32" in line


def test_openvino_runner_writes_the_precision_as_openvino_spells_it():
    """``ov.Type`` prints as ``<Type: 'bfloat16'>``; the runner records ``to_string()``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "openvino_runner", REPO / "bench" / "peers" / "openvino_runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)

    class FakeType:
        def to_string(self):
            return "bf16"

        def __str__(self):
            return "<Type: 'bfloat16'>"

    assert runner._type_name(FakeType()) == "bf16"
    assert runner._type_name("f32") == "f32"


def test_zoo_export_keeps_batchnorm_affines_that_training_fixes():
    """resnet50_v2's first BatchNorm has scale=False, center=False (gamma and beta with
    grad_req 'null'): they keep 1 and 0, since MXNet's ONNX exporter writes the stored
    gamma that MXNet itself ignores; every trained parameter still gets synthetic values."""
    from bench.peers.zoo_export import fixed_affine

    assert fixed_affine("resnetv20_batchnorm0_gamma", "null")
    assert fixed_affine("resnetv20_batchnorm0_beta", "null")
    assert not fixed_affine("resnetv20_batchnorm1_gamma", "write")
    assert not fixed_affine("resnetv20_batchnorm0_running_var", "null")
    assert not fixed_affine("resnetv20_conv0_weight", "write")
