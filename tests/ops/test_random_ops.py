"""Seeding, pass safety and hand-checkable semantics of the random and loss ops.

The wave-2 corpus checks each sampler's distribution (``test_deployment_format_ops.py``);
here: ``mxc.compiler.rng.seed`` makes runs reproducible and independent of the
executor, passes never fold a sampler, and a few kernels are compared with an
independent oracle (Python's ``colorsys`` for the hue rotation, brute-force path
enumeration for CTC).
"""

from __future__ import annotations

import colorsys
import itertools
import os
import sys

import numpy as np
import pytest

from mxc import sym as S
from mxc.compiler import rng
from mxc.compiler.ops.image_random import adjust_hue
from mxc.compiler.ops.loss import ctc_nll
from mxc.compiler.passes import run_graph as run_pipeline

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "passes"))
from _pass_test_utils import graph_of  # noqa: E402


def _two_samplers():
    x = S.var("x")
    return S.Group([S._random_normal_like(x, loc=0.0, scale=1.0, name="a"),
                    S._random_normal_like(x, loc=0.0, scale=1.0, name="b")])


def _draw(graph_sym, feeds):
    return graph_sym.bind(args=feeds).forward()


def test_seed_makes_draws_reproducible_and_streams_distinct():
    feeds = {"x": np.zeros((4, 5), np.float32)}
    g = _two_samplers()
    rng.seed(123)
    first = _draw(g, feeds)
    second = _draw(g, feeds)               # a node run again draws fresh values
    rng.seed(123)
    again = _draw(g, feeds)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], second[0])
    assert not np.array_equal(first[0], first[1])   # two nodes, two streams
    rng.seed(124)
    assert not np.array_equal(first[0], _draw(g, feeds)[0])
    assert rng.current_seed() == 124


def test_seed_rejects_bad_values():
    with pytest.raises(ValueError):
        rng.seed(-1)
    with pytest.raises(ValueError):
        rng.seed(1.5)


def test_draws_do_not_depend_on_execution_order():
    """The streams are keyed by node name: running the samplers in the other order
    (a graph listing them the other way round) gives each node the same values."""
    feeds = {"x": np.zeros((3,), np.float32)}
    x = S.var("x")
    a = S._random_uniform_like(x, name="a")
    b = S._random_uniform_like(x, name="b")
    rng.seed(7)
    ab = _draw(S.Group([a, b]), feeds)
    rng.seed(7)
    ba = _draw(S.Group([b, a]), feeds)
    np.testing.assert_array_equal(ab[0], ba[1])
    np.testing.assert_array_equal(ab[1], ba[0])


def test_fold_constants_keeps_samplers_of_parameters():
    g = graph_of("""  %x = var
  %w = var
  %r = _random_uniform_like(%w)
  %s = _npi_normal(%w) {loc = "0.0", scale = "None", size = "(2,)"}
  %y = elemwise_add(%x, %r)
  %z = elemwise_add(%y, %s)
  return %z""")
    result = run_pipeline(g, "fold-constants", {"w": np.ones(2, np.float32)}, {})
    ops = [n.op for n in result.graph.topo_order() if n.op]
    assert "_random_uniform_like" in ops and "_npi_normal" in ops


def test_hue_rotation_matches_colorsys():
    x = np.random.RandomState(0).uniform(0, 255, (3, 4, 3)).astype(np.float32)
    for shift in (0.1, -0.3, 0.55):
        want = np.array([colorsys.hls_to_rgb((h + shift) % 1.0, l, s)
                         for h, l, s in (colorsys.rgb_to_hls(*(px / 255)) for px in
                                         x.reshape(-1, 3))]) * 255
        np.testing.assert_allclose(adjust_hue(x, shift).reshape(-1, 3), want, atol=1e-3)


def _ctc_brute_force(logp, label, blank):
    """-log of the summed probability of every path that collapses to *label*."""
    steps, classes = logp.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(label):
            total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
    return -np.log(total)


@pytest.mark.parametrize("label,blank", [([1, 2], 0), ([1, 1], 0), ([0], 2), ([], 0)])
def test_ctc_matches_path_enumeration(label, blank):
    z = np.random.RandomState(1).normal(size=(4, 3))
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    assert ctc_nll(logp, label, blank) == pytest.approx(_ctc_brute_force(logp, label, blank),
                                                        rel=1e-9)


def test_ctc_op_pads_labels_by_blank_convention():
    x = S.var("data")
    lab = S.var("label")
    data = np.random.RandomState(2).normal(size=(5, 2, 4)).astype(np.float32)
    logp = data.astype(np.float64) - np.log(np.exp(data.astype(np.float64)).sum(-1, keepdims=True))
    first = S.CTCLoss(x, lab)   # blank 0, label value 0 pads
    got = first.bind(args={"data": data, "label": np.array([[1, 3, 0], [2, 0, 0]], np.float32)}
                     ).forward()[0]
    want = [ctc_nll(logp[:, 0], [1, 3], 0), ctc_nll(logp[:, 1], [2], 0)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    last = S.CTCLoss(x, lab, blank_label="last")   # blank 3, -1 pads
    got = last.bind(args={"data": data, "label": np.array([[0, 2, -1], [1, -1, -1]], np.float32)}
                    ).forward()[0]
    want = [ctc_nll(logp[:, 0], [0, 2], 3), ctc_nll(logp[:, 1], [1], 3)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_compiled_model_and_artifact_draw_what_the_reference_draws(tmp_path):
    """Samplers are host nodes of a compiled model; same seed, same values."""
    pytest.importorskip("tvm")
    import mxc
    import mxc.runtime
    x = S.var("x")
    y = S.exp(S._random_normal_like(x, name="noise") + x)
    feeds = {"x": np.full((2, 3), 0.5, np.float32)}
    rng.seed(5)
    want = y.bind(args=feeds).forward()[0]
    model = mxc.compile(y, {}, shapes={"x": (2, 3)})
    rng.seed(5)
    np.testing.assert_allclose(model.run(feeds)[0], want, rtol=1e-5)
    session = mxc.runtime.load(model.save(str(tmp_path / "noise.mxc")))
    rng.seed(5)
    np.testing.assert_allclose(session.run(feeds)[0], want, rtol=1e-5)
