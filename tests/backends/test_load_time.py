"""Winograd weights transformed at load time (``mxc/backends/tvm/load_time.py``).

The artifact stores the 3x3 weights once, as given; the runtime computes the
transformed weights ``U = G g G^T`` (4x the bytes for F(4, 3)) once, when it
loads the model.  Oracles: the artifact's own byte counts against the
parameters' (an invariant), numpy's transform (:func:`transform_weights`), the
numpy reference backend, and the same model compiled without Winograd.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.errors import ArtifactError

REPO = Path(__file__).resolve().parents[2]
#: F(4, 3)'s float32 error relative to the output scale (see test_cpu_schedules)
WINOGRAD_ATOL = 1e-4


def _model(channels: int = 128, side: int = 12):
    """Two 3x3 convolutions (Winograd F(4, 3) with --winograd on) around a relu."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=channels, name="c1")
    y = S.Activation(y, act_type="relu", name="r1")
    y = S.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=channels, name="c2")
    rng = np.random.RandomState(0)
    params = {"c1_weight": rng.randn(channels, channels, 3, 3).astype(np.float32) * 0.1,
              "c1_bias": rng.randn(channels).astype(np.float32),
              "c2_weight": rng.randn(channels, channels, 3, 3).astype(np.float32) * 0.1,
              "c2_bias": rng.randn(channels).astype(np.float32)}
    data = rng.randn(1, channels, side, side).astype(np.float32)
    return y, params, data


@pytest.fixture(scope="module")
def compiled():
    y, params, data = _model()
    return y, params, data, mxc.compile(y, params, {"data": data.shape}, winograd="on")


def test_the_artifact_stores_the_weights_once(compiled, tmp_path):
    """Artifact <= 1.1x the parameters (it was ~4x: F(4, 3)'s weights compiled in).  The
    model's 1.2 MB of weights outweigh the ~0.1 MB of its kernels' code."""
    _, params, _, model = compiled
    wino = model.manifest["winograd"]
    weights = params["c1_weight"].nbytes + params["c2_weight"].nbytes
    assert wino["convolutions"] == wino["transformed_at_load"] == 2
    assert wino["stored_bytes"] == wino["weight_bytes"] == weights
    # 12x12 outputs make 9 F(4, 3) tiles, too few: F(2, 3), whose weights are 4x4 per 3x3
    assert wino["memory_bytes"] == wino["transformed_bytes"] == 16 * weights // 9
    path = model.save(tmp_path / "m.mxc")
    total = sum(v.nbytes for v in params.values())
    assert path.stat().st_size <= 1.1 * total, (path.stat().st_size, total)
    with zipfile.ZipFile(path) as zf:   # the weights are in params.npz, not in lib.so
        sizes = {i.filename: i.file_size for i in zf.infolist()}
    assert sizes["params.npz"] >= weights
    assert sizes["lib.so"] < weights


def test_a_small_library_is_deflated_a_large_one_stored(compiled, tmp_path, monkeypatch):
    """Code shrinks: a small model's library is deflated (its bytes and outputs intact)."""
    from mxc.runtime import artifact
    _, _, data, model = compiled
    want = model.run({"data": data})[0]
    for limit, method in ((8 << 20, zipfile.ZIP_DEFLATED), (1 << 10, zipfile.ZIP_STORED)):
        monkeypatch.setattr(artifact, "DEFLATE_LIBRARY_MAX", limit)
        path = model.save(tmp_path / f"{limit}.mxc")
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("lib.so")
        assert info.compress_type == method
        assert (info.compress_size < 0.9 * info.file_size) == (method == zipfile.ZIP_DEFLATED)
        assert artifact.read_artifact(path).library == model.library_bytes()
    np.testing.assert_array_equal(mxc.runtime.load(path).run({"data": data})[0], want)


def test_outputs_match_the_reference_and_the_direct_convolution(compiled):
    y, params, data, model = compiled
    got = model.run({"data": data})[0]
    want = run_graph(y.graph, {**params, "data": data})[0]
    tol = WINOGRAD_ATOL * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=tol)
    direct = mxc.compile(y, params, {"data": data.shape}, winograd="off")
    assert direct.manifest["winograd"]["convolutions"] == 0
    assert not any(s["kind"] == "load" for s in direct.runtime_graph["steps"])
    np.testing.assert_allclose(got, direct.run({"data": data})[0], rtol=1e-4, atol=tol)


def test_the_load_step_computes_what_numpy_computes(compiled):
    """The compiled transform (float64, rounded once) is numpy's to the last bit or one
    unit in the last place (FMA contraction may round differently)."""
    from mxc.backends.tvm.schedules.base.winograd_transforms import transform_weights
    _, _, _, model = compiled
    graph = model.runtime_graph
    (load,) = [s for s in graph["steps"] if s["kind"] == "load"]
    names = {p["slot"]: p["name"] for p in graph["params"]}
    sess = model.session()
    vm = sess._state().vm
    inputs = [model.params[names[s]] for s in load["inputs"]]
    from mxc.runtime import _tvm
    outs = vm[load["function"]](*[_tvm.from_numpy(a, _tvm.device("cpu", 0)) for a in inputs])
    assert len(outs) == len(inputs) == 2
    for w, u in zip(inputs, outs):
        u = _tvm.to_numpy(u)
        want = transform_weights(w, np.sqrt(u.shape[0]).astype(int) - 2, u.shape[3])
        np.testing.assert_array_max_ulp(u, want, maxulp=1)


