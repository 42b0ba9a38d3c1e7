"""Custom operators in Python (MXNet's lib_custom_op): registration, inference, execution.

Mirrors MXNet's ``example/extensions/lib_custom_op`` tests: a gemm with
forward and backward checked against numpy, a stateful gemm whose state is
created once per node, an operator that mutates an input (an auxiliary
state), shape/dtype inference through the generated ``mxc.sym`` builders,
and the dense-only storage-type rule.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc
from mxc import sym as S
from mxc.compiler import custom_op as co
from mxc.compiler.ops import get_op
from mxc.errors import ExtensionError, MxcError

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _cleanup():
    """Unregister every custom op a test registered."""
    before = set(co.list_custom_ops())
    yield
    for name in set(co.list_custom_ops()) - before:
        co.unregister_custom_op(name)


def _gemm_shapes(in_shapes):
    (n, k), (k2, m) = in_shapes
    if k != k2:
        raise ValueError(f"inner dimensions differ: {k} vs {k2}")
    return in_shapes, [(n, m)]


def register_gemm(name="t_gemm"):
    @mxc.register_custom_op(name)
    class Gemm(mxc.CustomOp):
        """C = A @ B."""

        def parse_attrs(self, attrs):
            return 2, 1

        def infer_shape(self, attrs, in_shapes):
            return _gemm_shapes(in_shapes)

        def forward(self, attrs, inputs, outputs):
            a, b = inputs
            return [a @ b]

        def backward(self, attrs, out_grads, inputs, outputs):
            (dc,), (a, b) = out_grads, inputs
            return [dc @ b.T, a.T @ dc]

    return Gemm


def _mats(n=3, k=4, m=5):
    a = RNG.standard_normal((n, k)).astype(np.float32)
    b = RNG.standard_normal((k, m)).astype(np.float32)
    return a, b


# ---------------------------------------------------------------------------
# gemm: forward and backward against numpy
# ---------------------------------------------------------------------------
def test_gemm_forward_through_sym_builder_matches_numpy():
    register_gemm()
    a, b = _mats()
    c = S.t_gemm(S.var("a"), S.var("b"))
    assert c.list_arguments() == ["a", "b"]
    assert c.list_outputs() == ["t_gemm0_output"]
    out = c.bind(args={"a": a, "b": b}).forward()[0]
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    assert out.dtype == np.float32


def test_gemm_backward_matches_numpy_gradients():
    register_gemm()
    a, b = _mats()
    dc = RNG.standard_normal((3, 5)).astype(np.float32)
    da, db = co.run_backward("t_gemm", [dc], [a, b])
    np.testing.assert_allclose(da, dc @ b.T, rtol=1e-5)
    np.testing.assert_allclose(db, a.T @ dc, rtol=1e-5)
    # and against a finite-difference check of sum(C * dC) on one entry
    eps = 1e-3
    a64, b64, dc64 = a.astype(np.float64), b.astype(np.float64), dc.astype(np.float64)
    bumped = a64.copy()
    bumped[1, 2] += eps
    numeric = (np.sum((bumped @ b64) * dc64) - np.sum((a64 @ b64) * dc64)) / eps
    assert numeric == pytest.approx(float(da[1, 2]), rel=1e-3, abs=1e-3)


def test_run_forward_and_backward_without_a_graph():
    register_gemm()
    a, b = _mats(2, 3, 2)
    (c,) = co.run_forward("t_gemm", [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    grads = co.run_backward("t_gemm", np.ones_like(c), [a, b], outputs=[c])
    assert [g.shape for g in grads] == [a.shape, b.shape]


def test_backward_missing_or_wrong_shape_is_reported():
    @mxc.register_custom_op("t_nobwd")
    class NoBackward(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0] * 2]

    with pytest.raises(ExtensionError, match="does not implement backward"):
        co.run_backward("t_nobwd", np.ones(3), [np.ones(3)])

    @mxc.register_custom_op("t_badbwd")
    class BadBackward(NoBackward):
        def backward(self, attrs, out_grads, inputs, outputs):
            return [np.ones(4)]

    with pytest.raises(ExtensionError, match=r"gradient 0 has shape \(4\), but input 0 has "
                                             r"shape \(3\)"):
        co.run_backward("t_badbwd", np.ones(3), [np.ones(3)])


def test_forward_may_fill_preallocated_outputs():
    @mxc.register_custom_op("t_inplace")
    class Double(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            assert outputs[0].shape == inputs[0].shape and not outputs[0].any()
            np.multiply(inputs[0], 2, out=outputs[0])

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(S.t_inplace(S.var("x")).eval(x=x)[0], x * 2)


# ---------------------------------------------------------------------------
# stateful operators
# ---------------------------------------------------------------------------
class Counter:
    created = 0

    def __init__(self, start):
        Counter.created += 1
        self.count = start

    def forward(self, inputs, outputs):
        self.count += 1
        return [inputs[0] @ inputs[1]]

    def backward(self, out_grads, inputs, outputs):
        (dc,), (a, b) = out_grads, inputs
        return [dc @ b.T, a.T @ dc]


def register_stateful(name="t_state_gemm"):
    @mxc.register_custom_op(name)
    class StateGemm(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 2, 1

        def infer_shape(self, attrs, in_shapes):
            return _gemm_shapes(in_shapes)

        def create_op_state(self, attrs):
            return Counter(int(attrs.get("test_kw", "0")))

    return StateGemm


def test_stateful_op_creates_its_state_once_per_node_and_reuses_it():
    register_stateful()
    Counter.created = 0
    a, b = _mats()
    c = S.t_state_gemm(S.var("a"), S.var("b"), test_kw=10)
    exe = c.bind(args={"a": a, "b": b})
    for _ in range(3):
        np.testing.assert_allclose(exe.forward()[0], a @ b, rtol=1e-5)
    assert Counter.created == 1
    state = get_op("t_state_gemm").state_of(c.outputs[0].node)
    assert state.count == 13                      # test_kw + 3 runs
    exe2 = c.bind(args={"a": a, "b": b})          # same node: same state (one per node)
    exe2.forward()
    assert Counter.created == 1 and state.count == 14


def test_stateful_op_gets_a_fresh_state_per_node():
    register_stateful()
    Counter.created = 0
    a, b = _mats()
    x, y = S.var("a"), S.var("b")
    two = S.Group([S.t_state_gemm(x, y, name="g1"), S.t_state_gemm(x, y, name="g2")])
    two.eval(a=a, b=b)
    assert Counter.created == 2
    copy = S.Symbol.from_graph(two.graph.copy())   # copied nodes start over
    copy.eval(a=a, b=b)
    assert Counter.created == 4


def test_stateful_op_new_attributes_make_a_new_state():
    register_stateful()
    Counter.created = 0
    a, b = _mats()
    c = S.t_state_gemm(S.var("a"), S.var("b"), test_kw=1)
    c.eval(a=a, b=b)
    node = c.outputs[0].node
    node.attrs["test_kw"] = "7"
    c.eval(a=a, b=b)
    assert Counter.created == 2 and get_op("t_state_gemm").state_of(node).count == 8


def test_stateful_run_forward_backward_with_explicit_state():
    register_stateful()
    a, b = _mats()
    state = co.create_state("t_state_gemm", {"test_kw": 3})
    co.run_forward("t_state_gemm", [a, b], state=state)
    dc = np.ones((3, 5), np.float32)
    da, db = co.run_backward("t_state_gemm", [dc], [a, b], state=state)
    assert state.count == 5                       # 3 + forward + forward inside backward
    np.testing.assert_allclose(da, dc @ b.T, rtol=1e-5)
    np.testing.assert_allclose(db, a.T @ dc, rtol=1e-5)


def test_create_op_state_must_return_an_object_with_forward():
    @mxc.register_custom_op("t_badstate")
    class BadState(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def create_op_state(self, attrs):
            return 42

    with pytest.raises(ExtensionError, match="create_op_state.*returned 42; expected an "
                                             "object with a forward"):
        S.t_badstate(S.var("x")).eval(x=np.ones(2))


# ---------------------------------------------------------------------------
# mutated inputs are auxiliary states
# ---------------------------------------------------------------------------
def register_accumulate():
    @mxc.register_custom_op("t_accumulate")
    class Accumulate(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 2, 1

        def mutate_inputs(self, attrs):
            return [1]

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, [in_shapes[0]]

        def forward(self, attrs, inputs, outputs):
            data, total = inputs
            total += data
            return [total.copy()]


def test_mutated_input_is_an_auxiliary_state_and_is_updated():
    register_accumulate()
    s = S.t_accumulate(S.var("data"), S.var("total"))
    assert s.list_arguments() == ["data"]
    assert s.list_auxiliary_states() == ["total"]
    _, out_shapes, aux_shapes = s.infer_shape(data=(3,), total=(3,))
    assert aux_shapes == [(3,)] and out_shapes == [(3,)]
    total = np.zeros(3, np.float32)
    exe = s.bind(args={"data": np.ones(3, np.float32)}, aux_states={"total": total})
    exe.forward()
    out = exe.forward()[0]
    np.testing.assert_array_equal(out, [2, 2, 2])
    np.testing.assert_array_equal(exe.aux_dict["total"], [2, 2, 2])


def test_auto_created_aux_variable_uses_input_names():
    register_accumulate()
    s = S.t_accumulate(S.var("x"), name="acc")
    assert s.list_auxiliary_states() == ["acc_data1"]


def test_writing_a_non_mutable_input_is_an_extension_error():
    @mxc.register_custom_op("t_scribbler")
    class Scribbler(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            inputs[0][...] = 0
            return [inputs[0]]

    x = np.ones(3, np.float32)
    with pytest.raises(ExtensionError, match="read-only"):
        S.t_scribbler(S.var("x")).eval(x=x)
    assert x.tolist() == [1, 1, 1]


def test_mutate_inputs_index_out_of_range():
    @mxc.register_custom_op("t_badmut")
    class BadMut(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def mutate_inputs(self, attrs):
            return [3]

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0]]

    with pytest.raises(ExtensionError, match="input index 3 is out of range for 1 inputs"):
        S.t_badmut(S.var("x"))


# ---------------------------------------------------------------------------
# shape / dtype / storage inference
# ---------------------------------------------------------------------------
def test_shape_inference_through_sym_builders():
    register_gemm()
    a, b = S.var("a"), S.var("b")
    c = S.exp(S.t_gemm(a, b))
    assert c.infer_shape(a=(2, 3), b=(3, 7)) == ([(2, 3), (3, 7)], [(2, 7)], [])
    # partial: the op is not asked until its inputs are known
    args, outs, _ = c.infer_shape_partial(a=(2, 3))
    assert args == [(2, 3), None] and outs == [None]
    with pytest.raises(ExtensionError, match=r"extension '.*test_custom_ops': operator 't_gemm' "
                                             r"infer_shape raised on node 't_gemm\d+': "
                                             r"ValueError: inner dimensions differ: 3 vs 4"):
        c.infer_shape(a=(2, 3), b=(4, 7))


def test_infer_shape_may_refine_inputs_and_contract_is_checked():
    @mxc.register_custom_op("t_pad_rows")
    class PadRows(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            (n, m), = in_shapes
            return in_shapes, [(n + int(attrs["pad"]), m)]

        def forward(self, attrs, inputs, outputs):
            return [np.pad(inputs[0], ((0, int(attrs["pad"])), (0, 0)))]

    s = S.t_pad_rows(S.var("x"), pad=2)
    assert s.infer_shape(x=(3, 4))[1] == [(5, 4)]

    @mxc.register_custom_op("t_bad_shape")
    class BadShape(PadRows):
        def infer_shape(self, attrs, in_shapes):
            return [(1, 2)]

    with pytest.raises(ExtensionError, match=r"infer_shape on node 't_bad_shape\d+': returned "
                                             r"\[\(1, 2\)\]; expected \(shapes of the inputs, "
                                             r"shapes of the outputs\)"):
        S.t_bad_shape(S.var("x"), pad=1).infer_shape(x=(3, 4))


def test_default_dtype_inference_is_elementwise_in_both_directions():
    register_gemm()
    c = S.t_gemm(S.var("a"), S.var("b"))
    assert c.infer_type(a="float64") == ([np.float64, np.float64], [np.float64], [])
    a, b = _mats()
    out = c.eval(a=a.astype(np.float64), b=b.astype(np.float64))[0]
    assert out.dtype == np.float64


def test_custom_dtype_inference_and_output_cast():
    @mxc.register_custom_op("t_argmax")
    class ArgMax(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, [in_shapes[0][:-1]]

        def infer_type(self, attrs, in_types):
            if in_types[0] not in ("float32", "float64"):
                raise TypeError(f"expected a float input, got {in_types[0]}")
            return in_types, [np.int32]           # numpy dtypes are accepted too

        def forward(self, attrs, inputs, outputs):
            return [np.argmax(inputs[0], axis=-1)]    # int64: cast to the inferred int32

    s = S.t_argmax(S.var("x"))
    assert s.infer_type(x="float32")[1] == [np.int32]
    out = s.eval(x=np.array([[1, 3, 2], [5, 0, 1]], np.float32))[0]
    assert out.dtype == np.int32 and out.tolist() == [1, 0]
    with pytest.raises(ExtensionError, match="infer_type raised.*expected a float input, got "
                                             "int32"):
        s.infer_type(x="int32")


def test_sparse_storage_type_is_a_clear_error():
    @mxc.register_custom_op("t_transpose_csr")
    class TransposeCSR(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, [in_shapes[0][::-1]]

        def infer_storage_type(self, attrs, in_stypes):
            return in_stypes, ["csr"]

        def forward(self, attrs, inputs, outputs):
            return [inputs[0].T]

    s = S.t_transpose_csr(S.var("x"))
    for run in (lambda: s.infer_shape(x=(2, 3)), lambda: s.infer_type(x="float32"),
                lambda: s.eval(x=np.ones((2, 3), np.float32))):
        with pytest.raises(ExtensionError) as info:
            run()
        msg = str(info.value)
        assert "operator 't_transpose_csr' infer_storage_type" in msg
        assert "'csr' storage for output 0" in msg and "dense ('default') tensors only" in msg


def test_storage_type_check_failing_inside_the_hook_and_dense_passing():
    @mxc.register_custom_op("t_needs_csr")
    class NeedsCSR(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def infer_storage_type(self, attrs, in_stypes):
            if in_stypes[0] != "csr":
                raise ValueError("Expected storage type is kCSRStorage")
            return in_stypes, in_stypes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0]]

    with pytest.raises(ExtensionError, match="infer_storage_type raised.*ValueError: Expected "
                                             "storage type is kCSRStorage"):
        S.t_needs_csr(S.var("x")).infer_shape(x=(2,))

    @mxc.register_custom_op("t_dense_ok")
    class DenseOk(NeedsCSR):
        def infer_storage_type(self, attrs, in_stypes):
            return in_stypes, [0]                  # MXNet's kDefaultStorage flag

    assert S.t_dense_ok(S.var("x")).eval(x=np.ones(2))[0].tolist() == [1, 1]


# ---------------------------------------------------------------------------
# attributes, registration, mxc.sym
# ---------------------------------------------------------------------------
def test_any_attribute_is_accepted_as_a_string_and_round_trips_json():
    seen = []

    @mxc.register_custom_op("t_concat_n")
    class ConcatN(mxc.CustomOp):
        def parse_attrs(self, attrs):
            seen.append(dict(attrs))
            return int(attrs["num_args"]), 1

        def infer_shape(self, attrs, in_shapes):
            rows = sum(s[0] for s in in_shapes)
            return in_shapes, [(rows,) + tuple(in_shapes[0][1:])]

        def forward(self, attrs, inputs, outputs):
            return [np.concatenate(inputs) * float(attrs.get("scale", "1"))]

    x, y, z = S.var("x"), S.var("y"), S.var("z")
    s = S.t_concat_n(x, y, z, num_args=3, scale=2.5, note="free text", flag=True)
    assert seen[-1] == {"num_args": "3", "scale": "2.5", "note": "free text", "flag": "True"}
    assert s.list_arguments() == ["x", "y", "z"]
    out = s.eval(x=np.ones((1, 2)), y=np.ones((2, 2)), z=np.ones((1, 2)))[0]
    assert out.shape == (4, 2) and float(out[0, 0]) == 2.5
    again = S.load_json(s.tojson())
    node = json.loads(s.tojson())["nodes"][-1]
    assert node["op"] == "t_concat_n" and node["attrs"]["scale"] == "2.5"
    assert again.infer_shape(x=(1, 2), y=(2, 2), z=(1, 2))[1] == [(4, 2)]


def test_parse_attrs_rejection_surfaces_when_building():
    @mxc.register_custom_op("t_strict")
    class Strict(mxc.CustomOp):
        def parse_attrs(self, attrs):
            if "axis" in attrs and not attrs["axis"].lstrip("-").isdigit():
                raise ValueError(f"axis must be an integer, got {attrs['axis']!r}")
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0]]

    with pytest.raises(ExtensionError, match=r"operator 't_strict' parse_attrs raised on node "
                                             r"'bad': ValueError: axis must be an integer, got "
                                             r"'x'"):
        S.t_strict(S.var("d"), axis="x", name="bad")

    @mxc.register_custom_op("t_badcount")
    class BadCount(Strict):
        def parse_attrs(self, attrs):
            return 1

    with pytest.raises(ExtensionError, match=r"parse_attrs .*returned 1; expected "
                                             r"\(num_inputs, num_outputs\)"):
        S.t_badcount(S.var("d"))


def test_registered_op_appears_in_mxc_sym_and_unregister_removes_it():
    Gemm = register_gemm("t_gemm_dir")
    assert "t_gemm_dir" in dir(S)
    assert "C = A @ B." in S.t_gemm_dir.__doc__
    assert co.get_custom_op("t_gemm_dir").__class__ is Gemm
    assert co.is_custom_op("t_gemm_dir") and not co.is_custom_op("exp")
    assert "t_gemm_dir" in co.list_custom_ops()
    co.unregister_custom_op("t_gemm_dir")
    assert "t_gemm_dir" not in dir(S)
    assert not hasattr(S, "t_gemm_dir")
    with pytest.raises(ExtensionError, match="built-in operator"):
        co.unregister_custom_op("exp")


def test_missing_required_hooks_are_refused_at_registration():
    class NoShape(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def forward(self, attrs, inputs, outputs):
            return inputs

    with pytest.raises(ExtensionError, match="'t_noshape'.*infer_shape is not implemented"):
        mxc.register_custom_op("t_noshape", NoShape)

    class NoForward(NoShape):
        forward = mxc.CustomOp.forward

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

    with pytest.raises(ExtensionError, match="neither forward nor create_op_state"):
        mxc.register_custom_op("t_nofwd", NoForward)

    with pytest.raises(ExtensionError, match="parse_attrs is not implemented"):
        mxc.register_custom_op("t_noparse", forward=lambda attrs, i, o: i,
                               infer_shape=lambda attrs, s: (s, s))
    assert not any(n.startswith("t_no") for n in co.list_custom_ops())


def test_name_collisions_need_override():
    with pytest.raises(ExtensionError, match=r"'exp'.*already registered as a built-in "
                                             r"operator \(family elemwise_unary\); pass "
                                             r"override=True"):
        register_gemm("exp")
    assert get_op("exp").family == "elemwise_unary"
    register_gemm("t_twice")
    with pytest.raises(ExtensionError, match="already registered as a custom operator"):
        register_gemm("t_twice")

    @mxc.register_custom_op("t_twice", override=True)
    class Replacement(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0] + 1]

    assert S.t_twice(S.var("x")).eval(x=np.zeros(2))[0].tolist() == [1, 1]


def test_hook_function_registration():
    cls = mxc.register_custom_op(
        "t_relu",
        parse_attrs=lambda attrs: (1, 1),
        infer_shape=lambda attrs, shapes: (shapes, shapes),
        forward=lambda attrs, inputs, outputs: [np.maximum(inputs[0], 0)],
        backward=lambda attrs, og, inputs, outputs: [og[0] * (inputs[0] > 0)],
        doc="Rectified linear unit.")
    assert issubclass(cls, mxc.CustomOp)
    x = np.array([-1.0, 2.0], np.float32)
    assert S.t_relu(S.var("x")).eval(x=x)[0].tolist() == [0, 2]
    assert co.run_backward("t_relu", np.ones(2), [x])[0].tolist() == [0, 1]
    assert "Rectified linear unit." in S.t_relu.__doc__
    with pytest.raises(TypeError, match="unknown hook.*infer_shapes"):
        mxc.register_custom_op("t_typo", infer_shapes=lambda a, s: (s, s))


def test_instance_registration():
    class Scale(mxc.CustomOp):
        def __init__(self, factor):
            self.factor = factor

        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            return [inputs[0] * self.factor]

    inst = Scale(3.0)
    assert mxc.register_custom_op("t_scale3", inst) is inst
    assert inst.name == "t_scale3"
    assert S.t_scale3(S.var("x")).eval(x=np.ones(2))[0].tolist() == [3, 3]


# ---------------------------------------------------------------------------
# errors inside forward, and forward's contract
# ---------------------------------------------------------------------------
def test_exception_in_forward_names_extension_function_and_node():
    @mxc.register_custom_op("t_boom")
    class Boom(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, attrs, inputs, outputs):
            raise RuntimeError("the kernel exploded")

    s = S.exp(S.t_boom(S.var("x"), name="boomer"))
    with pytest.raises(ExtensionError) as info:
        s.eval(x=np.ones(2))
    err = info.value
    assert str(err) == (f"extension {__name__!r}: operator 't_boom' forward raised on node "
                        f"'boomer': RuntimeError: the kernel exploded")
    assert err.extension == __name__ and err.function == "operator 't_boom' forward"
    assert err.node == "boomer" and isinstance(err.__cause__, RuntimeError)
    assert isinstance(err, MxcError) and err.exit_code == 6


def test_forward_output_contract_is_checked():
    def make(name, result):
        @mxc.register_custom_op(name)
        class Op(mxc.CustomOp):
            def parse_attrs(self, attrs):
                return 1, 1

            def infer_shape(self, attrs, in_shapes):
                return in_shapes, in_shapes

            def forward(self, attrs, inputs, outputs):
                return result(inputs[0])

    make("t_wrong_shape", lambda x: [x[:1]])
    make("t_wrong_count", lambda x: [x, x])
    make("t_wrong_kind", lambda x: "nope")
    with pytest.raises(ExtensionError, match=r"output 0 has shape \(1\), but shape inference "
                                             r"said \(3\)"):
        S.t_wrong_shape(S.var("x")).eval(x=np.ones(3))
    with pytest.raises(ExtensionError, match="returned 2 outputs, expected 1"):
        S.t_wrong_count(S.var("x")).eval(x=np.ones(3))
    with pytest.raises(ExtensionError, match="returned str; expected a list of 1 arrays"):
        S.t_wrong_kind(S.var("x")).eval(x=np.ones(3))


# ---------------------------------------------------------------------------
# subgraph operators (custom partitioner regions)
# ---------------------------------------------------------------------------
def _exp_log_partitioner(name, subgraph_op):
    from mxc.compiler.partition import ANY_SUBGRAPH, register_partitioner

    def supported(graph, ids, options):
        for i, node in enumerate(graph.nodes):
            if node.op in ("exp", "log"):
                ids[i] = ANY_SUBGRAPH

    def review(subgraph, sid, options):
        subgraph.attrs["myKey"] = "myVal"
        return True

    return register_partitioner(name).add_strategy("s", subgraph_op, supported_ops=supported,
                                                   review_subgraph=review)


@pytest.fixture
def partitioner():
    from mxc.compiler.partition import registry
    from mxc.compiler.partition.custom import _PARTITIONERS
    names = []

    def make(name, subgraph_op):
        names.append(name)
        return _exp_log_partitioner(name, subgraph_op)

    yield make
    for n in names:
        registry.unregister_subgraph_backend(n)
        _PARTITIONERS.pop(n, None)


def test_custom_subgraph_op_receives_the_nested_graph(partitioner):
    seen = []

    @mxc.register_custom_op("_t_subgraph_op")
    class MySubgraphOp(mxc.CustomOp):
        is_subgraph_op = True

        def forward(self, attrs, inputs, outputs, subgraph):
            seen.append((attrs, [n.op for n in subgraph.op_nodes()]))
            return self.run_subgraph(subgraph, inputs)

    partitioner("t_exp_log", "_t_subgraph_op")
    x = S.var("x")
    y = S.log(S.exp(x)) * 2.0
    part = y.optimize_for("t_exp_log")
    assert [n.op for n in part.graph.op_nodes()] == ["_t_subgraph_op", "_mul_scalar"]
    data = np.array([0.5, 1.5], np.float32)
    np.testing.assert_allclose(part.eval(x=data)[0], data * 2, rtol=1e-6)
    assert seen == [({"myKey": "myVal"}, ["exp", "log"])]
    assert part.infer_shape(x=(2,))[1] == [(2,)]


def test_custom_subgraph_op_defaults_to_running_the_nested_graph_and_may_be_stateful(
        partitioner):
    created = []

    class State:
        def __init__(self, subgraph):
            created.append(subgraph)
            self.subgraph = subgraph

        def forward(self, inputs, outputs):
            return [o * 10 for o in mxc.CustomOp.run_subgraph(self.subgraph, inputs)]

    mxc.register_custom_op("_t_plain_sub", is_subgraph_op=True)
    mxc.register_custom_op("_t_state_sub", is_subgraph_op=True,
                           create_op_state=lambda attrs, subgraph: State(subgraph))
    x = S.var("x")
    y = S.log(S.exp(x))
    data = np.array([1.0, 2.0], np.float32)
    partitioner("t_plain", "_t_plain_sub")
    np.testing.assert_allclose(y.optimize_for("t_plain").eval(x=data)[0], data, rtol=1e-6)
    partitioner("t_state", "_t_state_sub")
    part = y.optimize_for("t_state")
    exe = part.bind(args={"x": data})
    exe.forward()
    np.testing.assert_allclose(exe.forward()[0], data * 10, rtol=1e-6)
    assert len(created) == 1
