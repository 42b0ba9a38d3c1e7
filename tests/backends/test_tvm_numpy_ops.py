"""The DeepNumpy cases of the wave-2 corpus lowered to TVM, compiled for this CPU and run.

Like ``test_tvm_ops.py`` for the first corpus: one single-op graph per case
(non-data inputs bound as constants), outputs compared with MXNet's within
the case tolerance.  Cases whose node stays on the host are skipped with the
reason the converter registry records.  All cases of one numpy family share
one compiled module, built once per session.
"""

from __future__ import annotations

import traceback
from functools import cache

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import op_cases, require_corpus
from oracle import assert_close

from mxc.backends.tvm import ModuleBuilder, build_module, load_vm, run_module
from mxc.backends.tvm.converter import unsupported_nodes
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ops.registry import has_op, registered_ops
from mxc.frontend.symbol_json import load_json

SPLIT = "wave2/ops"
CASES = {c["id"]: c for c in op_cases(SPLIT)
         if c.get("np_shape") and not c.get("random") and has_op(c["op"])
         and registered_ops()[c["op"]].family.startswith("numpy")}
IDS = list(CASES) or ["no-corpus"]


def _lower(mb, case, data):
    graph = load_json(case["symbol"], source=f"{case['id']}.json")
    shapes = infer_shapes(graph, {i["name"]: tuple(i["shape"]) for i in case["inputs"]})
    dtypes = infer_types(graph, {i["name"]: i["dtype"] for i in case["inputs"]})
    bad = unsupported_nodes(graph, shapes, dtypes)
    if bad:
        return ("skip", "host fallback: " + "; ".join(bad.values()), [])
    data_names = set(case.get("data_inputs") or case["infer"]["given"])
    params = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]
              if i["name"] not in data_names}
    func = "case_" + case["id"]
    info = mb.add(func, graph, shapes=shapes, dtypes=dtypes, params=params)
    return ("ok", func, info.input_names)


@cache
def _family_build(family: str):
    root = require_corpus(SPLIT)
    mb = ModuleBuilder()
    built = {}
    for cid, case in CASES.items():
        if registered_ops()[case["op"]].family != family:
            continue
        try:
            built[cid] = _lower(mb, case, np.load(root / "data" / f"{cid}.npz"))
        except Exception:
            built[cid] = ("error", "lowering failed:\n" + traceback.format_exc(), [])
    funcs = [b[1] for b in built.values() if b[0] == "ok"]
    if not funcs:
        return built, {}
    try:
        vm = load_vm(build_module(mb.finalize()))
        return built, {f: vm for f in funcs}
    except Exception:   # one bad function must not sink the family: build each alone
        vms = {}
        for cid, b in built.items():
            if b[0] != "ok":
                continue
            try:
                single = ModuleBuilder()
                _lower(single, CASES[cid], np.load(root / "data" / f"{cid}.npz"))
                vms[b[1]] = load_vm(build_module(single.finalize()))
            except Exception:
                built[cid] = ("error", "compilation failed:\n" + traceback.format_exc(), [])
        return built, vms


@pytest.mark.parametrize("case_id", IDS)
def test_tvm_numpy_op_case(case_id):
    if case_id == "no-corpus":
        require_corpus(SPLIT)
    root = require_corpus(SPLIT)
    case = CASES[case_id]
    built, vms = _family_build(registered_ops()[case["op"]].family)
    status, what, input_names = built[case_id]
    if status == "skip":
        pytest.skip(what)
    if status == "error":
        pytest.fail(what, pytrace=False)
    data = np.load(root / "data" / f"{case_id}.npz")
    outs = run_module(vms[what], [data[f"in__{n}"] for n in input_names], func_name=what)
    assert len(outs) == len(case["outputs"])
    for i, got in enumerate(outs):
        assert_close(np.asarray(got), data[f"out__{i}"], case["rtol"], case["atol"],
                     f"{case_id} output {i}")


def test_numpy_graph_compiles_with_host_steps_and_0d_outputs(tmp_path):
    """Promotion, a 0-d reduction and a host-only decomposition in one compiled artifact;
    NumPy computes the expected values."""
    import json

    import mxc
    import mxc.runtime

    doc = {"nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "k", "inputs": []},
        {"op": "_npi_multiply", "name": "scaled", "inputs": [[0, 0, 0], [1, 0, 0]]},
        {"op": "_np_sum", "name": "total", "inputs": [[2, 0, 0]]},
        {"op": "_npi_svd", "name": "svd", "inputs": [[2, 0, 0]]},
        {"op": "_npi_exp", "name": "e", "inputs": [[4, 1, 0]]},
    ], "arg_nodes": [0, 1], "heads": [[3, 0, 0], [5, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901], "is_np_shape": ["int", 1]}}
    sym = mxc.sym.load_json(json.dumps(doc))
    model = mxc.compile(sym, ({}, {}), shapes={"x": (2, 3), "k": (3,)},
                        dtypes={"x": "int32", "k": "float32"})
    sess = mxc.runtime.load(model.save(str(tmp_path / "np.mxc")))
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    k = np.array([1.0, 0.5, 2.0], dtype=np.float32)
    total, e = sess.run({"x": x, "k": k})
    prod = x.astype(np.float64) * k
    assert total.shape == () and total.dtype == np.float32
    np.testing.assert_allclose(total, prod.sum(), rtol=1e-6)
    np.testing.assert_allclose(e, np.exp(np.linalg.svd(prod, compute_uv=False)), rtol=1e-5)