def test_the_session_drops_the_weights_only_the_load_step_reads(compiled):
    from mxc.runtime.load_steps import load_only_slots
    _, _, _, model = compiled
    only = load_only_slots(model.plan)
    assert len(only) == 2
    assert all(model.session()._template[s] is None for s in only)


def test_other_threads_use_the_weights_transformed_by_the_loading_thread(compiled):
    """Each thread has its own VM; the transformed weights are the session's."""
    from concurrent.futures import ThreadPoolExecutor
    _, _, data, model = compiled
    want = model.run({"data": data})[0]
    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda _: model.run({"data": data})[0], range(4)))
    for got in outs:
        np.testing.assert_array_equal(got, want)


def test_a_fresh_process_loads_the_artifact_and_gets_the_same_outputs(compiled, tmp_path):
    _, _, data, model = compiled
    path = model.save(tmp_path / "m.mxc")
    np.save(tmp_path / "in.npy", data)
    code = ("import sys, numpy as np, mxc.runtime\n"
            "s = mxc.runtime.load(sys.argv[1])\n"
            "np.save(sys.argv[3], s.run({'data': np.load(sys.argv[2])})[0])\n")
    subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "in.npy"),
                    str(tmp_path / "out.npy")], check=True, cwd=REPO, timeout=300)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), model.run({"data": data})[0])


def test_tied_weights_are_stored_once():
    """Two convolutions of one weight array: one stored parameter, two transforms."""
    x = S.var("data")
    w = S.var("w")
    y = S.Convolution(x, weight=w, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True,
                      name="c1")
    y = S.Convolution(S.Activation(y, act_type="relu", name="r"), weight=w, kernel=(3, 3),
                      pad=(1, 1), num_filter=16, no_bias=True, name="c2")
    rng = np.random.RandomState(2)
    params = {"w": rng.randn(16, 16, 3, 3).astype(np.float32) * 0.2}
    data = rng.randn(1, 16, 8, 8).astype(np.float32)
    model = mxc.compile(y, params, {"data": data.shape}, winograd="on")
    (load,) = [s for s in model.runtime_graph["steps"] if s["kind"] == "load"]
    assert len(load["inputs"]) == 1 and len(load["outputs"]) == 2
    assert model.manifest["winograd"]["stored_bytes"] == params["w"].nbytes
    want = run_graph(y.graph, {**params, "data": data})[0]
    np.testing.assert_allclose(model.run({"data": data})[0], want, rtol=1e-4,
                               atol=WINOGRAD_ATOL * float(np.abs(want).max()))


def test_a_load_step_may_only_read_stored_parameters(compiled, tmp_path):
    """A forged graph.json whose load step reads a data input is refused at load."""
    from mxc.runtime.artifact import read_artifact, write_artifact
    _, _, _, model = compiled
    graph = json.loads(json.dumps(model.runtime_graph))
    load = next(s for s in graph["steps"] if s["kind"] == "load")
    load["inputs"][0] = graph["inputs"][0]["slot"]
    path = tmp_path / "forged.mxc"
    write_artifact(path, model.manifest, graph, model.params, model.library_bytes())
    with pytest.raises(ArtifactError, match="load step|stored parameter"):
        read_artifact(path)


def test_a_module_built_on_its_own_keeps_the_transformed_weights_compiled_in():
    """Outside ``mxc.compile`` (no region to feed) the transform is folded in numpy:
    the function keeps its signature and its outputs."""
    from mxc.backends.tvm.build import build_module, resolve_target
    from mxc.backends.tvm.build_context import build_context
    from mxc.backends.tvm.converter import lower_graph
    from mxc.backends.tvm.run import run_module
    y, params, data = _model(channels=16, side=8)
    mod = lower_graph(y.graph, shapes={"data": data.shape}, params=params)
    ctx = build_context(resolve_target("llvm"), winograd="on")   # no region to lift
    exe = build_module(mod, "llvm", ctx=ctx)
    assert ctx.records.winograd["convolutions"] == 2
    assert "_transform_params" not in exe.as_text()
    got = run_module(exe, [data])[0]            # main still takes the data only
    want = run_graph(y.graph, {**params, "data": data})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4,
                               atol=WINOGRAD_ATOL * float(np.abs(want).max()))


def test_the_load_time_evaluators_are_a_registry_that_finds_winograd_by_name():
    """The fold's evaluator comes from the ``load-time evaluators`` registry, whose
    built-in (the Winograd module) is found through its ``builtins`` name; it computes
    what the documented transform computes, and a miss names the known kinds."""
    from mxc.backends.tvm.load_time import EVALUATORS
    from mxc.backends.tvm.schedules.base.winograd_transforms import (
        WEIGHT_KERNEL, transform_weights, transformed_shape)
    from mxc.errors import BackendError
    assert EVALUATORS.entry(WEIGHT_KERNEL).builtin
    w = np.random.RandomState(0).randn(3, 3, 4, 8).astype(np.float32)
    shape = transformed_shape(w.shape, 2, 8)
    np.testing.assert_array_equal(EVALUATORS.lookup(WEIGHT_KERNEL)([w], shape),
                                  transform_weights(w, 2, 8))
    with pytest.raises(BackendError, match=r"no numpy evaluator for the load-time transform "
                                           r"'nope'; known: winograd_weight"):
        EVALUATORS.lookup("nope")
