"""The corpus's ``subgraph_lib`` and ``pass_lib`` through ``optimize_for``, against MXNet's goldens.

The flows of the goldens are re-expressed with mxc's own API (``mxc.sym``,
``Symbol.optimize_for``, ``bind``); every partitioned/passed graph is compared
with MXNet's ``tojson()``, parameters after the pass with MXNet's, forward
outputs exactly, and what the library printed as a multiset of lines
(libraries print ``std::unordered_map`` contents in hash order).
"""

from __future__ import annotations

import gc
import json
from collections import Counter

import numpy as np
import pytest

import mxc
from tests.extensions.native.conftest import (build_extensions, example_graphs, flow, golden,
                                              value)


model = example_graphs


def ones():
    return {"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)}


def same_graph(got, want: dict) -> None:
    doc = json.loads(got.tojson())
    for key in ("nodes", "arg_nodes", "node_row_ptr", "heads"):
        assert doc[key] == want["json"][key], key
    assert got.list_arguments() == want["list_arguments"]
    assert got.list_auxiliary_states() == want["list_auxiliary_states"]


def lines(text: str) -> Counter:
    return Counter(text.splitlines())


@pytest.fixture(scope="module")
def subgraph11():
    libs = build_extensions("v11")
    return mxc.library.load(libs / "libsubgraph_lib.so", verbose=False)


def test_subgraph_library_report(capfd):
    libs = build_extensions("v11")
    g = golden("v11", "subgraph_lib")
    rec = mxc.library.load(libs / "libsubgraph_lib.so")
    _, err = capfd.readouterr()
    log = flow(g, "load_verbose")["expected"]["log"]
    assert rec.operators == [o["name"] for o in log["operators"]]
    assert rec.partitioners == [p["name"] for p in log["partitioners"]]
    assert rec.graph_passes == [p["name"] for p in log["passes"]]
    want = [l.split(": ", 1)[1] if "c_api.cc" in l else l
            for l in flow(g, "load_verbose")["expected"]["stderr"].splitlines()]
    assert err.splitlines() == want


def _run(capfd, fn):
    capfd.readouterr()
    result = fn()
    gc.collect()
    return result, capfd.readouterr().out


@pytest.mark.parametrize("backend", ["myProp", "mySelect"])
@pytest.mark.parametrize("case", ["partition_with_args", "partition_with_args_reject",
                                  "partition_without_args", "sym2_partition_with_args_reqArgs",
                                  "partition_with_args_reqFloat"])
def test_partitioning_matches_mxnet(subgraph11, capfd, backend, case):
    exp = flow(golden("v11", "subgraph_lib"), f"{backend}/{case}")["expected"]
    sym, sym2 = model()
    opts = {"dedup_subgraph": True}
    if case.endswith("reject"):
        opts["reject"] = True
    if case.endswith("reqFloat"):
        opts["reqFloat"] = True
    if case.endswith("reqArgs"):
        opts["reqArgs"] = True
    args = {"a": ones()["a"]} if case.startswith("sym2") else ones()
    base = sym2 if case.startswith("sym2") else sym

    def go():
        if case == "partition_without_args":
            part = base.optimize_for(backend, myOpt="yello", dedup_subgraph=True)
        else:
            part = base.optimize_for(backend, dict(args), **opts)
        return part, part.bind(args=dict(args)).forward()

    (part, out), printed = _run(capfd, go)
    same_graph(part, exp["partitioned"])
    np.testing.assert_array_equal(out[0], value(exp["forward"][0]))
    assert lines(printed) == lines(exp["stdout"])


@pytest.mark.parametrize("backend", ["myProp", "mySelect"])
def test_add_input_pass_after_partitioning(subgraph11, capfd, backend):
    exp = flow(golden("v11", "subgraph_lib"), f"{backend}/symbol_addInputPass")["expected"]
    sym, _ = model()
    args = ones()
    aux: dict = {}

    def go():
        part = sym.optimize_for(backend, args, dedup_subgraph=True)
        # mxc's Symbol.optimize_for clears earlier partitions unless told not to
        passed = part.optimize_for("addInputPass", args, aux, clear=False, dedup_subgraph=True)
        return passed, passed.bind(args=args).forward()

    (passed, out), printed = _run(capfd, go)
    same_graph(passed, exp["after_pass"])
    assert sorted(set(args) - {"a", "b"}) == exp["new_arg_names"]
    for name, meta in exp["new_args"].items():
        assert (args[name].dtype.name, list(args[name].shape)) == (meta["dtype"], meta["shape"])
    assert sorted(aux) == exp["aux_names"]
    np.testing.assert_array_equal(out[0], value(exp["forward"][0]))
    assert lines(printed) == lines(exp["stdout"])


@pytest.mark.parametrize("version, passname", [("v11", "myPass"), ("v7", "myPass"),
                                               ("v7", "jsonPass")])
def test_library_passes_update_args_as_mxnet(capfd, version, passname):
    libs = build_extensions(version)
    g = golden(version, "pass_lib")
    mxc.library.load(libs / "libpass_lib.so", verbose=False, mxnet_version=g["mxnet_version_int"])
    exp = flow(g, f"{passname}/symbol_optimize_for_with_args")["expected"]
    sym, _ = model()
    args, aux = ones(), {}

    def go():
        out = sym.optimize_for(passname, args, aux)
        return out, out.bind(args=args, aux_states=aux).forward()

    (optimized, out), printed = _run(capfd, go)
    same_graph(optimized, exp["optimized"])
    assert sorted(args) == exp["arg_names_after"] and sorted(aux) == exp["aux_names_after"]
    for got, want in ((args, exp["args_after"]), (aux, exp["aux_after"])):
        for name, meta in want.items():
            assert (got[name].dtype.name, list(got[name].shape)) == (meta["dtype"], meta["shape"])
            if "value" in meta:
                np.testing.assert_array_equal(got[name], value(meta))
    np.testing.assert_array_equal(out[0], value(exp["forward"][0]))
    assert lines(printed) == lines(exp["stdout"])


def test_v7_review_gets_every_given_parameter_tensor(capfd):
    """MXNet 1.7's example prints each arg reviewSubgraph receives: all arrays given to
    optimize_for, not only those the region reads."""
    libs = build_extensions("v7")
    g = golden("v7", "subgraph_lib")
    rec = mxc.library.load(libs / "libsubgraph_lib.so", verbose=False,
                           mxnet_version=g["mxnet_version_int"])
    try:
        exp = flow(g, "myProp/partition_with_args")["expected"]
        sym, _ = model()
        args = ones()
        (part, out), printed = _run(capfd, lambda: (
            (p := sym.optimize_for("myProp", args)), p.bind(args=args).forward()))
        same_graph(part, exp["partitioned"])
        np.testing.assert_array_equal(out[0], value(exp["forward"][0]))
        assert lines(printed) == lines(exp["stdout"])
        assert "arg: a ==> (3,2,) [1, 1, 1, 1, 1, 1, ]" in printed
    finally:
        gc.collect()
        mxc.library.unload(rec)
