"""Every model of the wave-2 corpus (``corpus/wave2/models``): load, list, infer, run.

Oracle: ``meta.json`` (MXNet's list_* and infer_shape; ``null`` where MXNet
could not infer a shape: mxc may know more there, and must not contradict
what MXNet knew) and ``io.npz`` (MXNet 1.9.1's outputs, compared with the
model's own absolute tolerances).
"""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from conftest import (load_corpus_model, model_names, register_mysoftsign, require_corpus,
                      require_runnable_target)
from mxc.compiler.custom_op import unregister_custom_op
from oracle import assert_close

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

SPLIT = "wave2/models"
MODELS = model_names(SPLIT) or ["no-corpus"]


def load_model(name):
    if name == "no-corpus":
        require_corpus(SPLIT)
    return load_corpus_model(SPLIT, name)


def split_params(params):
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    return args, aux


@pytest.mark.parametrize("name", MODELS)
def test_wave2_model_lists_and_shapes(name):
    root, meta, sym, params = load_model(name)
    assert sym.list_arguments() == meta["list_arguments"]
    assert sym.list_auxiliary_states() == meta["list_auxiliary_states"]
    assert sym.list_inputs() == meta["list_inputs"]
    assert sym.list_outputs() == meta["list_outputs"]
    shapes = {k: tuple(v["shape"]) for k, v in meta["inputs"].items()}
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape_partial(**shapes)
    want = meta["infer_shape"]
    got = {"arg": dict(zip(sym.list_arguments(), arg_shapes)),
           "aux": dict(zip(sym.list_auxiliary_states(), aux_shapes)),
           "out": dict(zip(sym.list_outputs(), out_shapes))}
    for kind in ("arg", "aux", "out"):
        for key, shape in want[kind].items():
            if shape is not None:
                assert list(got[kind][key]) == shape, f"{kind} {key}"


@pytest.mark.parametrize("name", MODELS)
def test_wave2_model_reference_outputs_match_mxnet(name):
    root, meta, sym, params = load_model(name)
    io = np.load(root / "io.npz")
    args, aux = split_params(params)
    args.update({k[4:]: io[k] for k in io.files if k.startswith("in__")})
    outs = sym.bind(args=args, aux_states=aux).forward()
    assert len(outs) == len(meta["list_outputs"])
    for i, got in enumerate(outs):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i}")


@pytest.mark.corpus
@pytest.mark.parametrize("name", MODELS)
def test_wave2_model_compiles_and_runs(name, tmp_path):
    """``mxc.compile`` (llvm, or ``MXC_TEST_TARGET``: another CPU's code) -> ``.mxc`` ->
    ``mxc.runtime.load`` -> MXNet's outputs."""
    pytest.importorskip("tvm")
    import mxc.runtime

    root, meta, sym, params = load_model(name)
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    shapes = {k: v.shape for k, v in feeds.items()}
    dtypes = {k: str(v.dtype) for k, v in feeds.items() if v.dtype != np.float32}
    model = mxc.compile(sym, split_params(params), shapes=shapes, dtypes=dtypes or None,
                        target=require_runnable_target())
    sess = mxc.runtime.load(model.save(tmp_path / f"{name}.mxc"))
    outs = sess.run(feeds)
    assert len(outs) == len(meta["list_outputs"])
    for i, got in enumerate(outs):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i} (compiled)")


# ---------------------------------------------------------------------------
# custom operators a model needs (MXNet: a CustomOpProp registered in Python)
# ---------------------------------------------------------------------------


MODEL_CUSTOM_OPS = {"custom_softsign_mlp": register_mysoftsign}


@pytest.fixture(autouse=True)
def _model_custom_ops(request):
    """Register the custom operators of the model under test (and only for it)."""
    callspec = getattr(request.node, "callspec", None)
    register = MODEL_CUSTOM_OPS.get(callspec.params.get("name")) if callspec else None
    if register is None:
        yield
        return
    name = register()
    try:
        yield
    finally:
        unregister_custom_op(name)
