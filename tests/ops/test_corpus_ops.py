"""Every single-operator case computed by MXNet 1.9.1 (``corpus/ops``).

For each case: ``list_*`` equal MXNet's, ``infer_shape`` from the data inputs
alone recovers every argument/aux/output shape MXNet inferred (weights
included), dtypes agree, and the reference backend's outputs match MXNet's
within the case's tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import op_cases, require_corpus
from oracle import assert_close
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types

from mxc.frontend.symbol_json import load_json

CASES = op_cases()
IDS = [c["id"] for c in CASES] or ["no-corpus"]


def _case(case_id):
    if case_id == "no-corpus":
        require_corpus("ops")
    return next(c for c in CASES if c["id"] == case_id)


@pytest.mark.parametrize("case_id", IDS)
def test_op_case(case_id):
    case = _case(case_id)
    root = require_corpus("ops")
    graph = load_json(case["symbol"], source=f"{case_id}.json")
    assert graph.list_arguments() == case["list_arguments"]
    assert graph.list_auxiliary_states() == case["list_auxiliary_states"]
    assert graph.list_outputs() == case["list_outputs"]

    # shape inference from the data inputs only
    inf = case["infer"]
    shapes = infer_shapes(graph, {k: tuple(v) for k, v in inf["given"].items()})
    args = graph.argument_nodes()
    for n in args:
        want = inf["arg_shapes"].get(n.name)
        got = shapes.get((n, 0))
        assert (list(got) if got is not None else None) == want, f"arg {n.name}"
    for n in graph.aux_nodes():
        want = inf["aux_shapes"].get(n.name)
        got = shapes.get((n, 0))
        assert (list(got) if got is not None else None) == want, f"aux {n.name}"
    for e, want in zip(graph.outputs, inf["out_shapes"]):
        got = shapes.get(e.key)
        assert (list(got) if got is not None else None) == want, "output shape"

    # dtype inference from all inputs' dtypes
    dtypes = infer_types(graph, {i["name"]: i["dtype"] for i in case["inputs"]})
    for e, want in zip(graph.outputs, case["outputs"]):
        assert dtypes.get(e.key) == want["dtype"], "output dtype"

    # reference numerics
    data = np.load(root / "data" / f"{case_id}.npz")
    feeds = {i["name"]: data[f"in__{i['name']}"] for i in case["inputs"]}
    outs = run_graph(graph, feeds)
    tols = case.get("output_tols")
    for i, (got, spec) in enumerate(zip(outs, case["outputs"])):
        if spec.get("ignore"):
            continue
        rtol, atol = tols[i] if tols else (case["rtol"], case["atol"])
        assert_close(got, data[f"out__{i}"], rtol, atol, f"{case_id} output {i}")
