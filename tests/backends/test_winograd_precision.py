"""The Winograd precision rule (``schedules/base/winograd_precision.py``): its decisions, and
compiled convolutions against a float64 oracle.

F(4, 3) is kept only while a model's summed per-layer error estimate stays within
``ERROR_BUDGET``; F(2, 3) (never less precise than the direct convolution, measured
here again on the compiled kernels) takes the rest.  The deep-network check runs
a stack of 3x3 convolutions with large activations (inputs around 1e3) and
asserts the compiled output's relative error against float64 stays within the
rule's own estimate.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc.backends.tvm.schedules.base.winograd_precision import (ERROR_BUDGET, layer_error,
                                                           precise_tile)

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa


def _plan(speed_tiles, channels):
    """The rule over a model: (tiles chosen, the summed estimate after each layer)."""
    spent, chosen, sums = 0.0, [], []
    for m, c in zip(speed_tiles, channels):
        t = precise_tile(m, c, spent)
        spent += layer_error(t, c)
        chosen.append(t)
        sums.append(spent)
    return chosen, sums


def test_a_single_layer_keeps_f4():
    assert precise_tile(4, 16, 0.0) == 4
    assert precise_tile(4, 512, 0.0) == 4      # 3.3e-6 < 1e-5
    assert precise_tile(2, 512, 0.0) == 2      # the speed rule's F(2, 3) is never changed


def test_f4_only_while_the_budget_lasts():
    """128 channels: 1.64e-6 per F(4, 3) layer, so six fit in 1e-5, then F(2, 3)."""
    chosen, sums = _plan([4] * 12, [128] * 12)
    assert chosen == [4] * 6 + [2] * 6
    for t, s in zip(chosen, sums):
        if t == 4:
            assert s <= ERROR_BUDGET


def test_a_cheaper_layer_can_still_take_f4_after_a_refusal():
    """The budget is spent in program order; a layer whose F(4, 3) estimate still fits
    keeps it: three 256-channel F(4, 3) layers spend 7.0e-6, a 512-channel one (3.3e-6)
    does not fit and takes F(2, 3) (7.5e-7), a 16-channel one (5.8e-7) still fits."""
    chosen, sums = _plan([4] * 5, [256, 256, 256, 512, 16])
    assert chosen == [4, 4, 4, 2, 4]
    assert sums[-1] <= ERROR_BUDGET


def test_f2_is_never_worse_than_direct_in_the_estimates():
    for c in (16, 64, 256, 1024):
        assert layer_error(2, c) <= layer_error(0, c) < layer_error(4, c)


# ---------------------------------------------------------------------------
# compiled against float64
# ---------------------------------------------------------------------------

def _conv_float64(x, w):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y


def _rel_errors(got, want):
    e = got.astype(np.float64) - want
    return np.sqrt((e ** 2).mean() / (want ** 2).mean()), np.abs(e).max() / np.abs(want).max()


def _stack(layers: int, channels: int, seed: int = 0):
    """``layers`` 3x3 convolutions + relu, He-scaled weights (activations keep their scale)."""
    from mxc import sym as S
    rng = np.random.RandomState(seed)
    y, params, ws = S.var("data"), {}, []
    for i in range(layers):
        w = (rng.randn(channels, channels, 3, 3) * np.sqrt(2 / (9 * channels))).astype(np.float32)
        params[f"c{i}_weight"] = w
        ws.append(w.astype(np.float64))
        y = S.relu(S.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=channels,
                                 no_bias=True, name=f"c{i}"))
    return y, params, ws


def test_f2_compiled_is_no_less_precise_than_direct():
    pytest.importorskip("tvm")
    import mxc
    from mxc.backends.tvm.schedules.base import winograd_transforms as winograd
    y, params, ws = _stack(1, 64)
    x = np.maximum(np.random.RandomState(1).randn(1, 64, 28, 28), 0).astype(np.float32)
    want = np.maximum(_conv_float64(x.astype(np.float64), ws[0]), 0)
    errs = {}
    for mode in ("off", "on"):
        saved = winograd.F4_MIN_TILES
        winograd.F4_MIN_TILES = 10 ** 12          # "on" takes F(2, 3) everywhere
        try:
            model = mxc.compile(y, params, {"data": x.shape}, winograd=mode)
        finally:
            winograd.F4_MIN_TILES = saved
        assert (model.manifest["winograd"]["convolutions"] == 1) == (mode == "on")
        errs[mode] = _rel_errors(model.run({"data": x})[0], want)
    assert errs["on"][0] <= errs["off"][0]


def test_deep_stack_with_large_activations_stays_within_the_estimate():
    """Eight 128-channel layers over 2x16x16 (32 tiles: the speed rule takes F(4, 3)
    everywhere); the rule keeps six.  Inputs around 1e3 (the error is relative: the
    same bound holds at any scale)."""
    pytest.importorskip("tvm")
    import mxc
    layers, channels = 8, 128
    y, params, ws = _stack(layers, channels)
    rng = np.random.RandomState(2)
    x = (1e3 * np.maximum(rng.randn(2, channels, 16, 16), 0)).astype(np.float32)
    want = x.astype(np.float64)
    for w in ws:
        want = np.maximum(_conv_float64(want, w), 0)
    model = mxc.compile(y, params, {"data": x.shape})          # --winograd auto
    assert model.manifest["winograd"]["convolutions"] == layers
    chosen, sums = _plan([4] * layers, [channels] * layers)
    assert chosen == [4] * 6 + [2] * 2
    rms, worst = _rel_errors(model.run({"data": x})[0], want)
    assert rms <= sums[-1], (rms, sums[-1])
    assert worst <= 10 * sums[-1], (worst, sums[-1])
