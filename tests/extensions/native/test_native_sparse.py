"""Sparse storage across the boundary: the corpus's transposecsr/transposerowsp libraries.

The library reads CSR / row-sparse inputs from the three flat buffers and
allocates its sparse output through the sparse allocator callback; results
are compared with MXNet's goldens component by component (data, indices,
indptr, dense value).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import mxc
from mxc.errors import ExtensionError
from mxc.library.native import CSRArray, RowSparseArray, invoke, op_entry
from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    build_extensions, flow, golden, value, _unload_native_libraries)

KINDS = {"transposecsr": (CSRArray, "csr"), "transposerowsp": (RowSparseArray, "rowsp")}


def sparse_input(kind: str, encoded: dict):
    cls = KINDS[kind][0]
    return cls.from_dense(value(encoded))


def check(got, want: dict) -> None:
    assert got.stype == want["stype"] and list(got.shape) == want["shape"]
    np.testing.assert_array_equal(got.todense(), value(want))
    np.testing.assert_array_equal(got.data.reshape(-1), np.asarray(want["data"],
                                                                   np.float32).reshape(-1))
    np.testing.assert_array_equal(got.indices, want["indices"])
    if "indptr" in want:
        np.testing.assert_array_equal(got.indptr, want["indptr"])


@pytest.mark.parametrize("kind", ["transposecsr", "transposerowsp"])
@pytest.mark.parametrize("case", ["nd_forward_test_inputs", "nd_forward_seeded"])
def test_sparse_transpose_matches_mxnet(capfd, kind, case):
    libs = build_extensions("v11")
    mxc.library.load(libs / f"lib{kind}_lib.so", verbose=False)
    f = flow(golden("v11", f"{kind}_lib"), case)
    short = KINDS[kind][1]
    x = sparse_input(kind, f["inputs"]["a"])
    assert x.stype == f["inputs"]["a"]["stype"]
    capfd.readouterr()
    exp = f["expected"]
    check(invoke(op_entry(f"my_transpose{short}"), [x])[0], exp[f"my_transpose{short}"])
    key = [k for k in exp if k.startswith(f"my_state_transpose{short}")][0]
    kw = {"test_kw": 100} if key.endswith("100") else {"test_kw": 5}
    check(invoke(op_entry(f"my_state_transpose{short}"), [x], kw)[0], exp[key])
    gc.collect()
    assert capfd.readouterr().out == exp["stdout"]


def test_dense_input_to_a_sparse_operator_is_the_librarys_error():
    libs = build_extensions("v11")
    mxc.library.load(libs / "libtransposecsr_lib.so", verbose=False)
    exp = flow(golden("v11", "transposecsr_lib"), "dense_input")["expected"]["my_transposecsr"]
    a = np.array([[1, 3, 0, 2, 1], [0, 1, 0, 0, 0], [0, 2, 4, 5, 3]], np.float32)
    with pytest.raises(ExtensionError, match="Error calling InferSType") as info:
        invoke(op_entry("my_transposecsr"), [a])
    assert info.value.messages[-1] == exp["extension_traceback"][-1].split("] ", 1)[1]


def test_csr_container_round_trip():
    dense = np.array([[0, 2, 0], [1, 0, 3]], np.float32)
    c = CSRArray.from_dense(dense)
    assert c.indptr.tolist() == [0, 1, 3] and c.indices.tolist() == [1, 0, 2]
    np.testing.assert_array_equal(c.todense(), dense)
    r = RowSparseArray.from_dense(np.array([[0, 0], [1, 2], [0, 0]], np.float32))
    assert r.indices.tolist() == [1]
    with pytest.raises(ExtensionError):
        CSRArray(np.ones(2, np.float32), np.zeros(1), np.zeros(3), (2, 2))


def test_sparse_through_the_operator_definition(capfd):
    """The graph path (``OpDef.forward``, what executors call): storage types are
    dispatched when the operator runs, with the inputs' actual storage."""
    from mxc.compiler.ops.registry import ForwardContext
    libs = build_extensions("v11")
    mxc.library.load(libs / "libtransposecsr_lib.so", verbose=False)
    f = flow(golden("v11", "transposecsr_lib"), "sym_bind_forward_test_inputs")
    x = sparse_input("transposecsr", f["inputs"]["d"])
    for op, kw, key in (("my_transposecsr", {}, "my_transposecsr"),
                        ("my_state_transposecsr", {"test_kw": 200},
                         "my_state_transposecsr_forward_x2")):
        sym = getattr(mxc.sym, op)(mxc.sym.var("d"), **kw)
        (shape,) = sym.infer_shape(d=x.shape)[1]
        node = sym.graph.outputs[0].node
        ctx = ForwardContext(node=node, out_shapes=[shape], out_dtypes=["float32"],
                             in_shapes=[x.shape], in_dtypes=["float32"])
        capfd.readouterr()
        for _ in range(2 if "state" in op else 1):
            (out,) = node.opdef.forward(node.params, [x], ctx)
        check(out, f["expected"][key][0])
    assert "Info: keyword + number of forward: 202" in capfd.readouterr().out
    dense = np.ones((3, 5), np.float32)
    with pytest.raises(ExtensionError, match="Error calling InferSType"):
        node = mxc.sym.my_transposecsr(mxc.sym.var("d")).graph.outputs[0].node
        node.opdef.forward(node.params, [dense], ForwardContext(
            node=node, out_shapes=[(5, 3)], out_dtypes=["float32"], in_shapes=[(3, 5)],
            in_dtypes=["float32"]))
