"""NaN-passing selects in one comparison (``schedules/nan_select.py``).

``where(x > c or isnan(x), x, c)`` (mxc's relu, maximum/minimum against a
constant) becomes ``where(x <= c, c, x)`` after the layout pass.  Checked on AVX2
and AVX-512 code: the kernels no longer test ``isnan``, the outputs are bit for bit
those of the build without the pass, and they match the numpy reference on NaN,
+-0, +-inf and values equal to the constant.
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
from conftest import ISA_TARGETS, isa_target  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

TARGETS = ISA_TARGETS
#: values around each constant below, and the ones a comparison treats specially
SPECIAL = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.0, 6.0, 5.9, -1.0, 3.0, 0.25]


_target = isa_target


def _model():
    """A 1x1 convolution copying input channel 0 everywhere (so the selects are its
    epilogue, on one vector of 16 channels), then relu; beside it relu and
    maximum/minimum against constants on a plain input."""
    x = S.var("data")
    conv = S.Convolution(x, kernel=(1, 1), num_filter=16, no_bias=True, name="c")
    b = S.var("b")
    heads = [S.Activation(conv, act_type="relu", name="act"), S.relu(b, name="relu"),
             S._maximum_scalar(b, scalar=6.0, name="max6"),
             S._minimum_scalar(b, scalar=-1.0, name="min"),
             S._maximum_scalar(b, scalar=float("nan"), name="max_nan")]
    w = np.zeros((16, 8, 1, 1), np.float32)
    w[:, 0] = 1.0
    data = np.zeros((1, 8, 3, 4), np.float32)
    data[0, 0] = np.array(SPECIAL, np.float32).reshape(3, 4)
    feeds = {"data": data, "b": np.tile(np.array(SPECIAL, np.float32), (2, 1))}
    return S.Group(heads), {"c_weight": w}, feeds


def _kernels(sym, params, feeds, target) -> dict:
    stats: dict = {}
    shapes = {k: v.shape for k, v in feeds.items()}
    build_module(lower_graph(sym.graph, shapes=shapes, params=params), target, stats=stats)
    return stats


@pytest.mark.parametrize("isa", sorted(TARGETS))
def test_one_comparison_same_values(isa, monkeypatch):
    target = _target(isa)
    sym, params, feeds = _model()
    shapes = {k: v.shape for k, v in feeds.items()}
    kernels = _kernels(sym, params, feeds, target)
    assert any("conv2d" in k and "less_equal" in k for k in kernels), kernels
    assert not any("conv2d" in k and "isnan" in k for k in kernels), kernels
    got = mxc.compile(sym, params, shapes, target=target).run(feeds)
    for g, w in zip(got, run_graph(sym.graph, {**params, **feeds})):
        np.testing.assert_array_equal(g, w)                 # NaN positions included
        assert np.array_equal(np.signbit(g), np.signbit(w))  # -0 became +0 alike

    monkeypatch.setattr(pipeline, "nan_select_one_compare", tvm.transform.module_pass(
        lambda mod, _ctx: mod, opt_level=0, name="Unchanged"))
    assert any("conv2d" in k and "isnan" in k for k in _kernels(sym, params, feeds, target))
    plain = mxc.compile(sym, params, shapes, target=target).run(feeds)
    for g, p in zip(got, plain):
        assert g.tobytes() == p.tobytes()


def test_a_nan_constant_keeps_the_isnan_form():
    """where(x > nan or isnan(x), x, nan) is nan for every x not NaN; the one-comparison
    form would return x: the pass must leave it."""
    from tvm import relax

    from mxc.backends.tvm.schedules.nan_select import nan_select_one_compare
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    nan = relax.const(float("nan"), "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            keep = bb.emit(relax.op.logical_or(relax.op.greater(x, nan), relax.op.isnan(x)))
            y = bb.emit_output(relax.op.where(keep, x, nan))
        bb.emit_func_output(y)
    mod = bb.get()
    assert nan_select_one_compare(mod).same_as(mod)
