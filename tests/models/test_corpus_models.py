"""Every exported model of the corpus: load, list, infer, run, round-trip.

Oracle: ``meta.json`` (MXNet's list_* and infer_shape results) and ``io.npz``
(MXNet 1.9.1's outputs for the stored inputs).
"""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from conftest import load_corpus_model, model_names
from mxc.compiler.ir.compare import graphs_equal

MODELS = model_names() or ["no-corpus"]


def load_model(name):
    return load_corpus_model("models", name)


@pytest.mark.parametrize("name", MODELS)
def test_model_lists_and_shapes(name):
    root, meta, sym, params = load_model(name)
    assert sym.list_arguments() == meta["list_arguments"]
    assert sym.list_auxiliary_states() == meta["list_auxiliary_states"]
    assert sym.list_inputs() == meta["list_inputs"]
    assert sym.list_outputs() == meta["list_outputs"]
    shapes = {k: tuple(v["shape"]) for k, v in meta["inputs"].items()}
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(**shapes)
    assert arg_shapes is not None, "shape inference incomplete"
    want = meta["infer_shape"]
    assert dict(zip(sym.list_arguments(), map(list, arg_shapes))) == want["arg"]
    assert dict(zip(sym.list_auxiliary_states(), map(list, aux_shapes))) == want["aux"]
    assert dict(zip(sym.list_outputs(), map(list, out_shapes))) == want["out"]
    # every stored parameter is an argument or aux state of the right shape
    arg_names = set(sym.list_arguments())
    for key, value in params.items():
        kind, _, pname = key.partition(":")
        assert pname in (arg_names if kind == "arg" else set(sym.list_auxiliary_states()))
        assert value.shape == tuple(want["arg" if kind == "arg" else "aux"][pname])


@pytest.mark.parametrize("name", MODELS)
def test_model_reference_outputs_match_mxnet(name):
    root, meta, sym, params = load_model(name)
    io = np.load(root / "io.npz")
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    args.update({k[4:]: io[k] for k in io.files if k.startswith("in__")})
    outs = sym.bind(args=args, aux_states=aux).forward()
    assert len(outs) == len(meta["list_outputs"])
    for i, got in enumerate(outs):
        want = io[f"out__{i}"]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=meta["rtol"], atol=meta["atol"],
                                   err_msg=f"{name} output {i}")


@pytest.mark.parametrize("name", MODELS)
def test_model_json_round_trip(name):
    root, meta, sym, params = load_model(name)
    again = mxc.sym.load_json(sym.tojson())
    assert graphs_equal(sym.graph, again.graph)
    assert again.tojson() == sym.tojson()
