"""Dynamic batch on the deployment formats: control flow, INT8 and a host-fallback
(Python ``Custom``) operator.  Each corpus model is compiled with a batch range and
either runs every batch in the range with the numpy reference's outputs (the oracle)
within the model's tolerance, or is refused at compile time with the reason -- which
one is decided by what the model computes, and written down here per model."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
import mxc.runtime as rt
from mxc.errors import BackendError

from conftest import load_corpus_model, register_mysoftsign  # noqa: E402 - tests/ on sys.path

pytest.importorskip("tvm")

#: model -> (input, the axis that is its batch, the range compiled, batches run, and None
#: where every batch must run, else the words of the refusal)
CASES = {
    # the branch taken depends on a reduction over the whole input: rows interact
    "cf_cond": ("data", 0, (1, 4), (1, 3, 4), "mixes rows"),
    # time-major (batch on axis 1); its initial state is a weight of the exported batch
    "cf_foreach_rnn": ("data", 1, (1, 4), (1, 3, 4), "could not run the model"),
    "custom_softsign_mlp": ("data", 0, (1, 4), (1, 3, 4), None),
    # uncalibrated quantization takes the min/max of the whole batch: rows interact
    "int8_mobilenet0.5_nocalib": ("data", 0, (1, 2), (1, 2), "mixes rows"),
    # calibrated INT8 (MXNet's quantize_model): fixed scales, rows independent
    "int8_resnet18_v1_classic": ("data", 0, (1, 2), (1, 2), None),
}


def _split(params):
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    return args, aux


@pytest.mark.corpus
@pytest.mark.parametrize("name", list(CASES))
def test_a_deployment_format_runs_every_batch_of_its_range_or_is_refused(name, tmp_path):
    root, meta, sym, params = load_corpus_model("wave2/models", name)
    if name == "custom_softsign_mlp":
        register_mysoftsign()
    data, axis, (lo, hi), batches, refusal = CASES[name]
    row = list(meta["inputs"][data]["shape"])
    shape = row.copy()
    shape[axis] = (lo, hi)
    args, aux = _split(params)
    if refusal is not None:
        with pytest.raises(BackendError, match=refusal):
            mxc.compile(sym, (args, aux), {data: tuple(shape)})
        return
    model = mxc.compile(sym, (args, aux), {data: tuple(shape)})
    sess = rt.load(model.save(tmp_path / f"{name}.mxc"))
    assert sess.batch_range == (lo, hi)
    for batch in batches:
        row[axis] = batch
        x = np.random.default_rng(batch).standard_normal(row).astype("float32")
        want = sym.bind(args={**args, data: x}, aux_states=aux).forward()
        got = sess.run({data: x})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=meta["rtol"],
                                       atol=meta["atol"], err_msg=f"{name} batch {batch}")
