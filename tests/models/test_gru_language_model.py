"""A GRU language model as gluon exports it (``_rnn_param_concat`` -> ``RNN`` mode gru).

The held-out model that motivated ``_rnn_param_concat``: token ids ->
Embedding -> one fused GRU layer whose flat parameter vector gluon builds by
concatenating the flattened ``l0_i2h/h2h`` weights then biases -> a dense
decoder over the vocabulary.  Oracle: a GRU written here in numpy from the
cuDNN equations (gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``),
independent of mxc's RNN kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym as S
from oracle import assert_close

T, N, VOCAB, EMB, H = 5, 2, 20, 8, 6


def _model():
    data = S.var("data")
    emb = S.Embedding(data, S.var("emb_weight"), input_dim=VOCAB, output_dim=EMB)
    flat = [S.Reshape(S.var(n), shape=(-1,)) for n in
            ("l0_i2h_weight", "l0_h2h_weight", "l0_i2h_bias", "l0_h2h_bias")]
    params = S._rnn_param_concat(*flat, num_args=4, dim=0)
    begin = S._zeros(shape=(1, 0, H))
    rnn = S.RNN(emb, params, begin, state_size=H, num_layers=1, mode="gru")
    return S.FullyConnected(rnn, S.var("fc_weight"), S.var("fc_bias"), num_hidden=VOCAB,
                            flatten=False)


def _weights(rng):
    u = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)  # noqa: E731
    return {"emb_weight": u(VOCAB, EMB), "l0_i2h_weight": u(3 * H, EMB),
            "l0_h2h_weight": u(3 * H, H), "l0_i2h_bias": u(3 * H), "l0_h2h_bias": u(3 * H),
            "fc_weight": u(VOCAB, H), "fc_bias": u(VOCAB)}


def _numpy_gru_lm(tokens, w):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x = w["emb_weight"][tokens.astype(np.int64)].astype(np.float64)
    wi, wh = w["l0_i2h_weight"].astype(np.float64), w["l0_h2h_weight"].astype(np.float64)
    bi, bh = w["l0_i2h_bias"].astype(np.float64), w["l0_h2h_bias"].astype(np.float64)
    h = np.zeros((tokens.shape[1], H))
    outs = []
    for t in range(tokens.shape[0]):
        gi, gh = x[t] @ wi.T + bi, h @ wh.T + bh
        r = sig(gi[:, :H] + gh[:, :H])
        z = sig(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * h
        outs.append(h)
    return np.stack(outs) @ w["fc_weight"].T.astype(np.float64) + w["fc_bias"]


def test_gru_lm_infers_the_flat_parameter_vector():
    _, out_shapes, _ = _model().infer_shape(
        data=(T, N), **{k: v.shape for k, v in _weights(np.random.default_rng(0)).items()})
    assert out_shapes == [(T, N, VOCAB)]


def test_gru_lm_reference_matches_numpy():
    rng = np.random.default_rng(1)
    w = _weights(rng)
    tokens = rng.integers(0, VOCAB, (T, N)).astype(np.float32)
    got = _model().bind(args={**w, "data": tokens}).forward()[0]
    assert_close(np.asarray(got), _numpy_gru_lm(tokens, w).astype(np.float32), 1e-4, 1e-5,
                 "GRU LM (reference)")


def test_gru_lm_compiled_matches_numpy(tmp_path):
    pytest.importorskip("tvm")
    import mxc
    import mxc.runtime
    rng = np.random.default_rng(2)
    w = _weights(rng)
    tokens = rng.integers(0, VOCAB, (T, N)).astype(np.float32)
    model = mxc.compile(_model(), w, shapes={"data": (T, N)})
    assert not model.manifest["host_nodes"], model.manifest["host_nodes"]
    got = mxc.runtime.load(model.save(tmp_path / "gru_lm.mxc")).run({"data": tokens})[0]
    assert_close(got, _numpy_gru_lm(tokens, w).astype(np.float32), 1e-4, 1e-5,
                 "GRU LM (compiled)")
