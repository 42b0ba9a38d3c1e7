"""MXNet inference scripts on the corpus models: ``mx.mod.Module`` and ``SymbolBlock.imports``.

Oracle: each model's ``io.npz`` (MXNet 1.9.1's outputs for its inputs), compared
with the corpus rule (tests/oracle.py) and the model's own rtol/atol.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc.mxnet as mx
from mxc.mxnet.gluon import nn
from tests.conftest import require_corpus
from tests.oracle import assert_close

MODELS = ["mlp", "lenet"]


def _model(name):
    root = require_corpus(f"models/{name}")
    meta = json.loads((root / "meta.json").read_text())
    io = dict(np.load(root / "io.npz"))
    inputs = {k[len("in__"):]: v for k, v in io.items() if k.startswith("in__")}
    outputs = [io[f"out__{i}"] for i in range(len(meta["list_outputs"]))]
    return root, meta, inputs, outputs


def _checkpoint(root, tmp_path):
    """The corpus files as an MXNet checkpoint (prefix-symbol.json + prefix-0000.params)."""
    prefix = tmp_path / "model"
    (tmp_path / "model-symbol.json").write_text((root / "symbol.json").read_text())
    (tmp_path / "model-0000.params").write_bytes((root / "model.params").read_bytes())
    return str(prefix)


@pytest.mark.parametrize("name", MODELS)
def test_module_predicts_corpus_outputs(name, tmp_path):
    root, meta, inputs, outputs = _model(name)
    sym, arg_params, aux_params = mx.model.load_checkpoint(_checkpoint(root, tmp_path), 0)
    data_names = [n for n in inputs if n in sym.list_arguments() and n not in arg_params
                  and not n.endswith("label")]
    label_names = [n for n in inputs if n.endswith("label")]
    mod = mx.mod.Module(sym, data_names=data_names, label_names=label_names, context=mx.cpu())
    mod.bind(data_shapes=[(n, inputs[n].shape) for n in data_names], for_training=False)
    mod.set_params(arg_params, aux_params)
    mod.forward(mx.io.DataBatch([mx.nd.array(inputs[n]) for n in data_names]))
    got = mod.get_outputs()
    assert len(got) == len(outputs)
    for i, (g, w) in enumerate(zip(got, outputs)):
        assert_close(g.asnumpy(), w, meta["rtol"], meta["atol"] * max(1.0, np.abs(w).max()),
                     f"{name} output {i}")
    # predict() over an iterator with a padded last batch gives the same rows
    n = inputs[data_names[0]].shape[0]
    it = mx.io.NDArrayIter(inputs[data_names[0]], batch_size=n)
    np.testing.assert_array_equal(mod.predict(it).asnumpy(), got[0].asnumpy())


@pytest.mark.parametrize("name", MODELS)
def test_symbolblock_imports_corpus_model(name, tmp_path):
    root, meta, inputs, outputs = _model(name)
    prefix = _checkpoint(root, tmp_path)
    names = list(inputs)
    block = nn.SymbolBlock.imports(prefix + "-symbol.json", names, prefix + "-0000.params")
    got = block(*[mx.nd.array(inputs[n]) for n in names])
    got = got if isinstance(got, list) else [got]
    for i, (g, w) in enumerate(zip(got, outputs)):
        assert_close(g.asnumpy(), w, meta["rtol"], meta["atol"] * max(1.0, np.abs(w).max()),
                     f"{name} output {i}")
    # export then import again: same parameters, same outputs
    block.export(str(tmp_path / "again"), 3)
    again = nn.SymbolBlock.imports(str(tmp_path / "again-symbol.json"), names,
                                   str(tmp_path / "again-0003.params"))
    out2 = again(*[mx.nd.array(inputs[n]) for n in names])
    out2 = out2 if isinstance(out2, list) else [out2]
    np.testing.assert_array_equal(out2[0].asnumpy(), got[0].asnumpy())


def test_module_refuses_training():
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None)
    with pytest.raises(mx.base.NotSupportedError, match="for_training"):
        mod.bind(data_shapes=[("data", (1, 3))])
