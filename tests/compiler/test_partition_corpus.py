"""MXNet 1.9.1's default-backend partitions of the corpus models (``partition_*.json``).

For every golden: partitioning the model's ``symbol.json`` with the same
``op_names`` gives exactly MXNet's partitioned symbol (same regions, same
subgraph input names and order, same heads, attributes and entry versions,
compared structurally and recursively), the same ``list_outputs()``,
unchanged ``list_inputs/arguments/auxiliary_states``, and -- with the model's
parameters -- the same reference outputs as the unpartitioned model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import corpus_path, require_corpus
from mxc.backends.reference import run_graph
from mxc.compiler.ir.compare import graph_diff
from mxc.compiler.partition import partition_graph
from mxc.frontend.params import load_params, split_arg_aux
from mxc.frontend.symbol_json import load_json, load_json_file


def _goldens() -> list[str]:
    root = corpus_path()
    if root is None:
        return []
    return sorted(f"{p.parent.name}/{p.name}" for p in (root / "models").glob("*/partition_*.json"))


GOLDENS = _goldens() or ["no-corpus"]


def _load(golden_id: str):
    if golden_id == "no-corpus":
        require_corpus("models")
    root = require_corpus("models")
    model, fname = golden_id.split("/")
    golden = json.loads((root / model / fname).read_text())
    graph = load_json_file(root / model / "symbol.json")
    return root / model, graph, golden


@pytest.mark.corpus
@pytest.mark.parametrize("golden_id", GOLDENS)
def test_partition_matches_mxnet(golden_id):
    _, graph, golden = _load(golden_id)
    expected = load_json(json.dumps(golden["partitioned_symbol"]), source=golden_id)
    before = graph.copy()
    part = partition_graph(graph, "default", op_names=golden["op_names"])
    diff = graph_diff(part, expected)
    assert diff is None, diff
    assert part.list_outputs() == golden["partitioned_list_outputs"]
    cached = [n for n in part.nodes if n.op == "_CachedOp"]
    assert len(cached) == golden["num_subgraph_nodes"]
    assert part.list_inputs() == graph.list_inputs()
    assert part.list_arguments() == graph.list_arguments()
    assert part.list_auxiliary_states() == graph.list_auxiliary_states()
    part.verify()
    assert graph_diff(graph, before) is None, "the input graph was modified"


@pytest.mark.corpus
@pytest.mark.parametrize("golden_id", GOLDENS)
def test_default_v2_and_string_op_names_are_identical(golden_id):
    _, graph, golden = _load(golden_id)
    a = partition_graph(graph, "default", op_names=golden["op_names"])
    b = partition_graph(graph, "default_v2", op_names=",".join(golden["op_names"]))
    assert graph_diff(a, b) is None


@pytest.mark.corpus
@pytest.mark.parametrize("golden_id", GOLDENS)
def test_partitioned_outputs_equal_original(golden_id):
    model_dir, graph, golden = _load(golden_id)
    args, aux = split_arg_aux(load_params(model_dir / "model.params"))
    io = np.load(model_dir / "io.npz")
    feeds = {**args, **aux, **{k[4:]: io[k] for k in io.files if k.startswith("in__")}}
    part = partition_graph(graph, "default", op_names=golden["op_names"])
    want = run_graph(graph, feeds)
    got = run_graph(part, feeds)
    assert len(got) == len(want)
    for i, (x, y) in enumerate(zip(got, want)):
        assert x.shape == y.shape and x.dtype == y.dtype, f"output {i}"
        np.testing.assert_array_equal(x, y, err_msg=f"{golden_id} output {i}")
