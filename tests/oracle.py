"""The corpus comparison rule, shared by every test that checks outputs against MXNet.

A result matches when shapes and dtypes are equal, NaN positions agree and
``|got - want| <= atol + rtol * |want|`` elementwise (the corpus README's rule);
integer outputs must be equal, or within ``atol`` codes when a case allows it
(quantized ops may differ by one rounding step).

Also the integer product oneDNN computes on a CPU without VNNI
(:func:`pre_vnni_int_dot`), which explains the corpus cases recorded on one
(:data:`PRE_VNNI_RECORDED`): a model of that CPU, not a result of mxc's.
"""

from __future__ import annotations

import numpy as np

#: corpus/quantize cases whose MXNet outputs carry oneDNN's saturating int8 GEMM of a CPU
#: without VNNI (:func:`pre_vnni_int_dot`; tests/models/test_quantize_corpus_int8.py shows it)
PRE_VNNI_RECORDED = {
    "model_mlp3_entropy_int8": "classic _contrib_quantized_fully_connected on int8 data",
    "net_mlp3_none_full_int8": "_sg_mkldnn_fully_connected (calib none) on int8 data",
}


def assert_close(got, want, rtol, atol, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        if atol >= 1:  # quantized codes may differ by a rounding step
            diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
            assert diff.max(initial=0) <= atol, f"{what}: max int diff {diff.max()}"
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{what}: NaN positions differ"
    ok = np.isnan(w) | (np.abs(g - w) <= atol + rtol * np.abs(w)) | (g == w)
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        raise AssertionError(f"{what}: {(~ok).sum()} of {ok.size} elements differ; first at "
                             f"{bad.tolist()}: got {g[tuple(bad[0])]}, want {w[tuple(bad[0])]}")


def pre_vnni_int_dot(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w.T`` as oneDNN's u8s8 GEMM computes it on a CPU without VNNI.

    int8 data is shifted by +128 to uint8 (the shift is taken back with
    ``128 * sum(w)``); ``vpmaddubsw`` multiplies the uint8 data by the int8
    weights and adds products of adjacent k (``2j, 2j + 1``) into int16 with
    saturation; ``vpmaddwd`` then widens the pair sums to int32 exactly.
    uint8 data is left exact: no MXNet case here shows it saturating.
    """
    if x.dtype != np.int8:
        return x.astype(np.int64) @ w.astype(np.int64).T
    xu = x.astype(np.int64) + 128
    wi = w.astype(np.int64)
    if xu.shape[1] % 2:
        xu = np.pad(xu, ((0, 0), (0, 1)))
        wi = np.pad(wi, ((0, 0), (0, 1)))
    acc = np.zeros((xu.shape[0], wi.shape[0]), dtype=np.int64)
    for j in range(0, xu.shape[1], 2):
        pair = np.outer(xu[:, j], wi[:, j]) + np.outer(xu[:, j + 1], wi[:, j + 1])
        acc += np.clip(pair, -32768, 32767)
    return acc - 128 * w.astype(np.int64).sum(axis=1)[None, :]
