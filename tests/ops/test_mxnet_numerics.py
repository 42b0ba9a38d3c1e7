"""MXNet's exact numerics where mxc differed (issue 26, item 4), on both backends.

Each expectation is computed here by hand from MXNet 1.9.1's kernels (the
comments cite the rule), independently of mxc's definitions:

* InstanceNorm: statistics as exact as MXNet's compensated two-pass reduction,
  checked against a float64 oracle on 5,120-element instances;
* ``_contrib_quantized_batch_norm``: the oneDNN kernel folds the gamma it is
  given, ``fix_gamma`` (True by default) has no effect;
* ``_contrib_bipartite_matching``: a score must be strictly beyond the threshold,
  and ``topk`` lets ``topk + 1`` pairs through (MXNet counts before it tests);
* ``_npi_norm`` matrix norms: the axis order is the matrix's row/column order,
  non-spectral orders are row/column-sum extrema for every ``ord``.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym as S
from mxc.backends.reference import run_graph


def _instance_norm_oracle(x, gamma, beta, eps):
    xd = x.astype(np.float64).reshape(x.shape[0], x.shape[1], -1)
    mean = xd.mean(axis=2, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=2, keepdims=True)
    y = (xd - mean) / np.sqrt(var + eps)
    return (y * gamma[:, None] + beta[:, None]).reshape(x.shape)


def _instance_norm_case():
    """MXNet's own test draws uniform [0, 1) data (mean 0.5: the one-pass
    ``E[x^2] - E[x]^2`` cancels) over 80x64 = 5,120 elements per instance."""
    rng = np.random.RandomState(26)
    x = rng.uniform(size=(2, 4, 80, 64)).astype(np.float32)
    gamma = rng.uniform(size=4).astype(np.float32)
    beta = rng.uniform(size=4).astype(np.float32)
    sym = S.InstanceNorm(S.var("data"), S.var("gamma"), S.var("beta"), eps=1e-5, name="op")
    return sym, x, gamma, beta


def _assert_float32_exact(got, want):
    """Within a few float32 roundings of the float64 result (MXNet's accuracy; 1e-5,
    the bound MXNet's test allows, is 40x this)."""
    err = np.abs(got.astype(np.float64) - want)
    bound = 4 * np.finfo(np.float32).eps * np.maximum(1.0, np.abs(want))
    assert (err <= bound).all(), f"max error {err.max():.3g} (bound {bound.max():.3g})"


def test_instance_norm_reference_matches_float64():
    sym, x, gamma, beta = _instance_norm_case()
    got = run_graph(sym.graph, {"data": x, "gamma": gamma, "beta": beta})[0]
    _assert_float32_exact(got, _instance_norm_oracle(x, gamma, beta, 1e-5))


def test_instance_norm_compiled_matches_float64():
    pytest.importorskip("tvm")
    import mxc
    sym, x, gamma, beta = _instance_norm_case()
    model = mxc.compile(sym, {"gamma": gamma, "beta": beta}, shapes={"data": x.shape})
    got = model.run({"data": x})[0]
    _assert_float32_exact(got, _instance_norm_oracle(x, gamma, beta, 1e-5))


# ---------------------------------------------------------------------------
# _contrib_quantized_batch_norm
# ---------------------------------------------------------------------------

def _quantized_bn():
    """int8 codes in [-1, 1] (scale 1/127) into the calibrated range [-4, 4]."""
    sym = S._contrib_quantized_batch_norm(
        S.var("data"), S.var("gamma"), S.var("beta"), S.var("mean"), S.var("var"),
        S.var("lo"), S.var("hi"), min_calib_range=-4.0, max_calib_range=4.0, eps=1e-3,
        name="op")   # fix_gamma left at MXNet's default, True
    feeds = {"data": np.array([[-100, -37, 0, 11, 100], [90, -90, 45, -3, 7]],
                              np.int8).reshape(2, 1, 5),
             "gamma": np.array([2.0], np.float32), "beta": np.array([0.5], np.float32),
             "mean": np.array([0.25], np.float32), "var": np.array([0.75], np.float32),
             "lo": np.array([-1.0], np.float32), "hi": np.array([1.0], np.float32)}
    return sym, feeds


def _quantized_bn_expected(f, eps=1e-3):
    """mkldnn_quantized_batch_norm.cc: per channel w = gamma*invstd*R_in/R_out,
    b = (beta - mean*gamma*invstd)*127.5/R_out with the GIVEN gamma, then oneDNN's
    inference batch norm with mean 0 / var 1: y = x/sqrt(1 + eps)*w + b, rounded to
    nearest and saturated to int8."""
    invstd = 1 / np.sqrt(0.75 + eps)
    w = 2.0 * invstd * 1.0 / 4.0
    b = (0.5 - 0.25 * 2.0 * invstd) * 127.5 / 4.0
    y = f["data"].astype(np.float64) / np.sqrt(1 + eps) * w + b
    return np.clip(np.rint(y), -128, 127).astype(np.int8)


def _check_quantized_bn(outs, feeds):
    want = _quantized_bn_expected(feeds)
    assert outs[0].dtype == np.int8
    np.testing.assert_array_equal(outs[0], want)
    assert float(outs[1].reshape(-1)[0]) == -4.0 and float(outs[2].reshape(-1)[0]) == 4.0


def test_quantized_batch_norm_uses_gamma_under_fix_gamma():
    sym, feeds = _quantized_bn()
    _check_quantized_bn(run_graph(sym.graph, feeds), feeds)


def test_quantized_batch_norm_compiled_uses_gamma_under_fix_gamma():
    pytest.importorskip("tvm")
    import mxc
    sym, feeds = _quantized_bn()
    params = {k: v for k, v in feeds.items() if k != "data"}
    model = mxc.compile(sym, params, shapes={"data": feeds["data"].shape},
                        dtypes={"data": "int8"})
    _check_quantized_bn(model.run({"data": feeds["data"]}), feeds)


# ---------------------------------------------------------------------------
# _contrib_bipartite_matching
# ---------------------------------------------------------------------------

def _match(scores, **attrs):
    sym = S._contrib_bipartite_matching(S.var("data"), name="op", **attrs)
    rows, cols = run_graph(sym.graph, {"data": np.asarray(scores, np.float32)})
    return rows.tolist(), cols.tolist()


def test_bipartite_matching_topk_keeps_one_more_pair():
    """bounding_box-inl.h: ``++count; if (topk > 0 && count > topk) break;`` after the
    pair is recorded: topk=1 matches (0, 0) and then (1, 1)."""
    scores = [[0.9, 0.8], [0.7, 0.1]]
    assert _match(scores, threshold=0.05, topk=1) == ([0, 1], [0, 1])
    assert _match(scores, threshold=0.05, topk=2) == ([0, 1], [0, 1])
    assert _match([[0.9, 0.8, 0.6], [0.7, 0.5, 0.2], [0.4, 0.3, 0.1]], threshold=0.05,
                  topk=1) == ([0, 1, -1], [0, 1, -1])


def test_bipartite_matching_threshold_is_strict():
    """``score > threshold`` (``score < threshold`` ascending): a score equal to the
    threshold ends the matching."""
    assert _match([[0.5, 0.25]], threshold=0.5) == ([-1], [-1, -1])
    assert _match([[0.5, 0.75]], threshold=0.5, is_ascend=True) == ([-1], [-1, -1])
    assert _match([[0.75, 0.5]], threshold=0.5) == ([0], [0, -1])


# ---------------------------------------------------------------------------
# _npi_norm matrix norms
# ---------------------------------------------------------------------------

MATRIX = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)   # row sums 6, 15; column sums 5, 7, 9


