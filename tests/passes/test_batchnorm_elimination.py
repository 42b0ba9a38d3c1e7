"""``remove-dropout,fold-batchnorm,dce`` leaves no BatchNorm in any corpus model, outputs kept.

BatchNorms after a Conv/FC fold into the layer; the others (after a sum, a
concatenation, a dequantize ...) become a per-channel scale and shift.
Oracle: each model's ``io.npz`` (MXNet 1.9.1) within the model's tolerance,
on the reference backend, for the first corpus and wave 2 (models whose
operators this build does not know are skipped with the reason).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxc
from conftest import model_names, require_corpus
from mxc.backends.reference import run_graph
from mxc.errors import UnsupportedOpError
from oracle import assert_close

PIPELINE = "remove-dropout,fold-batchnorm,dce"
SPLITS = [("models", n) for n in model_names("models")] + \
    [("wave2/models", n) for n in model_names("wave2/models")]

pytestmark = pytest.mark.corpus


def _batchnorms(graph) -> int:
    return sum(1 for n in graph.topo_order() if n.op is not None and n.opdef.name == "BatchNorm")


@pytest.mark.parametrize("split,name", SPLITS or [("models", "no-corpus")])
def test_no_batchnorm_survives_and_outputs_are_kept(split, name):
    root = require_corpus(split) / name
    meta = json.loads((root / "meta.json").read_text())
    if "BatchNorm" not in meta["ops"]:
        pytest.skip("no top-level BatchNorm")
    try:
        sym = mxc.sym.load(root / "symbol.json")
        sym.list_outputs()
    except UnsupportedOpError as exc:
        pytest.skip(f"operators of another family: {exc}")
    params = mxc.nd.load(root / "model.params")
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    assert _batchnorms(sym.graph) == meta["ops"]["BatchNorm"]
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    result = mxc.passes.run(sym, PIPELINE, args, aux,
                            shapes={k: v.shape for k, v in feeds.items()})
    result.graph.verify()
    assert _batchnorms(result.graph) == 0
    outs = run_graph(result.graph, {**result.args, **result.aux, **feeds})
    for i, got in enumerate(outs):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i} after {PIPELINE}")


def test_unfoldable_batchnorm_becomes_scale_and_shift():
    """A BatchNorm after an add (pre-activation style) is x * s + t, s and t per channel."""
    from mxc import sym as S
    x, y = S.var("x"), S.var("y")
    out = S.BatchNorm(x + y, S.var("g"), S.var("b"), S.var("m"), S.var("v"), fix_gamma=False,
                      eps=1e-3, name="bn")
    rng = np.random.default_rng(0)
    c = 3
    args = {"g": rng.uniform(0.5, 1.5, c).astype(np.float32),
            "b": rng.uniform(-1, 1, c).astype(np.float32)}
    aux = {"m": rng.uniform(-1, 1, c).astype(np.float32),
           "v": rng.uniform(0.5, 2, c).astype(np.float32)}
    result = mxc.passes.run(out, PIPELINE, args, aux, shapes={"x": (2, c, 4, 4), "y": (2, c, 4, 4)})
    ops = [n.op for n in result.graph.topo_order() if n.op is not None]
    assert "BatchNorm" not in ops and ops.count("broadcast_mul") == 1
    xs = rng.standard_normal((2, c, 4, 4)).astype(np.float32)
    ys = rng.standard_normal((2, c, 4, 4)).astype(np.float32)
    got = run_graph(result.graph, {**result.args, **result.aux, "x": xs, "y": ys})[0]
    shape = (1, c, 1, 1)
    s = args["g"] / np.sqrt(aux["v"] + 1e-3)
    want = (xs + ys - aux["m"].reshape(shape)) * s.reshape(shape) + args["b"].reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
