"""Issue 28, item 9: Module.bind/set_params refuse what MXNet refuses, with MXNetError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mxc.mxnet as mx
from mxc.mxnet.base import MXNetError
from mxc.mxnet.module import MAX_TENSOR_ELEMENTS

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp" / "mlp"


@pytest.fixture(scope="module")
def mlp():
    return mx.model.load_checkpoint(str(MLP), 0)


def _module(sym):
    return mx.mod.Module(sym, context=mx.cpu())


@pytest.mark.parametrize("shape,message", [
    ((2 ** 40, 784), "larger than 2\\^31 elements"),
    ((2 ** 31, 2 ** 31), "larger than 2\\^31 elements"),
    ((2 ** 31,), "larger than 2\\^31 elements"),
])
def test_declared_sizes_are_capped_before_allocating(mlp, shape, message):
    """Were a bare MemoryError and numpy's 'array is too big'."""
    with pytest.raises(MXNetError, match=message):
        _module(mlp[0]).bind(data_shapes=[("data", shape)], for_training=False)
    assert np.prod(shape, dtype=object) > MAX_TENSOR_ELEMENTS


@pytest.mark.parametrize("data_shapes,message", [
    ("data", "data_shapes must be a list"),
    (5, "data_shapes must be a list"),
    ([(None, (4, 784))], "a data name must be a string"),
    ([("data", "4,784")], "must be a tuple of integers, not str"),
    ([("data",)], "a DataDesc or a \\(name, shape\\) pair"),
    (["data"], "a DataDesc or a \\(name, shape\\) pair"),
    ([("data", (4, -1))], "non-negative integers"),
    ([("data", (4.5, 784))], "non-negative integers"),
    ([("data", (True, 784))], "non-negative integers"),
    ([mx.io.DataDesc("data", (4, "a"))], "non-negative integers"),
])
def test_malformed_data_shapes_are_mxnet_errors(mlp, data_shapes, message):
    """Were bare IndexError, TypeError and ValueError."""
    mod = _module(mlp[0])
    with pytest.raises(MXNetError, match=message):
        mod.bind(data_shapes=data_shapes, for_training=False)
    assert not mod.binded


@pytest.mark.parametrize("shape", [(4,), (4, 5)])
def test_wrong_data_shape_then_set_params_is_an_mxnet_error(mlp, shape):
    """Was numpy's 'could not broadcast input array' (ValueError)."""
    sym, arg, aux = mlp
    mod = _module(sym)
    mod.bind(data_shapes=[("data", shape)], for_training=False)
    with pytest.raises(MXNetError, match=r"argument 'fc1_weight' has shape \(128, 784\), but "
                                         r"the module bound for data\(4,"):
        mod.set_params(arg, aux)


def test_well_formed_binds_still_run(mlp):
    sym, arg, aux = mlp
    x = np.load(str(MLP.parent / "input.npz"))["data"]
    mod = _module(sym)
    mod.bind(data_shapes=[mx.io.DataDesc("data", (np.int64(4), 784))], for_training=False)
    mod.set_params(arg, aux)
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]), is_train=False)
    probs = mod.get_outputs()[0].asnumpy()
    assert probs.shape == (4, 10) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)


def test_a_shape_for_a_name_the_symbol_lacks_is_an_mxnet_error(mlp):
    with pytest.raises(MXNetError, match="'so_ftmax_label' is not an input of the symbol"):
        _module(mlp[0]).bind(data_shapes=[("data", (4, 784))],
                             label_shapes=[("so_ftmax_label", (4,))], for_training=False)


@pytest.mark.parametrize("key", [([[0, 1], [0]],), 2 ** 63, (0, [0, [1]])])
def test_odd_ndarray_indices_raise_indexerror_as_mxnet(key):
    """Ragged or huge keys gave numpy's ValueError/OverflowError (found by bench/fuzz.py)."""
    a = mx.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    with pytest.raises(IndexError):
        a[key]
