"""Elementwise families: behaviour the MXNet corpus cases do not pin down.

Hand-computed values for MXNet's integer and rounding rules, NaN handling,
dtype promotion of tensor-scalar ops, shape inference in both directions,
and attribute validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mxc.backends.reference import run_graph
from mxc.compiler.infer import infer_shapes, infer_types
from mxc.compiler.ir import Entry, Graph, Node
from mxc.compiler.ops import get_op
from mxc.compiler.ops.elemwise_unary import erfinv
from mxc.errors import AttributeInvalidError, AttributeRequiredError, ShapeError


def graph_of(op: str, attrs: dict | None = None, inputs=("data",)) -> Graph:
    """A one-operator graph: variables named *inputs* feeding node ``op``."""
    vs = [Node(None, name) for name in inputs]
    node = Node(op, "op", {k: str(v) for k, v in (attrs or {}).items()},
                [Entry(v, 0) for v in vs])
    return Graph([*vs, node], [Entry(node, 0)])


def run(op: str, attrs: dict | None = None, **feeds) -> np.ndarray:
    g = graph_of(op, attrs, tuple(feeds))
    return run_graph(g, {k: np.asarray(v) for k, v in feeds.items()})[0]


def shapes(op: str, attrs: dict | None, given: dict, inputs=None, out=None):
    """(input shapes, output shape) inferred from *given* (and a known output shape)."""
    g = graph_of(op, attrs, inputs or tuple(given))
    node = g.outputs[0].node
    if out is not None:   # the output is known: pin it by feeding it to a consumer
        sink = Node(None, "known_out", {"__shape__": str(out)})
        both = Node("elemwise_add", "sink", {}, [Entry(node, 0), Entry(sink, 0)])
        g = Graph([*g.nodes, sink, both], [Entry(both, 0)])
    res = infer_shapes(g, given)
    ins = {e.node.name: res.get(e.key) for e in node.inputs}
    return ins, res.get((node, 0))


# ---------------------------------------------------------------------------
# rounding
# ---------------------------------------------------------------------------
TIES = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_rounding_ties(dtype):
    x = np.array(TIES, dtype=dtype)
    np.testing.assert_array_equal(run("round", data=x), [-4, -3, -2, -1, 1, 2, 3, 4])
    # MXNet's rint takes the lower neighbour on a tie (not IEEE half-to-even)
    np.testing.assert_array_equal(run("rint", data=x), [-4, -3, -2, -1, 0, 1, 2, 3])
    np.testing.assert_array_equal(run("fix", data=x), [-3, -2, -1, 0, 0, 1, 2, 3])


def test_round_just_below_half_is_exact():
    below = np.nextafter(np.float32(0.5), np.float32(0))
    x = np.array([below, -below], dtype=np.float32)
    np.testing.assert_array_equal(run("round", data=x), [0.0, -0.0])


def test_math_op_on_int_tensor_goes_through_float32_and_truncates():
    x = np.array([0, 1, 2, -3], dtype=np.int32)
    y = run("exp", data=x)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [1, 2, 7, 0])        # e, e^2 truncated
    np.testing.assert_array_equal(run("sqrt", data=np.array([8, 2], np.int64)), [2, 1])
    np.testing.assert_array_equal(run("reciprocal", data=np.array([1, 2, -1], np.int32)),
                                  [1, 0, -1])


def test_degrees_uses_mxnet_float32_constant_for_float64():
    y = run("degrees", data=np.array([1.0], dtype=np.float64))
    assert y.dtype == np.float64
    assert y[0] == float(np.float32(180.0) / np.float32(math.pi))
    assert y[0] != 180.0 / math.pi


# ---------------------------------------------------------------------------
# NaN and special values
# ---------------------------------------------------------------------------
def test_nan_semantics():
    x = np.array([np.nan, -1.0, 2.0, -0.0], dtype=np.float32)
    np.testing.assert_array_equal(run("sign", data=x), [0, -1, 1, 0])
    y = run("relu", data=x)
    assert np.isnan(y[0]) and list(y[1:]) == [0, 2, 0]
    np.testing.assert_array_equal(run("logical_not", data=x), [0, 0, 0, 1])
    m = run("_maximum", lhs=np.array([np.nan, 1.0], np.float32),
            rhs=np.array([0.0, np.nan], np.float32))
    assert np.isnan(m).all()


def test_erfinv_accuracy_and_limits():
    y = np.array([-0.999999, -0.5, 0.0, 1e-8, 0.3, 0.99, 0.9999999])
    x = erfinv(y)
    np.testing.assert_allclose([math.erf(v) for v in x], y, rtol=1e-14, atol=1e-16)
    assert erfinv(np.array([1.0]))[0] == math.inf and erfinv(np.array([-1.0]))[0] == -math.inf
    assert np.isnan(erfinv(np.array([1.5, np.nan]))).all()


def test_gamma_poles_follow_c_tgamma():
    y = run("gamma", data=np.array([0.0, -1.0, -2.0, 5.0], np.float64))
    assert y[0] == math.inf and np.isnan(y[1]) and np.isnan(y[2]) and y[3] == 24.0
    z = run("gammaln", data=np.array([-1.0, 0.5], np.float64))
    assert z[0] == math.inf and z[1] == pytest.approx(math.lgamma(0.5), rel=1e-15)


# ---------------------------------------------------------------------------
# integer semantics of binary ops
# ---------------------------------------------------------------------------
A = np.array([7, -7, 7, -7, 6, 5], dtype=np.int32)
B = np.array([2, 2, -2, -2, 3, 0], dtype=np.int32)


@pytest.mark.parametrize("op", ["elemwise_div", "broadcast_div"])
def test_integer_division_truncates_toward_zero(op):
    y = run(op, lhs=A, rhs=B)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [3, -3, -3, 3, 2, 0])   # x / 0 is defined as 0 here


@pytest.mark.parametrize("op", ["_mod", "broadcast_mod"])
def test_integer_mod_takes_divisor_sign(op):
    np.testing.assert_array_equal(run(op, lhs=A, rhs=B), [1, 1, -1, -1, 0, 0])


def test_float_mod_takes_divisor_sign_and_zero_divisor_gives_zero():
    y = run("_mod", lhs=np.array([-0.5, 0.5, 3.0], np.float64),
            rhs=np.array([1.5, -1.5, 0.0], np.float64))
    np.testing.assert_array_equal(y, [1.0, -1.0, 0.0])


def test_comparisons_return_input_dtype():
    for dt in ("int32", "float16", "float64"):
        a, b = np.array([1, 2, 3], dt), np.array([2, 2, 2], dt)
        g = run("_greater_equal", lhs=a, rhs=b)
        assert g.dtype == np.dtype(dt)
        np.testing.assert_array_equal(g, [0, 1, 1])
    y = run("broadcast_logical_xor", lhs=np.array([[0.0], [2.0]], np.float32),
            rhs=np.array([0.0, np.nan], np.float32))
    np.testing.assert_array_equal(y, [[0, 1], [1, 0]])


def test_hypot_on_int_truncates():
    y = run("_hypot", lhs=np.array([3, 1], np.int32), rhs=np.array([4, 1], np.int32))
    np.testing.assert_array_equal(y, [5, 1])


def test_add_n_float16_rounds_after_each_addition():
    a = np.array([2048.0], np.float16)
    one = np.array([1.0], np.float16)
    # 2048 + 1 rounds back to 2048 in half precision, twice
    y = run("add_n", {"num_args": 3}, arg0=a, arg1=one, arg2=one)
    assert y.dtype == np.float16 and y[0] == 2048.0


# ---------------------------------------------------------------------------
# tensor-scalar ops
# ---------------------------------------------------------------------------
X = np.array([-5, -1, 0, 3, 7], dtype=np.int32)


def test_scalar_truncated_to_int_type_toward_zero():
    np.testing.assert_array_equal(run("_plus_scalar", {"scalar": -2.7}, data=X), X - 2)
    np.testing.assert_array_equal(run("_mul_scalar", {"scalar": 2.9}, data=X), X * 2)
    np.testing.assert_array_equal(run("_div_scalar", {"scalar": 2.5}, data=X), [-2, 0, 0, 1, 3])
    np.testing.assert_array_equal(run("_greater_scalar", {"scalar": 0.5}, data=X),
                                  [0, 0, 0, 1, 1])   # 0.5 -> 0, so 0 > 0 is false


def test_rdiv_scalar_on_int_divides_in_float():
    y = run("_rdiv_scalar", {"scalar": 7}, data=np.array([2, -2, 3], np.int32))
    np.testing.assert_array_equal(y, [3, -3, 2])


def test_mod_and_rmod_scalar_signs():
    np.testing.assert_array_equal(run("_mod_scalar", {"scalar": 3}, data=X), [1, 2, 0, 0, 1])
    y = run("_rmod_scalar", {"scalar": 7}, data=np.array([-3, 3, 0], np.int32))
    np.testing.assert_array_equal(y, [-2, 1, 0])


def test_is_int_false_promotes_int_tensors_to_float64():
    y = run("_plus_scalar", {"scalar": 2.5, "is_int": False}, data=X)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, X + 2.5)
    g = graph_of("_plus_scalar", {"scalar": 2.5, "is_int": False})
    assert infer_types(g, {"data": "int32"})[g.outputs[0].key] == "float64"
    # float tensors are unaffected
    assert infer_types(g, {"data": "float16"})[g.outputs[0].key] == "float16"
    # a comparison on a promoted tensor returns float64 0/1
    c = run("_lesser_scalar", {"scalar": 0.5, "is_int": "False"}, data=X)
    assert c.dtype == np.float64 and list(c) == [1, 1, 1, 0, 0]


def test_scalar_defaults():
    p = get_op("_plus_scalar").parse_attrs({})
    assert p.scalar == 1.0 and p.is_int is True
    np.testing.assert_array_equal(run("smooth_l1", data=np.array([0.5, 2.0], np.float32)),
                                  [0.125, 1.5])


def test_float16_scalar_is_rounded_to_half_first():
    x = np.array([0.0], np.float16)
    y = run("_plus_scalar", {"scalar": 0.1}, data=x)
    assert y.dtype == np.float16 and y[0] == np.float16(0.1)


# ---------------------------------------------------------------------------
# misc elementwise
# ---------------------------------------------------------------------------
def test_clip_converts_bounds_to_dtype_and_tests_upper_first():
    y = run("clip", {"a_min": -1.5, "a_max": 2.7}, data=np.array([-5, 0, 5], np.int32))
    np.testing.assert_array_equal(y, [-1, 0, 2])
    # a_min > a_max: anything above a_max becomes a_max, the rest below a_min becomes a_min
    # (np.clip would give a_max everywhere)
    y = run("clip", {"a_min": 3, "a_max": 1}, data=np.array([0.0, 2.0, 5.0, np.nan], np.float32))
    assert list(y[:3]) == [3, 1, 1] and np.isnan(y[3])


def test_hard_sigmoid_defaults():
    y = run("hard_sigmoid", data=np.array([-5.0, 0.0, 1.0, 5.0], np.float32))
    np.testing.assert_allclose(y, [0.0, 0.5, 0.7, 1.0], rtol=1e-7)


def test_hard_sigmoid_float16_rounds_after_multiply():
    # half(0.2 * -1.5791015625) = -0.31591796875; + 0.5 -> 0.18408203125
    # (rounding only once would give 0.1842041015625, which MXNet does not produce)
    y = run("hard_sigmoid", data=np.array([-1.5791015625], np.float16))
    assert y.dtype == np.float16 and float(y[0]) == 0.18408203125


def test_identity_like_ops_and_names():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for op in ("_copy", "identity", "BlockGrad", "stop_gradient", "make_loss"):
        np.testing.assert_array_equal(run(op, data=x), x)
    assert graph_of("make_loss").list_outputs() == ["op_loss"]
    z = run("zeros_like", data=np.full((2,), 7, np.uint8))
    assert z.dtype == np.uint8 and list(z) == [0, 0]
    assert list(run("ones_like", data=np.array([np.nan], np.float16))) == [1.0]


# ---------------------------------------------------------------------------
# shape inference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("op,inputs", [
    ("elemwise_mul", ("lhs", "rhs")), ("_greater", ("lhs", "rhs")),
    ("sin", ("data",)), ("_minus_scalar", ("data",)), ("clip", ("data",)),
])
def test_same_shape_ops_infer_inputs_from_output(op, inputs):
    attrs = {"a_min": 0, "a_max": 1} if op == "clip" else None
    ins, out = shapes(op, attrs, {}, inputs=inputs, out=(4, 5))
    assert out == (4, 5) and all(s == (4, 5) for s in ins.values())


def test_same_shape_partial_merge_and_conflict():
    ins, out = shapes("elemwise_add", None, {"lhs": (None, 3), "rhs": (2, None)})
    assert out == (2, 3) and ins == {"lhs": (2, 3), "rhs": (2, 3)}
    with pytest.raises(ShapeError):
        shapes("elemwise_add", None, {"lhs": (2, 3), "rhs": (3, 2)})


def test_add_n_arity_and_names():
    op = get_op("ElementWiseSum")
    p = op.parse_attrs({"num_args": "3"})
    assert op.input_names(p) == ["arg0", "arg1", "arg2"]
    ins, out = shapes("add_n", {"num_args": 3}, {"a": (2, 2)}, inputs=("a", "b", "c"))
    assert out == (2, 2) and set(ins.values()) == {(2, 2)}
    with pytest.raises(AttributeInvalidError, match="num_args"):
        op.parse_attrs({"num_args": "0"})
    with pytest.raises(AttributeRequiredError):
        op.parse_attrs({})


def test_broadcast_binary_shapes_forward_only():
    _, out = shapes("broadcast_add", None, {"lhs": (3, 1, 5), "rhs": (4, 1)})
    assert out == (3, 4, 5)
    _, out = shapes("broadcast_mul", None, {"lhs": (None, 1), "rhs": (1, 4)})
    assert out == (None, 4)
    ins, _ = shapes("broadcast_sub", None, {}, inputs=("lhs", "rhs"), out=(2, 3))
    assert ins == {"lhs": None, "rhs": None}          # MXNet cannot invert broadcasting
    with pytest.raises(ShapeError):
        shapes("broadcast_add", None, {"lhs": (2, 3), "rhs": (4, 3)})


def test_broadcast_to():
    assert shapes("broadcast_to", {"shape": (2, 0, 4)}, {"data": (1, 3, 1)})[1] == (2, 3, 4)
    with pytest.raises(ShapeError, match="ranks differ"):
        shapes("broadcast_to", {"shape": (2, 3)}, {"data": (3,)})
    with pytest.raises(ShapeError, match="size-1"):
        shapes("broadcast_to", {"shape": (4, 3)}, {"data": (2, 3)})


def test_broadcast_axis():
    assert shapes("broadcast_axes", {"axis": (0, 2), "size": (2, 3)},
                  {"data": (1, 4, 1)})[1] == (2, 4, 3)
    with pytest.raises(ShapeError):
        shapes("broadcast_axis", {"axis": 1, "size": 3}, {"data": (1, 4)})
    op = get_op("broadcast_axis")
    with pytest.raises(AttributeInvalidError, match="negative"):
        op.parse_attrs({"axis": "-1", "size": "3"})
    with pytest.raises(AttributeInvalidError, match="same length"):
        op.parse_attrs({"axis": "(0, 1)", "size": "3"})


def test_broadcast_like_axes():
    attrs = {"lhs_axes": (0,), "rhs_axes": (-1,)}
    _, out = shapes("broadcast_like", attrs, {"lhs": (1, 2), "rhs": (3, 7)})
    assert out == (7, 2)
    y = run("broadcast_like", attrs, lhs=np.array([[1.0, 2.0]], np.float32),
            rhs=np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(y, np.tile([[1.0, 2.0]], (4, 1)))
    _, out = shapes("broadcast_like", None, {"lhs": (1, 5), "rhs": (None, 5)})
    assert out == (None, 5)


# ---------------------------------------------------------------------------
# attributes
# ---------------------------------------------------------------------------
def test_unknown_and_required_attributes_are_rejected():
    with pytest.raises(AttributeInvalidError, match="unknown attribute 'sclar'"):
        get_op("_plus_scalar").parse_attrs({"sclar": "1"})
    with pytest.raises(AttributeRequiredError, match="a_max"):
        get_op("clip").parse_attrs({"a_min": "0"})
    # MXNet registers exp and make_loss without a parameter struct: attributes are ignored
    assert dict(get_op("exp").parse_attrs({"alpha": "1"})) == {}
    assert dict(get_op("make_loss").parse_attrs({"grad_scale": "2.0",
                                                 "normalization": "batch"})) == {}
