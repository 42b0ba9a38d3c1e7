"""DeepNumpy semantics beyond the corpus cases: NumPy shape mode, promotion, npx.reshape.

Oracles are hand-computed values and NumPy itself (the semantics MXNet's
numpy ops implement); the corpus cases are in ``test_deployment_format_ops.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc
from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ops.registry import get_op
from mxc.errors import ShapeError
from mxc.frontend.symbol_json import dump_json, load_json


def _graph(nodes, heads, np_shape=True):
    attrs = {"mxnet_version": ["int", 10901]}
    if np_shape:
        attrs["is_np_shape"] = ["int", 1]
    args = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    return load_json(json.dumps({"nodes": nodes, "arg_nodes": args, "heads": heads,
                                 "attrs": attrs}))


def _var(name, **attrs):
    return {"op": "null", "name": name, "inputs": [], **({"attrs": attrs} if attrs else {})}


def _op(op, name, inputs, **attrs):
    return {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs],
            **({"attrs": {k: str(v) for k, v in attrs.items()}} if attrs else {})}


def _one_op(op, n_inputs=1, **attrs):
    nodes = [_var(f"x{i}") for i in range(n_inputs)] + [_op(op, "op", range(n_inputs), **attrs)]
    return _graph(nodes, [[n_inputs, 0, 0]])


def test_is_np_shape_is_read_kept_and_written_back():
    g = _one_op("_npi_exp")
    assert g.is_np_shape
    assert json.loads(dump_json(g))["attrs"]["is_np_shape"] == ["int", 1]
    assert not _graph([_var("x"), _op("exp", "op", [0])], [[1, 0, 0]], np_shape=False).is_np_shape


def test_hidden_shape_zero_is_an_empty_extent_only_in_numpy_mode():
    nodes = [_var("x", __shape__="(2, 0)"), _op("_npi_exp", "op", [0])]
    np_g = _graph(nodes, [[1, 0, 0]])
    legacy = _graph(nodes, [[1, 0, 0]], np_shape=False)
    assert infer_shapes(np_g)[np_g.outputs[0].key] == (2, 0)
    assert infer_shapes(legacy)[legacy.outputs[0].key] == (2, None)
    unknown = _graph([_var("x", __shape__="(-1, 3)"), _op("_npi_exp", "op", [0])], [[1, 0, 0]])
    assert infer_shapes(unknown)[unknown.outputs[0].key] == (None, 3)


def test_legacy_zeros_shape_is_literal_under_numpy_semantics():
    scalar = _graph([_op("_zeros", "z", [], shape="()")], [[0, 0, 0]])
    assert infer_shapes(scalar)[scalar.outputs[0].key] == ()
    out = run_graph(scalar, {})[0]
    assert out.shape == () and out == 0
    empty = _graph([_op("_ones", "z", [], shape="(0, 3)")], [[0, 0, 0]])
    assert run_graph(empty, {})[0].shape == (0, 3)


@pytest.mark.parametrize("op,a,b,want_dtype", [
    ("_npi_add", "int32", "float32", "float32"),
    ("_npi_multiply", "float16", "float32", "float32"),
    ("_npi_subtract", "int32", "int64", "int64"),
    ("_npi_true_divide", "int32", "int32", "float32"),
    ("_npi_greater", "int32", "float32", "bool"),
    ("_npi_add", "bool", "int32", "int32"),
])
def test_mixed_operands_follow_mxnet_numpy_promotion(op, a, b, want_dtype):
    g = _one_op(op, 2)
    assert infer_types(g, {"x0": a, "x1": b})[g.outputs[0].key] == want_dtype
    x0 = np.array([[7, -3]], dtype=a)
    x1 = np.array([[2], [4]], dtype=b)
    out = run_graph(g, {"x0": x0, "x1": x1})[0]
    expect = {"_npi_add": x0.astype(np.float64) + x1, "_npi_multiply": x0.astype(np.float64) * x1,
              "_npi_subtract": x0.astype(np.float64) - x1,
              "_npi_true_divide": x0 / x1.astype(np.float64),
              "_npi_greater": x0.astype(np.float64) > x1}[op]
    assert out.dtype == want_dtype and out.shape == (2, 2)
    np.testing.assert_allclose(out.astype(np.float64), expect, rtol=1e-3)


def test_scalar_ops_keep_or_promote_like_mxnet():
    g = _one_op("_npi_true_divide_scalar", scalar=2.0, is_int=True)
    out = run_graph(g, {"x0": np.array([3, -5], dtype=np.int32)})[0]
    assert out.dtype == np.float32 and out.tolist() == [1.5, -2.5]
    g = _one_op("_npi_less_scalar", scalar=0.5, is_int=False)
    out = run_graph(g, {"x0": np.array([0.0, 1.0], dtype=np.float64)})[0]
    assert out.dtype == np.bool_ and out.tolist() == [True, False]


@pytest.mark.parametrize("axis,keepdims,want", [
    ("None", False, ()), ("None", True, (1, 1, 1)), ("(0, 2)", False, (3,)),
    ("()", False, (2, 3, 4)), ("-1", True, (2, 3, 1)),
])
def test_reductions_use_numpy_shapes(axis, keepdims, want):
    g = _one_op("_np_sum", axis=axis, keepdims=keepdims)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert infer_shapes(g, {"x0": (2, 3, 4)})[g.outputs[0].key] == want
    ax = None if axis == "None" else eval(axis)
    np.testing.assert_allclose(run_graph(g, {"x0": x})[0], np.sum(x, axis=ax, keepdims=keepdims))


def test_full_reduction_of_bool_counts_in_int64():
    g = _one_op("_np_sum")
    out = run_graph(g, {"x0": np.array([True, False, True])})[0]
    assert out.shape == () and out.dtype == np.int64 and out == 2


@pytest.mark.parametrize("codes,shape,want", [
    ("(-2, -1)", (2, 3, 4), (2, 12)),
    ("(-2, -6, 3, 4)", (2, 12), (2, 3, 4)),
    ("(-2, -6, -1, 4)", (2, 12), (2, 3, 4)),
    ("(-3, -4)", (1, 3, 4), (3, 4)),
    ("(-5, -2)", (2, 3, 4), (6, 4)),
    ("(-4,)", (2, 3), (2, 3)),
    ("(-2, -2, 4, -1)", (2, 8, 32), (2, 8, 4, 8)),
])
def test_npx_reshape_codes(codes, shape, want):
    g = _one_op("_npx_reshape", newshape=codes)
    assert infer_shapes(g, {"x0": shape})[g.outputs[0].key] == want
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(run_graph(g, {"x0": x})[0], x.reshape(want))


def test_npx_reshape_rejects_dropping_a_real_extent():
    g = _one_op("_npx_reshape", newshape="(-3, -4)")
    with pytest.raises(ShapeError, match="-3"):
        infer_shapes(g, {"x0": (2, 3)})


def test_zero_size_inputs_flow_through_numpy_ops():
    nodes = [_var("x"), _op("_npi_exp", "e", [0]), _op("_np_sum", "s", [1], axis="0")]
    g = _graph(nodes, [[2, 0, 0]])
    assert infer_shapes(g, {"x": (0, 3)})[g.outputs[0].key] == (3,)
    np.testing.assert_array_equal(run_graph(g, {"x": np.zeros((0, 3), np.float32)})[0],
                                  np.zeros(3, np.float32))


def test_numpy_twins_share_the_legacy_kernel():
    """``_npi_exp`` is ``exp`` with NumPy names: the same class, the twin recorded."""
    np_exp, exp = get_op("_npi_exp"), get_op("exp")
    assert np_exp.twin == "exp" and isinstance(np_exp, type(exp))
    assert get_op("_npi_add_scalar").twin == "_plus_scalar"


def test_constraint_check_raises_with_its_message():
    g = _one_op("_npx_constraint_check", msg="need positives")
    assert run_graph(g, {"x0": np.array([True, True])})[0].shape == ()
    with pytest.raises(mxc.errors.MxcError, match="need positives"):
        run_graph(g, {"x0": np.array([True, False])})


def test_scalar_params_round_trip_in_numpy_records(tmp_path):
    """0-d arrays can only be written as V3 (np-shape) records; they load back 0-d."""
    path = tmp_path / "p.params"
    mxc.nd.save(str(path), {"arg:s": np.array(2.5, np.float32), "arg:w": np.ones((2, 0))})
    back = mxc.nd.load(str(path))
    assert back["arg:s"].shape == () and back["arg:s"] == np.float32(2.5)
    assert back["arg:w"].shape == (2, 0)


def test_true_divide_scalar_of_integers_is_float32_whatever_the_scalar():
    g = _one_op("_npi_true_divide_scalar", scalar=0.5, is_int=False)
    assert infer_types(g, {"x0": "int32"})[g.outputs[0].key] == "float32"
    out = run_graph(g, {"x0": np.array([3], dtype=np.int32)})[0]
    assert out.dtype == np.float32 and out.tolist() == [6.0]


@pytest.mark.parametrize("ord_,axis,flag,want", [
    ("2", "None", "1", lambda x: np.linalg.norm(x)),
    ("1", "(1,)", "-1", lambda x: np.linalg.norm(x, 1, axis=1)),
    ("inf", "(0, 1)", "3", lambda x: np.linalg.norm(x, np.inf, axis=(0, 1))),
    ("2", "(0, 1)", "2", lambda x: np.linalg.norm(x, "nuc")),
    ("3", "(0,)", "-1", lambda x: np.sum(np.abs(x) ** 3, axis=0) ** (1 / 3)),
])
def test_norm_orders_and_flags(ord_, axis, flag, want):
    g = _one_op("_npi_norm", ord=ord_, axis=axis, flag=flag)
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, 0.5]], dtype=np.float32)
    out = run_graph(g, {"x0": x})[0]
    np.testing.assert_allclose(out, want(x.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("op,attrs,a,b,fn", [
    ("_npi_matmul", {}, (4,), (4, 3), np.matmul),
    ("_npi_matmul", {}, (2, 1, 3, 4), (5, 4, 2), np.matmul),
    ("_npi_matmul", {}, (2, 3, 4), (4,), np.matmul),
    ("_np_dot", {}, (2, 3, 4), (5, 4, 6), np.dot),
    ("_np_dot", {}, (3,), (3,), np.dot),
    ("_npi_tensordot", {"a_axes_summed": "(0, 2)", "b_axes_summed": "(2, 1)"}, (3, 4, 5), (2, 5, 3),
     lambda x, y: np.tensordot(x, y, axes=((0, 2), (2, 1)))),
    ("_npi_tensordot_int_axes", {"axes": 1}, (3, 4), (4, 2), lambda x, y: np.tensordot(x, y, 1)),
    ("_npi_einsum", {"num_args": 2, "subscripts": "bij,bjk->bki"}, (2, 3, 4), (2, 4, 5),
     lambda x, y: np.einsum("bij,bjk->bki", x, y)),
])
def test_product_shapes_are_numpys(op, attrs, a, b, fn):
    """Products infer their shapes analytically; NumPy on real arrays is the oracle."""
    g = _one_op(op, 2, **attrs)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(a).astype(np.float32), rng.standard_normal(b).astype(np.float32)
    want = fn(x.astype(np.float64), y.astype(np.float64))
    assert infer_shapes(g, {"x0": a, "x1": b})[g.outputs[0].key] == np.shape(want)
    np.testing.assert_allclose(run_graph(g, {"x0": x, "x1": y})[0], want, rtol=1e-4, atol=1e-5)


def test_matmul_with_mismatched_inner_extents_is_a_shape_error():
    g = _one_op("_npi_matmul", 2)
    with pytest.raises(ShapeError, match="inner extents"):
        infer_shapes(g, {"x0": (2, 3), "x1": (4, 5)})


@pytest.mark.parametrize("op,n", [("_npi_bitwise_and", 2), ("_npi_lcm", 2), ("_npi_bitwise_not", 1),
                                  ("_npi_bitwise_or_scalar", 1)])
def test_integer_only_ops_reject_floats_with_a_typed_error(op, n):
    g = _one_op(op, n, **({"scalar": 3} if op.endswith("_scalar") else {}))
    with pytest.raises(mxc.errors.DTypeError, match="integer"):
        infer_types(g, {f"x{i}": "float32" for i in range(n)})
    assert infer_types(g, {f"x{i}": "int32" for i in range(n)})[g.outputs[0].key] == "int32"


def test_eigvals_of_a_rotation_is_rejected_not_truncated():
    g = _one_op("_npi_eigvals")
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    with pytest.raises(mxc.errors.MxcError, match="complex eigenvalues"):
        run_graph(g, {"x0": rotation})
    sym = np.array([[2.0, 1.0], [1.0, 2.0]])
    np.testing.assert_allclose(np.sort(run_graph(g, {"x0": sym})[0]), [1.0, 3.0])
