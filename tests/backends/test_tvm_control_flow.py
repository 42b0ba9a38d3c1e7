"""Control flow compiled: host loop steps calling bodies compiled into the library.

Oracles: the wave-2 corpus cases of ``_foreach``/``_while_loop``/``_cond``
(MXNet 1.9.1's outputs) and, for what MXNet leaves undefined (``_while_loop``
rows past the last step), values computed here by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
import mxc.runtime
from conftest import op_cases, require_corpus
from oracle import assert_close
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes
from mxc.frontend.symbol_json import load_json

SPLIT = "wave2/ops"
CASES = {c["id"]: c for c in op_cases(SPLIT) if c["op"] in ("_foreach", "_while_loop", "_cond")}
IDS = list(CASES) or ["no-corpus"]


def _compile_and_run(graph, feeds, tmp_path, name):
    model = mxc.compile(graph, {}, shapes={k: v.shape for k, v in feeds.items()},
                        dtypes={k: v.dtype.name for k, v in feeds.items()})
    (host,) = model.manifest["host_nodes"]
    assert host["compiled_bodies"] and None not in host["compiled_bodies"], host
    return mxc.runtime.load(model.save(tmp_path / f"{name}.mxc")).run(feeds)


@pytest.mark.parametrize("case_id", IDS)
def test_control_flow_case_compiled(case_id, tmp_path):
    if case_id == "no-corpus":
        require_corpus(SPLIT)
    root = require_corpus(SPLIT)
    case = CASES[case_id]
    data = np.load(root / "data" / f"{case_id}.npz")
    feeds = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]}
    outs = _compile_and_run(load_json(case["symbol"]), feeds, tmp_path, case_id)
    assert len(outs) == len(case["outputs"])
    for i, got in enumerate(outs):
        assert_close(got, data[f"out__{i}"], case["rtol"], case["atol"], f"{case_id} output {i}")


def _counter_loop(max_iterations: int):
    """``_while_loop__0`` (i < 4: out = 2 s; i += 1; s = s / 2 + 1) with another cap."""
    require_corpus(SPLIT)
    case = CASES["_while_loop__0"]
    sym = json.loads(case["symbol"])
    node = next(n for n in sym["nodes"] if n["op"] == "_while_loop")
    node["attrs"]["max_iterations"] = str(max_iterations)
    return load_json(json.dumps(sym))


def _counter_loop_by_hand(s0, steps, rows):
    out = np.zeros((rows,) + s0.shape, np.float32)
    s = s0.astype(np.float64)
    for t in range(steps):
        out[t] = 2 * s
        s = s * 0.5 + 1
    return out, np.array([float(steps)], np.float32), s.astype(np.float32)


def test_while_loop_rows_past_the_last_step_are_zeros(tmp_path):
    graph = _counter_loop(7)   # the condition stops it after 4 steps
    feeds = {"i0": np.zeros(1, np.float32),
             "s0": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}
    want = _counter_loop_by_hand(feeds["s0"], 4, 7)
    shapes = infer_shapes(graph, {k: v.shape for k, v in feeds.items()})
    assert [shapes[e.key] for e in graph.outputs] == [(7, 2, 3), (1,), (2, 3)]
    for backend, outs in (("reference", run_graph(graph, feeds)),
                          ("compiled", _compile_and_run(graph, feeds, tmp_path, "loop7"))):
        for i, (got, w) in enumerate(zip(outs, want)):
            assert_close(np.asarray(got), w, 1e-6, 1e-6, f"{backend} output {i}")
        assert not np.asarray(outs[0])[4:].any(), backend


def test_while_loop_that_never_runs_gives_zero_rows_of_the_inferred_shape():
    graph = _counter_loop(3)
    feeds = {"i0": np.full(1, 9, np.float32), "s0": np.ones((2, 3), np.float32)}
    outs = run_graph(graph, feeds)
    assert outs[0].shape == (3, 2, 3) and not outs[0].any()
    assert_close(outs[2], feeds["s0"], 0, 0, "loop variable unchanged")


@pytest.mark.parametrize("name, want", [("cf_while_loop", [(5, 2, 16), (2, 16)]),
                                        ("cf_cond", [(3, 6)])])
def test_inference_sees_through_cond_and_while_loop(name, want):
    """MXNet's infer_shape returns None for these outputs; mxc knows them (io.npz agrees)."""
    root = require_corpus("wave2/models") / name
    io = np.load(root / "io.npz")
    sym = mxc.sym.load(root / "symbol.json")
    _, out_shapes, _ = sym.infer_shape(data=io["in__data"].shape)
    assert out_shapes == want == [io[f"out__{i}"].shape for i in range(len(want))]
