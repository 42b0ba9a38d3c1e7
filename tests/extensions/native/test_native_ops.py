"""The corpus's ``gemm_lib`` (lib_api v11 and v7) through mxc's own API, against MXNet's goldens.

Each test replays what a golden flow computed -- same inputs -- with
``mxc.library.load``, ``mxc.sym`` + ``bind`` and the native library's one-off
calls, and compares every expected value and what the library printed.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import mxc
from mxc.compiler.custom_op import run_backward
from mxc.errors import ExtensionError
from mxc.library.native import invoke, invoke_backward, op_entry
from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    flow, golden, v11_libs, v7_libs, value, _unload_native_libraries)


@pytest.fixture(scope="module")
def gemm11(v11_libs):
    return mxc.library.load(v11_libs / "libgemm_lib.so", verbose=False)


def inputs(f, *names):
    return [np.array(f["inputs"][n], dtype=np.float32) for n in names]


def test_load_prints_mxnets_report_and_loading_again_runs_initialize_again(v11_libs, capfd):
    g = golden("v11", "gemm_lib")
    rec = mxc.library.load(v11_libs / "libgemm_lib.so")
    out, err = capfd.readouterr()
    exp = flow(g, "load_verbose")["expected"]
    assert out == exp["stdout"]
    log = exp["log"]
    want = [f"Found {log['num_operators']} operators in library"]
    want += [f"\tOp[{o['index']}] {o['name']}" for o in log["operators"]]
    want += ["Found 0 partitioners in library", "Found 0 graph passes in library"]
    assert err.splitlines() == want
    assert rec.operators == [o["name"] for o in log["operators"]]
    assert rec.native.version == 11 and len(rec.native.sha256) == 64
    again = mxc.library.load(v11_libs / "libgemm_lib.so")
    out, err = capfd.readouterr()
    assert again is rec
    assert out == flow(g, "load_again_verbose")["expected"]["stdout"]
    assert err.splitlines() == want


def test_forward_matches_test_gemm_and_stateful_counter(gemm11, capfd):
    f = flow(golden("v11", "gemm_lib"), "nd_forward_test_gemm_inputs")
    a, b = inputs(f, "a", "b")
    e = op_entry("my_gemm")
    np.testing.assert_array_equal(invoke(e, [a, b])[0], value(f["expected"]["my_gemm"]))
    out = invoke(op_entry("state_gemm"), [a, b], {"test_kw": 100})
    gc.collect()
    np.testing.assert_array_equal(out[0], value(f["expected"]["state_gemm_test_kw_100"]))
    assert capfd.readouterr().out == f["expected"]["stdout"]


def test_seeded_forward_through_symbols(gemm11, capfd):
    f = flow(golden("v11", "gemm_lib"), "nd_forward_seeded")
    a, b = inputs(f, "a", "b")
    for op in ("my_gemm", "state_gemm"):
        sym = getattr(mxc.sym, op)(mxc.sym.var("a"), mxc.sym.var("b"))
        ex = sym.bind(args={"a": a, "b": b})
        np.testing.assert_array_equal(ex.forward()[0], value(f["expected"][op]))
        del ex, sym
    gc.collect()
    assert capfd.readouterr().out == f["expected"]["stdout"]


def test_bound_stateful_op_keeps_its_state_and_backward_matches(gemm11, capfd):
    f = flow(golden("v11", "gemm_lib"), "sym_bind_forward_backward_test_gemm")
    a, b, og = inputs(f, "a", "b", "out_grad")
    exp = f["expected"]
    d = mxc.sym.state_gemm(mxc.sym.var("s"), mxc.sym.var("t"), test_kw=200)
    ex = d.bind(args={"s": a, "t": b})
    ex.forward()
    out = ex.forward()[0]
    np.testing.assert_array_equal(out, value(exp["state_gemm_forward_x2"][0]))
    node = d.graph.outputs[0].node
    state = node.opdef.state_of(node)
    grads = state.backward([og], [a, b], [out])
    for g, want in zip(grads, exp["state_gemm_in_grad"]):
        np.testing.assert_array_equal(g, value(want))
    del ex, d, node, state
    gc.collect()
    assert capfd.readouterr().out == exp["stdout"]
    grads = run_backward("my_gemm", [og], [a, b])
    for g, want in zip(grads, exp["my_gemm_in_grad"]):
        np.testing.assert_array_equal(g, value(want))


def test_head_gradients_through_the_library_backward(gemm11):
    f = flow(golden("v11", "gemm_lib"), "autograd_seeded")
    a, b, hg = inputs(f, "a", "b", "head_grad")
    for op in ("my_gemm", "state_gemm"):
        exp = f["expected"][op]
        e = op_entry(op)
        state = None
        if op == "state_gemm":
            from mxc.library.native import NativeState
            state = NativeState(e, {})
        out = invoke(e, [a, b], state=state)
        np.testing.assert_array_equal(out[0], value(exp["forward"]))
        for head, ka, kb in ((hg, "grad_a", "grad_b"),
                             (np.ones_like(out[0]), "grad_a_ones", "grad_b_ones")):
            ga, gb = invoke_backward(e, [head], [a, b], out, state=state)
            np.testing.assert_allclose(ga, value(exp[ka]), rtol=1e-6)
            np.testing.assert_allclose(gb, value(exp[kb]), rtol=1e-6)


def test_symbolic_inference_matches(gemm11):
    f = flow(golden("v11", "gemm_lib"), "infer_shape_type")
    for op, kw in (("my_gemm", {}), ("state_gemm", {"test_kw": 200})):
        exp = f["expected"][op]
        sym = getattr(mxc.sym, op)(mxc.sym.var("s"), mxc.sym.var("t"), **kw)
        arg, out, aux = sym.infer_shape(s=(2, 3), t=(3, 4))
        assert [list(x) for x in arg] == exp["infer_shape"]["arg"]
        assert [list(x) for x in out] == exp["infer_shape"]["out"]
        targ, tout, _ = sym.infer_type(s="float32", t="float32")
        assert [np.dtype(t).name for t in tout] == exp["infer_type"]["out"]
        assert sym.list_arguments() == exp["sym"]["list_arguments"]


@pytest.mark.parametrize("name, key, call", [
    ("error_bad_shape_nd", "my_gemm", lambda: invoke(op_entry("my_gemm"), [
        np.ones((2, 3), np.float32), np.ones((4, 1), np.float32)])),
    ("error_bad_dtype_nd", "my_gemm", lambda: invoke(op_entry("my_gemm"), [
        np.ones((2, 3)), np.ones((3, 1))])),
    ("error_bad_ndim_nd", "state_gemm", lambda: invoke(op_entry("state_gemm"), [
        np.ones((2, 3, 1), np.float32), np.ones((3, 1), np.float32)])),
])
def test_hook_failures_carry_the_librarys_messages(gemm11, name, key, call):
    exp = flow(golden("v11", "gemm_lib"), name)["expected"][key]
    with pytest.raises(ExtensionError) as info:
        call()
    err = info.value
    # MXNet's text: "Error calling InferShape for custom operator 'my_gemm'" + traceback;
    # the library's list is never cleared, so the newest message is the last one
    head = exp["message"].split("MXNetError: Check failed: retval: ")[1].split("\n")[0]
    assert head in str(err)
    newest = exp["extension_traceback"][-1].split("] ", 1)[1]
    assert err.messages[-1] == newest
    assert err.extension == "libgemm_lib.so" and err.mxnet_message.startswith(head)


def test_symbolic_error_names_the_node(gemm11):
    c = mxc.sym.my_gemm(mxc.sym.var("s"), mxc.sym.var("t"), name="my_gemm0")
    with pytest.raises(ExtensionError) as info:
        c.infer_shape(s=(2, 3), t=(5, 4))
    assert info.value.node == "my_gemm0"
    assert "Exected first input axis 1 equals to second input axis 0" in str(info.value)


def test_wrong_number_of_inputs(gemm11):
    exp = flow(golden("v11", "gemm_lib"), "error_wrong_num_inputs")["expected"]
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ExtensionError, match="expects 2 inputs, but got 3 instead"):
        invoke(op_entry("my_gemm"), [a, a, a])
    assert "expects 2 inputs, but got 3 instead" in exp["three_inputs"]["message"]


def test_v7_library_prints_its_errors_and_computes_the_same(v7_libs, capfd):
    g = golden("v7", "gemm_lib")
    mxc.library.load(v7_libs / "libgemm_lib.so", mxnet_version=g["mxnet_version_int"])
    out, _ = capfd.readouterr()
    assert out == flow(g, "load_verbose")["expected"]["stdout"]
    f = flow(g, "nd_forward_seeded")
    a, b = inputs(f, "a", "b")
    np.testing.assert_array_equal(invoke(op_entry("my_gemm"), [a, b])[0],
                                  value(f["expected"]["my_gemm"]))
    exp = flow(g, "error_bad_shape_nd")["expected"]
    capfd.readouterr()
    with pytest.raises(ExtensionError, match="Error calling InferShape") as info:
        invoke(op_entry("my_gemm"), [np.ones((2, 3), np.float32), np.ones((4, 1), np.float32)])
    assert info.value.messages == []          # v7 has no message channel: it prints
    assert capfd.readouterr().out == exp["stdout"]


def test_cpu_random_states_are_seeded_mt19937_states(gemm11):
    """MXNet hands library ops an array of std::mt19937; libstdc++'s layout is 624 words and
    the position.  numpy's legacy RandomState(seed) runs the same init_genrand."""
    from mxc.library.native.calls import random_states
    from mxc.library.native.calls import OpEntry
    entry = OpEntry(op_entry("my_gemm").lib, "probe", False)
    random_states(entry, seed=7)
    words = entry._rng
    assert words.shape == (1024, 625) and words.dtype == np.uint64
    for i in (0, 1, 1023):
        key = np.random.RandomState(7 + i).get_state()[1]
        np.testing.assert_array_equal(words[i, :624], key.astype(np.uint64))
        assert words[i, 624] == 624


def test_contiguous_arrays_cross_without_copies(gemm11):
    from mxc.library.native import calls
    e = op_entry("my_gemm")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = np.zeros((2, 2), np.float32)
    result = calls.compute(e, e.forward, {}, [a, b], [out])
    assert result[0] is out                       # the library wrote into our buffer
    np.testing.assert_array_equal(out, a @ b)
    bt = np.asfortranarray(b)                     # not C-contiguous: copied, still right
    np.testing.assert_array_equal(invoke(e, [a, bt])[0], a @ b)
