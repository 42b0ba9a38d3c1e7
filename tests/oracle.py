"""The corpus comparison rule, shared by every test that checks outputs against MXNet.

A result matches when shapes and dtypes are equal, NaN positions agree and
``|got - want| <= atol + rtol * |want|`` elementwise (the corpus README's rule);
integer outputs must be equal, or within ``atol`` codes when a case allows it
(quantized ops may differ by one rounding step).
"""

from __future__ import annotations

import numpy as np


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
