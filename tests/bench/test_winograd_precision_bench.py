"""Smoke run of ``bench/winograd_precision.py``: its float64 oracle against the reference
backend, its variants' settings restored, and one small layer per variant within the
rule's per-layer estimates (no timing)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import winograd_precision as bench  # noqa: E402


def test_float64_oracle_matches_the_reference_convolution():
    from mxc import sym as S
    from mxc.backends.reference import run_graph
    rng = np.random.RandomState(0)
    x = rng.randn(1, 4, 5, 6).astype(np.float32)
    w = rng.randn(3, 4, 3, 3).astype(np.float32)
    y = S.Convolution(S.var("data"), S.var("w"), kernel=(3, 3), pad=(1, 1), num_filter=3,
                      no_bias=True)
    want = run_graph(y.graph, {"data": x, "w": w})[0]
    np.testing.assert_allclose(bench.conv3x3_float64(x, w), want, rtol=1e-5, atol=1e-5)


def test_variants_restore_the_module_settings():
    from mxc.backends.tvm.schedules.base import winograd_precision
    from mxc.backends.tvm.schedules.base import winograd_transforms as winograd
    before = winograd.F4_MIN_TILES, winograd_precision.ERROR_BUDGET
    for name in bench.VARIANTS:
        with bench.variant(name) as mode:
            assert mode in ("auto", "on", "off")
    assert (winograd.F4_MIN_TILES, winograd_precision.ERROR_BUDGET) == before


def test_small_layer_per_variant_within_the_estimates():
    pytest.importorskip("tvm")
    from mxc.backends.tvm.schedules.base.winograd_precision import layer_error
    for name, tile in (("direct", 0), ("F(2,3)", 2), ("F(4,3)", 4)):
        r = bench.layer(16, 16, name)
        assert r["rel_rms"] <= 2 * layer_error(tile, 16), (name, r)
