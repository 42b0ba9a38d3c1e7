"""``mxc.mxnet`` API behaviour, against hand-computed values and MXNet's documented semantics."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import mxc.mxnet as mx
from mxc.errors import MxcError, ShapeError


def test_ndarray_basics_and_shared_slices():
    a = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    assert a.dtype == np.float32 and a.shape == (2, 3) and a.stype == "default"
    assert a.context == mx.cpu()
    row = a[1]
    row[:] = 0                                # basic slicing shares memory, as in MXNet
    assert a.asnumpy().tolist() == [[1, 2, 3], [0, 0, 0]]
    b = a * 2 + 1
    assert b.asnumpy().tolist() == [[3, 5, 7], [1, 1, 1]]
    assert (1 - a).asnumpy().tolist() == [[0, -1, -2], [1, 1, 1]]
    assert (a / 2).asnumpy()[0, 1] == 1.0
    assert mx.nd.zeros((2, 2), dtype="int32").dtype == np.int32
    assert mx.nd.ones(3).asnumpy().tolist() == [1, 1, 1]


def test_save_load_roundtrip(tmp_path):
    data = {"w": mx.nd.array([[1.5, -2]]), "b": mx.nd.array([3], dtype="int64")}
    mx.nd.save(str(tmp_path / "p.params"), data)
    back = mx.nd.load(str(tmp_path / "p.params"))
    assert sorted(back) == ["b", "w"]
    assert back["w"].asnumpy().tolist() == [[1.5, -2.0]] and back["b"].dtype == np.int64
    mx.nd.save(str(tmp_path / "l.params"), [mx.nd.ones(2)])
    assert isinstance(mx.nd.load(str(tmp_path / "l.params")), list)


def test_operator_functions_and_namespaces():
    a = mx.nd.array([[1, 2], [3, 4]])
    b = mx.nd.array([[5], [6]])
    assert mx.nd.linalg.gemm2(a, b).asnumpy().tolist() == [[17], [39]]   # 1*5+2*6, 3*5+4*6
    assert mx.nd.dot(a, b, transpose_a=True).asnumpy().tolist() == [[23], [34]]
    assert np.allclose(mx.nd.log(mx.nd.exp(a)).asnumpy(), a.asnumpy())
    with pytest.raises(AttributeError, match="no_such_op"):
        mx.nd.no_such_op
    s = mx.sym.linalg.gemm2(mx.sym.var("x"), mx.sym.var("y"))
    assert isinstance(s, mx.sym.Symbol) and s.list_arguments() == ["x", "y"]


def test_wrong_number_of_inputs_is_mxnet_error():
    with pytest.raises(mx.MXNetError, match=r"expects 2 inputs, but got 3 instead"):
        mx.nd.dot(mx.nd.ones((2, 2)), mx.nd.ones((2, 2)), mx.nd.ones((2, 2)))


def test_errors_are_mxnet_and_mxc_errors():
    with pytest.raises(mx.MXNetError) as info:
        mx.nd.dot(mx.nd.ones((2, 3)), mx.nd.ones((2, 3)))
    assert isinstance(info.value, ShapeError) and type(info.value).__name__ == "MXNetError"
    with pytest.raises(mx.base.NotSupportedError, match="gpu"):
        mx.nd.ones((2,), ctx=mx.gpu())


def test_autograd_hand_computed():
    # z = sum-free: y = exp(x) * x + 3 / x ; dy/dx = exp(x)(1 + x) - 3 / x^2
    xv = np.array([0.5, 1.0, 2.0], np.float32)
    x = mx.nd.array(xv)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.exp(x) * x + 3 / x
    y.backward()
    want = np.exp(xv) * (1 + xv) - 3 / xv ** 2
    assert np.allclose(x.grad.asnumpy(), want, rtol=1e-6)
    # grad_req='add' accumulates two backward passes
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with mx.autograd.record():
            y = x * x
        y.backward(mx.nd.ones(3))
    assert x.grad.asnumpy().tolist() == (4 * xv).tolist()


def test_autograd_matrix_products():
    a = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    b = mx.nd.array([[7], [8], [9]])
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        c = mx.nd.dot(a, b)
    c.backward(mx.nd.array([[1], [2]]))
    assert a.grad.asnumpy().tolist() == [[7, 8, 9], [14, 16, 18]]      # g @ b.T
    assert b.grad.asnumpy().tolist() == [[9], [12], [15]]              # a.T @ g


def test_non_differentiable_operator_is_named():
    x = mx.nd.array([1.0, -2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.sign(x)
    with pytest.raises(mx.MXNetError, match="Operator sign is non-differentiable"):
        y.backward()


def test_executor_forward_backward_grad_req():
    s, t = mx.sym.var("s"), mx.sym.var("t")
    sym = mx.sym.log(s * t)                    # d/ds = 1/s, d/dt = 1/t
    sv = mx.nd.array([1.0, 2.0, 4.0])
    tv = mx.nd.array([2.0, 2.0, 2.0])
    gs, gt = mx.nd.zeros(3), mx.nd.ones(3)
    exe = sym.bind(mx.cpu(), {"s": sv, "t": tv}, args_grad={"s": gs, "t": gt},
                   grad_req={"s": "write", "t": "add"})
    out = exe.forward(is_train=True)[0]
    assert np.allclose(out.asnumpy(), np.log([2.0, 4.0, 8.0]))
    exe.backward(mx.nd.ones(3))
    assert gs.asnumpy().tolist() == [1.0, 0.5, 0.25]
    assert gt.asnumpy().tolist() == [1.5, 1.5, 1.5]                   # 1 + 1/2 (add)
    assert exe.grad_dict["s"] is gs and exe.arg_dict["s"] is sv


def test_simple_bind_allocates_and_arg_dict_is_writable():
    sym = mx.sym.var("a") + mx.sym.var("b")
    exe = sym.simple_bind(mx.cpu(), a=(2,), b=(2,))
    exe.arg_dict["a"][:] = np.array([1, 2])
    exe.arg_dict["b"][:] = 10
    assert exe.forward()[0].asnumpy().tolist() == [11, 12]
    assert sorted(exe.grad_dict) == ["a", "b"]


def test_name_manager_restarts_counters():
    with mx.name.NameManager():
        first = mx.sym.exp(mx.sym.var("x"))
    with mx.name.NameManager():
        second = mx.sym.exp(mx.sym.var("x"))
    assert first.name == second.name == "exp0"
    with mx.name.Prefix("net_"):
        assert mx.sym.exp(mx.sym.var("x")).name == "net_exp0"


def test_optimize_for_unknown_backend_logs_and_returns_symbol(caplog):
    sym = mx.sym.exp(mx.sym.var("x"))
    with caplog.at_level(logging.ERROR, logger="mxc.mxnet"):
        assert sym.optimize_for("noSuchBackend") is sym
    assert "Error optimizing for backend 'noSuchBackend' cannot be found" in caplog.text
    # mxc's own API keeps raising its typed error
    from mxc.compiler.symbol import Symbol
    with pytest.raises(MxcError):
        Symbol.optimize_for(sym, "noSuchBackend")


def test_emulated_release_sets_tojson_version():
    sym = mx.sym.exp(mx.sym.var("x"))
    assert '"mxnet_version": ["int", 10901]' in sym.tojson()
    mx.library.emulate("1.7.0")
    try:
        assert '"mxnet_version": ["int", 10700]' in sym.tojson()
    finally:
        mx.library.emulate(None)
    with pytest.raises(mx.MXNetError, match="cannot emulate"):
        mx.library.emulate("2.0")


def test_library_load_path_checks(tmp_path):
    with pytest.raises(mx.MXNetError, match="does NOT exist"):
        mx.library.load(str(tmp_path / "nope.so"))
    txt = tmp_path / "x.txt"
    txt.write_text("")
    with pytest.raises(mx.MXNetError, match="is NOT a library file"):
        mx.library.load(str(txt))


def test_sparse_arrays_hand_computed():
    dense = np.array([[1, 0, 2], [0, 0, 3]], np.float32)
    csr = mx.nd.array(dense).tostype("csr")
    assert csr.stype == "csr"
    assert csr.data.asnumpy().tolist() == [1, 2, 3]
    assert csr.indices.asnumpy().tolist() == [0, 2, 2]
    assert csr.indptr.asnumpy().tolist() == [0, 2, 3]
    assert csr.asnumpy().tolist() == dense.tolist()
    rsp = mx.nd.sparse.row_sparse_array((np.array([[5, 6]]), np.array([2])), shape=(4, 2))
    assert rsp.asnumpy().tolist() == [[0, 0], [0, 0], [5, 6], [0, 0]]
    assert rsp.tostype("default").stype == "default"


def test_python_custom_operator_api():
    class Scale(mx.operator.CustomOp):
        def __init__(self, factor):
            self.factor = factor

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * self.factor)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], out_grad[0] * self.factor)

    @mx.operator.register("test_scale")
    class ScaleProp(mx.operator.CustomOpProp):
        def __init__(self, factor="2"):
            super().__init__(need_top_grad=True)
            self.factor = float(factor)

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Scale(self.factor)

    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, op_type="test_scale", factor=3)
    y.backward(mx.nd.array([1.0, 10.0]))
    assert y.asnumpy().tolist() == [3.0, 6.0]
    assert x.grad.asnumpy().tolist() == [3.0, 30.0]
    exe = mx.sym.Custom(mx.sym.var("d"), op_type="test_scale").bind(
        args={"d": mx.nd.array([4.0])}, args_grad={"d": mx.nd.zeros(1)})
    assert exe.forward()[0].asnumpy().tolist() == [8.0]
    exe.backward(mx.nd.ones(1))
    assert exe.grad_dict["d"].asnumpy().tolist() == [2.0]


def test_python_custom_operators_live_in_a_registry_and_roll_back():
    """``mx.operator.register`` records props in a Registry: listed by
    get_all_registered_operators, replaced on re-registration (as in MXNet), and
    undone by a snapshot restore like every other registry (what mxc.library uses)."""
    from mxc.mxnet.operator import CUSTOM_OP_PROPS
    from mxc.registry import all_registries
    assert CUSTOM_OP_PROPS in all_registries()
    snaps = [reg.snapshot() for reg in all_registries()]

    @mx.operator.register("test_registry_prop")
    class First(mx.operator.CustomOpProp):
        pass

    @mx.operator.register("test_registry_prop")
    class Second(mx.operator.CustomOpProp):
        pass

    try:
        assert "test_registry_prop" in mx.operator.get_all_registered_operators()
        assert CUSTOM_OP_PROPS.lookup("test_registry_prop") is Second
    finally:
        for snap in snaps:
            snap.registry.restore(snap)
    assert "test_registry_prop" not in mx.operator.get_all_registered_operators()


def test_symbolblock_deferred_init_and_collect_params(tmp_path):
    x = mx.sym.var("x")
    net = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    block = mx.gluon.nn.SymbolBlock(net, [x])
    assert sorted(block.collect_params()) == ["fc_bias", "fc_weight"]
    block.initialize(mx.init.One())
    out = block(mx.nd.array([[1.0, 2.0, 3.0]]))       # weights created now: all ones
    assert out.asnumpy().tolist() == [[7.0, 7.0]]      # 1 + 2 + 3 + bias 1
    assert block.collect_params()["fc_weight"].data().shape == (2, 3)
    block.export(str(tmp_path / "fc"))
    saved = mx.nd.load(str(tmp_path / "fc-0000.params"))
    assert sorted(saved) == ["arg:fc_bias", "arg:fc_weight"]


def test_python_defined_gluon_layers_are_refused():
    with pytest.raises(mx.base.NotSupportedError, match="Dense"):
        mx.gluon.nn.Dense


def test_training_mode_semantics_are_refused_not_faked():
    data = mx.sym.var("data")
    sym = mx.sym.Dropout(data, p=0.5)
    exe = sym.bind(args={"data": mx.nd.ones((2, 2))}, args_grad={"data": mx.nd.zeros((2, 2))})
    assert exe.forward()[0].asnumpy().tolist() == [[1, 1], [1, 1]]     # inference: identity
    with pytest.raises(mx.base.NotSupportedError, match="training-mode Dropout"):
        exe.forward(is_train=True)
    x = mx.nd.ones((2, 2))
    x.attach_grad()
    with pytest.raises(mx.base.NotSupportedError, match="training-mode Dropout"):
        with mx.autograd.record():
            mx.nd.Dropout(x, p=0.5)
    with mx.autograd.record(train_mode=False):
        assert mx.nd.Dropout(x, p=0.5).asnumpy().tolist() == [[1, 1], [1, 1]]


def test_symbolblock_under_autograd_is_refused():
    x = mx.sym.var("x")
    block = mx.gluon.nn.SymbolBlock(mx.sym.exp(x), [x])
    with pytest.raises(mx.base.NotSupportedError, match="SymbolBlock under autograd"):
        with mx.autograd.record():
            block(mx.nd.ones(2))


def test_checkpoint_roundtrip(tmp_path):
    sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2, name="fc")
    args = {"fc_weight": mx.nd.array([[1, 2], [3, 4]]), "fc_bias": mx.nd.array([0.5, -0.5])}
    mx.model.save_checkpoint(str(tmp_path / "net"), 7, sym, args, {})
    sym2, args2, aux2 = mx.model.load_checkpoint(str(tmp_path / "net"), 7)
    assert isinstance(sym2, mx.sym.Symbol) and sym2.tojson() == sym.tojson()
    assert args2["fc_weight"].asnumpy().tolist() == [[1, 2], [3, 4]] and aux2 == {}
    out = sym2.bind(args={"data": mx.nd.array([[1, 1]]), **args2}).forward()[0]
    assert out.asnumpy().tolist() == [[3.5, 6.5]]          # [1+2+0.5, 3+4-0.5]


def test_builtin_operators_see_sparse_inputs_densified():
    csr = mx.nd.array([[1, 0], [0, 2]]).tostype("csr")
    assert (csr * 3).asnumpy().tolist() == [[3, 0], [0, 6]]
    exe = mx.sym.exp(mx.sym.var("d")).bind(args={"d": csr})
    assert np.allclose(exe.forward()[0].asnumpy(), np.exp([[1, 0], [0, 2]]))


def test_fluent_methods_are_operators():
    x = mx.nd.array([[1.0, 4.0], [9.0, 16.0]])
    assert x.sqrt().asnumpy().tolist() == [[1, 2], [3, 4]]
    assert x.clip(2, 10).asnumpy().tolist() == [[2, 4], [9, 10]]
    assert x.expand_dims(axis=0).shape == (1, 2, 2)
    with pytest.raises(AttributeError, match="no_such_method"):
        x.no_such_method()


def test_symbol_builders_take_positional_attributes():
    sym = mx.sym.clip(mx.sym.var("x"), 0, 1)
    assert sym.list_attr() == {"a_min": "0", "a_max": "1"}
    out = sym.bind(args={"x": mx.nd.array([-1.0, 0.5, 3.0])}).forward()[0]
    assert out.asnumpy().tolist() == [0.0, 0.5, 1.0]
