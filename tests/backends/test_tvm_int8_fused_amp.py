"""Wave-2 op cases of the quantized, oneDNN-fused and AMP families, and the bfloat16 AMP models, compiled.

Oracle: the case's MXNet 1.9.1 outputs within its tolerance (``output_tols``
for the int8 codes and ranges).  Every node must be lowered to TVM except the
ops registered as deliberately host-only, so a converter that silently falls
back cannot pass.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import op_cases, require_corpus
from oracle import assert_close

pytest.importorskip("tvm")

import mxc  # noqa: E402
from mxc.backends.tvm.converter import host_only_ops  # noqa: E402
from mxc.frontend.symbol_json import load_json  # noqa: E402

SPLIT = "wave2/ops"
FAMILIES = ("_contrib_quantize", "_contrib_quantized_", "_contrib_calibrate", "_sg_mkldnn_",
            "amp_")
CASES = [c for c in op_cases(SPLIT) if c["op"].startswith(FAMILIES)]

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("case", CASES or [None], ids=[c["id"] for c in CASES] or ["no-corpus"])
def test_wave2_case_compiles_and_matches(case):
    root = require_corpus(SPLIT)
    if case is None:
        pytest.skip("no wave-2 op cases")
    graph = load_json(case["symbol"], source=case["id"])
    sym = mxc.sym.Symbol.from_graph(graph)
    data = np.load(root / "data" / f"{case['id']}.npz")
    data_inputs = set(case["data_inputs"])
    feeds = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]
             if i["name"] in data_inputs}
    bound = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]
             if i["name"] not in data_inputs}
    args = {k: v for k, v in bound.items() if k in case["list_arguments"]}
    aux = {k: v for k, v in bound.items() if k in case["list_auxiliary_states"]}
    model = mxc.compile(sym, (args, aux), shapes={k: v.shape for k, v in feeds.items()},
                        dtypes={k: str(v.dtype) for k, v in feeds.items()})
    deliberate = host_only_ops()
    assert all(graph.find(name) is not None and graph.find(name).op in deliberate
               for name in model.host_nodes), model.host_nodes
    outs = model.session().run(feeds)
    tols = case.get("output_tols")
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        rtol, atol = tols[i] if tols else (case["rtol"], case["atol"])
        assert_close(np.asarray(got), data[f"out__{i}"], rtol, atol,
                     f"{case['id']} output {i} (compiled)")


@pytest.mark.parametrize("name", ["amp_bf16_cnn", "amp_bf16_cnn_noskip"])
def test_amp_bfloat16_model_lowers_entirely(name):
    """bfloat16 AMP graphs compile with no host node and match MXNet within the model's tolerance."""
    import json
    root = require_corpus("wave2/models") / name
    meta = json.loads((root / "meta.json").read_text())
    params = mxc.nd.load(root / "model.params")
    assert any(v.dtype.name == "bfloat16" for v in params.values())
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    model = mxc.compile(mxc.sym.load(root / "symbol.json"), (args, aux),
                        shapes={k: v.shape for k, v in feeds.items()})
    assert model.host_nodes == {}
    for i, got in enumerate(model.session().run(feeds)):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"], f"{name} {i}")
