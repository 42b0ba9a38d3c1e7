"""lib_api v8 and v10 libraries (no MXNet release loads v8) give v11's results.

The goldens exist for v11 (MXNet 1.9.1) and v7 (1.7.0); v8 and v10 are checked
against v11's expected values wherever their example sources agree (gemm,
sparse transposes, myProp partitioning; v10 also has addInputPass).  Each
test unloads what it loaded, so the v11 registrations other tests rely on
come back.
"""

from __future__ import annotations

import contextlib
import gc
import json

import numpy as np
import pytest

import mxc
from mxc.library.native import CSRArray, invoke, invoke_backward, op_entry
from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    build_extensions, example_graphs, flow, golden, value, _unload_native_libraries)


@contextlib.contextmanager
def loaded(version: str, name: str):
    rec = mxc.library.load(build_extensions(version) / name, verbose=False)
    try:
        yield rec
    finally:
        gc.collect()
        mxc.library.unload(rec)


@pytest.mark.parametrize("version", ["v8", "v10"])
def test_gemm_forward_backward_and_state(version, capfd):
    f = flow(golden("v11", "gemm_lib"), "sym_bind_forward_backward_test_gemm")
    a, b, og = (np.array(f["inputs"][k], np.float32) for k in ("a", "b", "out_grad"))
    exp = f["expected"]
    with loaded(version, "libgemm_lib.so") as rec:
        assert rec.native.version == int(version[1:])
        e = op_entry("my_gemm")
        out = invoke(e, [a, b])
        np.testing.assert_array_equal(out[0], value(exp["my_gemm_forward"][0]))
        for g, want in zip(invoke_backward(e, [og], [a, b], out), exp["my_gemm_in_grad"]):
            np.testing.assert_array_equal(g, value(want))
        capfd.readouterr()
        np.testing.assert_array_equal(invoke(op_entry("state_gemm"), [a, b], {"test_kw": 200})[0],
                                      value(exp["state_gemm_forward_x2"][0]))
        assert "Info: keyword + number of forward: 201" in capfd.readouterr().out


@pytest.mark.parametrize("version", ["v8", "v10"])
def test_csr_transpose(version):
    f = flow(golden("v11", "transposecsr_lib"), "nd_forward_seeded")
    x = CSRArray.from_dense(value(f["inputs"]["a"]))
    with loaded(version, "libtransposecsr_lib.so"):
        got = invoke(op_entry("my_transposecsr"), [x])[0]
    want = f["expected"]["my_transposecsr"]
    np.testing.assert_array_equal(got.todense(), value(want))
    np.testing.assert_array_equal(got.indptr, want["indptr"])


@pytest.mark.parametrize("version", ["v8", "v10"])
def test_myprop_partitioning(version):
    exp = flow(golden("v11", "subgraph_lib"), "myProp/partition_with_args")["expected"]
    sym, _ = example_graphs()
    args = {"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)}
    with loaded(version, "libsubgraph_lib.so") as rec:
        part = sym.optimize_for("myProp", args, dedup_subgraph=True)
        ops = [n.op for n in part.graph.topo_order() if n.op is not None]
        assert ops == [n["op"] for n in exp["partitioned"]["json"]["nodes"] if n["op"] != "null"]
        np.testing.assert_array_equal(part.bind(args=args).forward()[0],
                                      value(exp["forward"][0]))
        if version == "v10":
            assert rec.graph_passes == ["addInputPass"]
            aux: dict = {}
            passed = part.optimize_for("addInputPass", args, aux, clear=False)
            assert passed.list_arguments() == ["a", "b", "_op0_input"]
            np.testing.assert_array_equal(passed.bind(args=args).forward()[0],
                                          value(exp["forward"][0]))


@pytest.mark.parametrize("version", ["v8", "v10"])
def test_library_pass_output_ownership(version):
    """v8 hands the pass's output as a leaked std::string buffer, v10 as malloc'ed memory;
    both come back as the same graph v11's myPass returns."""
    exp = flow(golden("v11", "pass_lib"), "myPass/symbol_optimize_for_with_args")["expected"]
    sym, _ = example_graphs()
    args = {"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)}
    with loaded(version, "libpass_lib.so") as rec:
        assert rec.native.abi.pass_output == {"v8": "leaked", "v10": "malloc"}[version]
        out = sym.optimize_for("myPass", args, {})
    assert json.loads(out.tojson())["nodes"] == exp["optimized"]["json"]["nodes"]
