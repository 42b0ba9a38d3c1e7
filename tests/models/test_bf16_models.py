"""Every corpus model compiled with ``precision="bf16"`` against MXNet's float32 outputs.

Oracle: ``io.npz`` (MXNet 1.9.1's float32 outputs for the stored inputs),
compared in the "bf16" tolerance class of :mod:`mxc.backends.tvm.precision`
(error relative to each output's range; ``meta.json``'s float32 rtol/atol
do not apply to bfloat16 products).  Needs a CPU with AVX512-BF16 to run.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("ml_dtypes")

import mxc  # noqa: E402
from conftest import load_corpus_model, model_names  # noqa: E402
from mxc.backends.tvm.precision import BF16_TOLERANCE, range_error  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

MODELS = model_names() or ["no-corpus"]
#: models whose float32 convolutions/dense layers all become bfloat16 kernels
CONV_MODELS = {"lenet", "mlp", "mobilenet0.25", "mobilenetv2_0.25", "oldres", "resnet18_v1",
               "squeezenet1.1"}


def _host_has_bf16() -> bool:
    from mxc.runtime.cpu_features import host_cpu
    return "avx512bf16" in (host_cpu().features() or ())


@pytest.mark.parametrize("name", MODELS)
def test_corpus_model_bf16_within_the_bf16_class(name):
    root, meta, sym, params = load_corpus_model("models", name)
    if not _host_has_bf16():
        pytest.skip("this CPU has no AVX512-BF16")
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    dtypes = {k: str(v.dtype) for k, v in feeds.items() if v.dtype != np.float32}
    model = mxc.compile(sym, params, {k: v.shape for k, v in feeds.items()}, dtypes,
                        precision="bf16")
    prec = model.manifest["precision"]
    assert prec["mode"] == "bf16"
    if name in CONV_MODELS:
        assert prec["kernels"] > 0
    outs = model.run(feeds)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    for i, got in enumerate(outs):
        want = io[f"out__{i}"]
        assert np.asarray(got).shape == want.shape
        if want.dtype.kind == "f":
            assert range_error(np.asarray(got), want) <= BF16_TOLERANCE, f"{name} output {i}"


#: models whose layers AMX tiles fit (stride-1, >= 32-channel convolutions)
TILE_MODELS = [m for m in ("resnet18_v1", "squeezenet1.1") if m in MODELS] or ["no-corpus"]


@pytest.mark.parametrize("name", TILE_MODELS)
def test_corpus_model_bf16_on_emulated_amx_tiles(name, amx_emulated):
    """The AMX-BF16 build (tile steps emulated, :mod:`mxc.backends.tvm.schedules.base.amx`)
    within the same bf16 class of MXNet's float32 outputs."""
    root, meta, sym, params = load_corpus_model("models", name)
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    model = mxc.compile(sym, params, {k: v.shape for k, v in feeds.items()},
                        precision="bf16", target=amx_emulated)
    prec = model.manifest["precision"]
    assert prec["tile_kernels"] > 0 and prec["kernels"] >= prec["tile_kernels"]
    outs = model.run(feeds)
    for i, got in enumerate(outs if isinstance(outs, (list, tuple)) else [outs]):
        assert range_error(np.asarray(got), io[f"out__{i}"]) <= BF16_TOLERANCE, f"{name} {i}"
