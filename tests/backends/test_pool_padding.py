"""Pooling that reads its padding in place (``schedules/pool_padding.py``).

The explicit ``-inf``/zero pad before a pooling (MXNet's window rules) is folded
into the pooling kernel.  Checked: no pad kernel is left, the outputs are
bit-identical to the same model compiled without the pass, and they match the
numpy reference -- with ``-inf`` reaching the windows at the border, where a
finite pad value would show.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402

import mxc  # noqa: E402
from mxc import sym as S  # noqa: E402
from mxc.backends.reference import run_graph  # noqa: E402
from mxc.backends.tvm.build import build_module  # noqa: E402
from mxc.backends.tvm.converter import lower_graph  # noqa: E402
from mxc.backends.tvm.schedules import pipeline  # noqa: E402

#: name -> Pooling attributes (3x3 windows over a padded 14x14 map)
POOLS = {
    "max-stride2": dict(pool_type="max", stride=(2, 2), pad=(1, 1)),
    "max-stride1": dict(pool_type="max", stride=(1, 1), pad=(1, 1)),
    "avg-include-pad": dict(pool_type="avg", stride=(1, 1), pad=(1, 1)),
    "avg-exclude-pad": dict(pool_type="avg", stride=(2, 2), pad=(1, 1), count_include_pad=False),
}


def _model(pool: str):
    """1x1 convolution (so the pooling is channels-last) -> log (0 -> -inf) -> pooling."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(1, 1), num_filter=16, no_bias=True, name="c")
    y = S.log(y, name="log")
    y = S.Pooling(y, kernel=(3, 3), name="pool", **POOLS[pool])
    rng = np.random.RandomState(0)
    params = {"c_weight": rng.uniform(0.5, 1.5, (16, 8, 1, 1)).astype(np.float32)}
    data = rng.uniform(0, 1, (1, 8, 14, 14)).astype(np.float32)
    data[0, :, :2, :2] = 0.0          # -inf after log: the corner window's every real cell
    data[0, :, 5:8, 0] = 0.0          # and some of the left border's
    return y, params, data


def _kernels(sym, params, shapes) -> dict:
    stats: dict = {}
    build_module(lower_graph(sym.graph, shapes=shapes, params=params), "llvm", stats=stats)
    return stats


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_pad_is_read_in_place_and_outputs_are_unchanged(pool, monkeypatch):
    y, params, data = _model(pool)
    shapes = {"data": data.shape}
    kernels = _kernels(y, params, shapes)
    assert not any(k.startswith("pad") for k in kernels), kernels
    kind = pool.split("-")[0]
    (pooling,) = [k for k in kernels if f"{kind}_pool2d_padded" in k]   # maybe fused
    assert kernels[pooling] == "reduction", kernels
    folded = mxc.compile(y, params, shapes).run({"data": data})[0]
    want = run_graph(y.graph, {**params, "data": data})[0]
    # (a max window whose cells are all -inf gives the reduction's identity, the lowest
    # float, with or without the pass: compared bit for bit with the plain build below)
    finite = np.isfinite(want)
    np.testing.assert_allclose(folded[finite], want[finite], rtol=1e-6, atol=0)
    assert not finite.all()               # the border case reached the output

    monkeypatch.setattr(pipeline, "pool_padding_in_place", tvm.transform.module_pass(
        lambda mod, _ctx: mod, opt_level=0, name="Unchanged"))
    assert any(k.startswith("pad") for k in _kernels(y, params, shapes))
    plain = mxc.compile(y, params, shapes).run({"data": data})[0]
    np.testing.assert_array_equal(folded, plain)


def test_a_pad_with_other_uses_is_kept():
    """A pad whose result something else also reads stays a kernel of its own."""
    x = S.var("data")
    y = S.Convolution(x, kernel=(1, 1), num_filter=16, no_bias=True, name="c")
    p = S.Pad(y, mode="constant", constant_value=float("-inf"),
              pad_width=(0, 0, 0, 0, 1, 1, 1, 1), name="pad")
    pooled = S.Pooling(p, kernel=(3, 3), stride=(1, 1), pool_type="max", name="pool")
    g = S.Group([pooled, S.relu(p, name="also")])
    rng = np.random.RandomState(1)
    params = {"c_weight": rng.randn(16, 8, 1, 1).astype(np.float32)}
    data = rng.randn(1, 8, 10, 10).astype(np.float32)
    kernels = _kernels(g, params, {"data": data.shape})
    assert not any("pool2d_padded" in k for k in kernels), kernels
    got = mxc.compile(g, params, {"data": data.shape}).run({"data": data})
    for a, b in zip(got, run_graph(g.graph, {**params, "data": data})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