def _norm(x, **attrs):
    sym = S._npi_norm(S.var("x"), name="op", **attrs)
    return run_graph(sym.graph, {"x": x})[0]


@pytest.mark.parametrize("ord_, axis, want", [
    (1.0, (0, 1), 9.0),          # max column sum (numpy's too)
    (1.0, (1, 0), 15.0),         # the transposed matrix: max row sum
    (-1.0, (1, 0), 6.0),         # min row sum
    (float("inf"), (0, 1), 15.0),   # max row sum
    (float("inf"), (1, 0), 9.0),    # max column sum
    (3.0, (0, 1), 15.0),         # numpy refuses; MXNet: max row sum
    (0.0, (0, 1), 6.0),          # numpy refuses; MXNet: min row sum
    (-3.0, (-1, -2), 5.0),       # min over the transposed matrix's row sums = column sums
])
def test_matrix_norm_row_and_column_sums(ord_, axis, want):
    assert float(_norm(MATRIX, ord=ord_, axis=axis, flag=-1)) == want


def test_matrix_norm_spectral_and_nuclear_over_given_axes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5
    sv = np.linalg.svd(np.transpose(x.astype(np.float64), (1, 2, 0)), compute_uv=False)
    np.testing.assert_allclose(_norm(x, ord=2.0, axis=(2, 0), flag=0), sv.max(-1), rtol=1e-6)
    np.testing.assert_allclose(_norm(x, ord=-2.0, axis=(0, 2), flag=0), sv.min(-1), rtol=1e-5)
    np.testing.assert_allclose(_norm(x, ord=2.0, axis=(2, 0), flag=2), sv.sum(-1), rtol=1e-6)
    got = _norm(x, ord=1.0, axis=(2, 0), flag=-1, keepdims=True)
    assert got.shape == (1, 3, 1)
    np.testing.assert_array_equal(got.reshape(3), np.abs(x).sum(axis=2).max(axis=0))
