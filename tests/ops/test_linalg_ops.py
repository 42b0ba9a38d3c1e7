"""Linalg conventions beyond the corpus cases, against hand-computed values and invariants."""

from __future__ import annotations

import numpy as np

from mxc import sym as S


def _run(op, data, **attrs):
    a = S.var("A")
    return getattr(S, op)(a, **attrs).bind(args={"A": np.asarray(data)}).forward()


def test_triangle_packing_follows_mxnet():
    """MXNet's documented examples; an upper triangle is packed column by column."""
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert _run("_linalg_extracttrian", a)[0].tolist() == [1, 3, 4]
    assert _run("_linalg_extracttrian", a, lower=False)[0].tolist() == [1, 2, 4]
    assert _run("_linalg_extracttrian", a, offset=1)[0].tolist() == [2]
    assert _run("_linalg_extracttrian", a, offset=-1)[0].tolist() == [3]
    m = np.arange(9, dtype=np.float32).reshape(3, 3)
    packed = _run("_linalg_extracttrian", m, lower=False)[0]
    assert packed.tolist() == [0, 1, 4, 2, 5, 8]
    back = _run("_linalg_maketrian", packed, lower=False)[0]
    np.testing.assert_array_equal(back, np.triu(m))
    v = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(_run("_linalg_maketrian", v, offset=1)[0],
                                  [[0, 1, 2], [0, 0, 3], [0, 0, 0]])


def test_syevd_rows_and_signs_and_gelqf_factors():
    rs = np.random.RandomState(3)
    b = rs.normal(size=(2, 4, 4))
    spd = b @ np.swapaxes(b, -1, -2) + 4 * np.eye(4)
    u, lam = _run("_linalg_syevd", spd)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ (lam[..., None] * u), spd, atol=1e-9)
    assert (np.diff(lam, axis=-1) >= 0).all()
    biggest = np.take_along_axis(u, np.argmax(np.abs(u), -1)[..., None], -1)
    assert (biggest > 0).all()
    wide = rs.normal(size=(3, 5))
    q, low = _run("_linalg_gelqf", wide)
    np.testing.assert_allclose(low @ q, wide, atol=1e-12)
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-12)
    assert np.allclose(np.triu(low, 1), 0)


def test_det_and_slogdet_of_a_batch():
    rs = np.random.RandomState(4)
    a = rs.normal(size=(3, 4, 4)).astype(np.float64)
    det = _run("_linalg_det", a)[0]
    sign, logdet = _run("_linalg_slogdet", a)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=1e-10)
    np.testing.assert_allclose(sign * np.exp(logdet), np.linalg.det(a), rtol=1e-10)
