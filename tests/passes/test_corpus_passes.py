"""Every built-in pass on every corpus model: outputs unchanged, graph valid, node counts.

Oracle: the model's ``io.npz`` (MXNet 1.9.1's outputs) within the model's
``rtol``/``atol``.  A pass that leaves the graph structurally equal and the
parameters untouched is checked structurally (the outputs cannot change);
every other result runs on the reference backend.  The node counts before and
after each pass are printed as a table by ``test_node_count_summary``.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

import mxc
from conftest import model_names, require_corpus
from mxc.backends.reference import run_graph
from mxc.compiler.ir.compare import graphs_equal

MODELS = model_names() or ["no-corpus"]
BUILTINS = ["dce", "remove-dropout", "simplify", "fold-constants", "fold-batchnorm", "cse"]
FULL = "remove-dropout,simplify,fold-constants,fold-batchnorm,cse,dce"
LAYERS = {"Convolution", "FullyConnected", "Deconvolution"}

pytestmark = pytest.mark.corpus


@lru_cache(maxsize=None)
def load(name):
    root = require_corpus("models") / name
    meta = json.loads((root / "meta.json").read_text())
    sym = mxc.sym.load(root / "symbol.json")
    params = mxc.nd.load(root / "model.params")
    io = dict(np.load(root / "io.npz"))
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    return meta, sym, args, aux, io


@lru_cache(maxsize=None)
def optimized(name, pipeline):
    meta, sym, args, aux, io = load(name)
    return mxc.passes.run(sym, pipeline, args, aux)


def node_count(graph) -> int:
    return len(graph.topo_order())


def foldable_batchnorms(graph) -> int:
    """BatchNorms reading output 0 of a Conv/FC/Deconv that nothing else reads."""
    outputs = [e.key for e in graph.outputs]
    count = 0
    for node in graph.topo_order():
        if node.op is None or node.opdef.name != "BatchNorm":
            continue
        src = node.inputs[0]
        if src.node.op is None or src.node.opdef.name not in LAYERS:
            continue
        uses = sum(1 for u in src.node.users for e in u.inputs if e.key == src.key)
        if uses + outputs.count(src.key) == 1:
            count += 1
    return count


def check_outputs(name, result):
    meta, sym, args, aux, io = load(name)
    unchanged = graphs_equal(sym.graph, result.graph) and not result.allocated and \
        not result.removed
    if unchanged:
        return
    feeds = {k[4:]: io[k] for k in io if k.startswith("in__")}
    outs = run_graph(result.graph, {**result.args, **result.aux, **feeds})
    assert len(outs) == len(meta["list_outputs"])
    for i, got in enumerate(outs):
        want = io[f"out__{i}"]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=meta["rtol"], atol=meta["atol"],
                                   err_msg=f"{name} output {i} after {result.statistics}")


@pytest.mark.parametrize("pipeline", BUILTINS + [FULL])
@pytest.mark.parametrize("name", MODELS)
def test_pass_keeps_outputs(name, pipeline, record_property):
    meta, sym, args, aux, io = load(name)
    result = optimized(name, pipeline)
    result.graph.verify()
    data_inputs = {k[4:] for k in io if k.startswith("in__")}
    assert data_inputs <= set(result.symbol.list_inputs()), "a data input disappeared"
    unused = set(result.symbol.list_inputs()) - set(result.args) - set(result.aux) - data_inputs
    assert not unused - set(sym.list_inputs()), f"inputs without values: {unused}"
    check_outputs(name, result)
    record_property("nodes", f"{node_count(sym.graph)} -> {node_count(result.graph)}")


@pytest.mark.parametrize("name", MODELS)
def test_fold_batchnorm_removes_every_foldable_batchnorm(name):
    meta, sym, args, aux, io = load(name)
    before = foldable_batchnorms(sym.graph)
    result = optimized(name, "fold-batchnorm")
    assert foldable_batchnorms(result.graph) == 0
    removed = meta["ops"].get("BatchNorm", 0) - sum(
        1 for n in result.graph.topo_order() if n.op == "BatchNorm")
    assert removed >= before  # the unfoldable ones may become a scale and shift too
    if name in ("mobilenet0.25", "mobilenetv2_0.25", "resnet18_v1"):
        assert before == meta["ops"]["BatchNorm"]  # every BatchNorm follows a conv


def test_node_count_summary(capsys):
    """Print the table of node counts (reachable nodes, variables included)."""
    require_corpus("models")
    columns = BUILTINS + ["full"]
    lines = [f"{'model':<18}{'nodes':>7}" + "".join(f"{c:>16}" for c in columns)]
    for name in MODELS:
        meta, sym, args, aux, io = load(name)
        cells = [node_count(optimized(name, FULL if c == "full" else c).graph)
                 for c in columns]
        lines.append(f"{name:<18}{node_count(sym.graph):>7}" + "".join(f"{c:>16}"
                                                                       for c in cells))
    with capsys.disabled():
        print("\nnode counts after each built-in pass (full = " + FULL + "):")
        print("\n".join(lines))
