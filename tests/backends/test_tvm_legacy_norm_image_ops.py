"""Wave-2 op cases of the legacy, norm, RNN-parameter and image ops, lowered to TVM and run.

The single-op graph of each case (``corpus/wave2/ops``) is lowered with every
non-data input bound as a constant, compiled for the host CPU in ONE module
(one function per case), and its outputs must match MXNet 1.9.1's within the
case tolerance -- the same oracle as the reference-backend test.  Every op
listed here has a converter, so none may fall back to the host.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

pytest.importorskip("tvm")

from conftest import op_cases, require_corpus
from oracle import assert_close

from mxc.backends.tvm import ModuleBuilder, build_module, load_vm, run_module
from mxc.backends.tvm.converter import unsupported_nodes
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.frontend.symbol_json import load_json

SPLIT = "wave2/ops"
OPS = {"Convolution_v1", "Pooling_v1", "BatchNorm_v1", "_contrib_SyncBatchNorm",
       "_contrib_BatchNormWithReLU", "_rnn_param_concat", "_image_to_tensor",
       "_image_normalize", "_image_resize", "_image_crop", "_image_flip_left_right",
       "_image_flip_top_bottom", "_image_adjust_lighting", "_cvimresize"}
CASES = {c["id"]: c for c in op_cases(SPLIT) if c["op"] in OPS}
IDS = list(CASES) or ["no-corpus"]


@cache
def _built():
    root = require_corpus(SPLIT)
    mb = ModuleBuilder()
    names = {}
    for cid, case in CASES.items():
        data = np.load(root / "data" / f"{cid}.npz")
        graph = load_json(case["symbol"], source=f"{cid}.json")
        shapes = infer_shapes(graph, {i["name"]: tuple(i["shape"]) for i in case["inputs"]})
        dtypes = infer_types(graph, {i["name"]: i["dtype"] for i in case["inputs"]})
        bad = unsupported_nodes(graph, shapes, dtypes)
        assert not bad, f"{cid}: {bad}"
        data_names = set(case.get("data_inputs") or case["infer"]["given"])
        params = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]
                  if i["name"] not in data_names}
        info = mb.add("case_" + cid.replace("-", "_"), graph, shapes=shapes, dtypes=dtypes,
                      params=params)
        names[cid] = (info.name, info.input_names)
    return load_vm(build_module(mb.finalize())), names


@pytest.mark.parametrize("case_id", IDS)
def test_tvm_wave2_case(case_id):
    root = require_corpus(SPLIT)
    case = CASES[case_id]
    vm, names = _built()
    func, input_names = names[case_id]
    data = np.load(root / "data" / f"{case_id}.npz")
    outs = run_module(vm, [data[f"in__{n}"] for n in input_names], func_name=func)
    assert len(outs) == len(case["outputs"])
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        if not spec.get("ignore"):
            assert_close(np.asarray(got), data[f"out__{i}"], case["rtol"], case["atol"],
                         f"{case_id} output {i} (tvm)")
