"""``mx.mod.Module`` habits of MXNet 1.x (issue 22, item 12).

Original failures: ``forward`` with a batch of another size than the bound one raised
``NotSupportedError`` (MXNet rebinds: ``Module.reshape``), and ``Module.fit`` was an
``AttributeError`` instead of the documented ``NotSupportedError``.  Oracles: the
symbol's own executor bound for the full batch (inference rows are independent, so
the first k rows of its output are what a batch of k gives) and, with the corpus,
MXNet 1.9.1's outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mxc.mxnet as mx
from tests.conftest import require_corpus
from tests.oracle import assert_close

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp"


@pytest.fixture()
def mlp():
    sym, args, aux = mx.model.load_checkpoint(str(MLP / "mlp"), 0)
    x = np.load(MLP / "input.npz")["data"]
    feeds = {**args, "data": mx.nd.array(x), "softmax_label": mx.nd.zeros(len(x))}
    full = sym.bind(args=feeds, aux_states=aux).forward()[0].asnumpy()
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", x.shape)], for_training=False)
    mod.set_params(args, aux)
    return mod, x, full


def test_forward_with_another_batch_size_reshapes(mlp):
    mod, x, full = mlp
    for k in (1, 3, len(x)):                        # smaller, then back to the bound size
        mod.forward(mx.io.DataBatch([mx.nd.array(x[:k])]))
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), full[:k], rtol=1e-5,
                                   atol=1e-6)
        assert mod.data_shapes[0].shape == (k, 784)
        assert mod.output_shapes == [("softmax_output", (k, 10))]
    bigger = np.concatenate([x, x])                 # larger than bound: rebinds too
    mod.forward(mx.io.DataBatch([mx.nd.array(bigger)]))
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), np.concatenate([full, full]),
                               rtol=1e-5, atol=1e-6)


def test_predict_follows_the_reshape(mlp):
    mod, x, full = mlp
    mod.forward(mx.io.DataBatch([mx.nd.array(x[:1])]))   # now bound for 1 row
    np.testing.assert_allclose(mod.predict(mx.nd.array(x)).asnumpy(), full, rtol=1e-5,
                               atol=1e-6)


def test_a_shape_the_graph_cannot_take_says_how(mlp):
    mod, x, _ = mlp
    with pytest.raises(mx.base.MXNetError, match=r"cannot take data \(4, 785\).*fc1"):
        mod.forward(mx.io.DataBatch([mx.nd.zeros((4, 785))]))   # the weights fix 784
    data = mx.sym.var("data")
    fixed = mx.sym.FullyConnected(mx.sym.Reshape(data, shape=(4, 6)), num_hidden=2, name="fc")
    m = mx.mod.Module(fixed, data_names=["data"], label_names=None)
    m.bind(data_shapes=[("data", (4, 6))], for_training=False)
    m.set_params({"fc_weight": mx.nd.ones((2, 6)), "fc_bias": mx.nd.zeros(2)}, {})
    with pytest.raises(mx.base.MXNetError) as info:
        m.forward(mx.io.DataBatch([mx.nd.zeros((2, 6))]))
    text = str(info.value)
    assert "cannot take data (2, 6)" in text and "bound for data (4, 6)" in text
    assert "last_batch_handle='pad'" in text
    m.forward(mx.io.DataBatch([mx.nd.ones((4, 6))]))           # still bound for (4, 6)
    np.testing.assert_array_equal(m.get_outputs()[0].asnumpy(), np.full((4, 2), 6.0))


def test_fit_raises_the_documented_error(mlp):
    mod, x, _ = mlp
    with pytest.raises(mx.base.NotSupportedError, match="Module.fit"):
        mod.fit(mx.io.NDArrayIter(x, batch_size=2), num_epoch=1)
    guide = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-mxnet.md").read_text()
    assert "`Module.fit`" in guide and "`Module.reshape`" in guide


@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_corpus_models_reshape_to_a_smaller_batch(name, tmp_path):
    root = require_corpus(f"models/{name}")
    meta = json.loads((root / "meta.json").read_text())
    io = dict(np.load(root / "io.npz"))
    inputs = {k[len("in__"):]: v for k, v in io.items() if k.startswith("in__")}
    want = io["out__0"]
    prefix = tmp_path / "model"
    (tmp_path / "model-symbol.json").write_text((root / "symbol.json").read_text())
    (tmp_path / "model-0000.params").write_bytes((root / "model.params").read_bytes())
    sym, args, aux = mx.model.load_checkpoint(str(prefix), 0)
    data = [n for n in inputs if n in sym.list_arguments() and n not in args
            and not n.endswith("label")]
    if len(data) != 1 or len(inputs[data[0]]) < 2:
        pytest.skip("one data input with a batch of 2 or more wanted")
    mod = mx.mod.Module(sym, data_names=data, label_names=[n for n in inputs
                                                          if n.endswith("label")])
    x = inputs[data[0]]
    mod.bind(data_shapes=[(data[0], x.shape)], for_training=False)
    mod.set_params(args, aux)
    k = len(x) // 2
    mod.forward(mx.io.DataBatch([mx.nd.array(x[:k])]))
    got = mod.get_outputs()[0].asnumpy()
    assert_close(got, want[:k], meta["rtol"], meta["atol"] * max(1.0, np.abs(want).max()),
                 f"{name} first {k} rows")


#: MXNet 1.9.1's public ``Module`` API (python/mxnet/module/module.py and base_module.py)
MXNET_MODULE_API = (
    "forward_backward score iter_predict predict fit data_names output_names data_shapes "
    "label_shapes output_shapes get_params init_params set_params save_params load_params "
    "get_states set_states install_monitor prepare bind init_optimizer forward backward "
    "get_outputs get_input_grads update update_metric symbol load save_checkpoint reshape "
    "borrow_optimizer save_optimizer_states load_optimizer_states").split()
#: MXNet 1.9.1's top-level modules a script may use
MXNET_MODULES = ("nd sym autograd metric optimizer kv kvstore callback image recordio profiler "
                 "np npx test_utils contrib lr_scheduler visualization viz io mod model init "
                 "initializer gluon random library operator rnn monitor engine runtime "
                 "util").split()


def test_the_guide_lists_every_missing_module_method_and_module():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-mxnet.md").read_text()
    missing = [n for n in MXNET_MODULE_API if not hasattr(mx.mod.Module, n)]
    assert "fit" not in missing and "reshape" not in missing
    for name in missing:
        assert f"`{name}`" in guide, name
    for name in MXNET_MODULES:
        try:
            getattr(mx, name)
        except AttributeError:
            assert f"`mx.{name}`" in guide, name
