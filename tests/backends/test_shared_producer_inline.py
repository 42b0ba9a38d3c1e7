"""A producer read in many places of a kernel is computed once, not inlined into each.

SSD's per-class decoder (gluoncv ``ssd_512_resnet50_v1_voc``) builds its output
from 20 concatenations, one per class, each reading the same box decoding --
which itself reads six feature levels transposed, flattened and concatenated --
and concatenates those 20 again.  All of it is one injective kernel.  Inlining
the decoding into its 20 readers copied that whole expression 20 times: the
scheduling time grew with the square of the classes (minutes for the real
model) and the boxes were decoded, ``exp`` and all, once per class at run
time.  The invariant checked here is structural -- the kernels' ``exp`` calls
are as many with 8 classes as with one, not that many per class -- plus the
numbers against the reference; not a time.
"""

from __future__ import annotations

import numpy as np
import tvm
import tvm_ffi

import mxc
from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.backends.tvm.schedules.base.module_utils import MAX_INLINED_READS
from test_pyramid_pooling_compile import _scheduled_kernels

#: feature levels as (channels = 4 x anchors, side)
LEVELS = ((16, 8), (24, 4), (16, 2))
CLASSES = MAX_INLINED_READS + 4


def _per_class_decoder(classes: int = CLASSES):
    """SSD's tail: six -> three levels of box offsets transposed, flattened and
    concatenated, decoded once, and concatenated with each class's id and score."""
    xs = [S.var(f"x{i}") for i in range(len(LEVELS))]
    flat = [S.Flatten(S.transpose(x, axes=(0, 2, 3, 1))) for x in xs]
    loc = S.Reshape(S.concat(*flat, dim=1), shape=(0, -1, 4))
    n = sum(c * s * s for c, s in LEVELS) // 4
    ids, scores, anchors = S.var("ids"), S.var("scores"), S.var("anchors")
    boxes = S._contrib_box_decode(loc, anchors, format="center", name="dec")
    parts = [S.concat(S.slice_axis(ids, axis=-1, begin=c, end=c + 1),
                      S.slice_axis(scores, axis=-1, begin=c, end=c + 1), boxes, dim=-1,
                      name=f"class{c}") for c in range(classes)]
    shapes = {"ids": (1, n, classes), "scores": (1, n, classes), "anchors": (1, n, 4),
              **{f"x{i}": (1, c, s, s) for i, (c, s) in enumerate(LEVELS)}}
    return S.concat(*parts, dim=1, name="all"), shapes


def _exp_calls(func) -> int:
    calls: list = []
    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, calls.append)])
    return sum(1 for c in calls if getattr(c.op, "name", "").endswith(".exp"))


def _total_exps(classes: int) -> int:
    sym, shapes = _per_class_decoder(classes)
    kernels, _ = _scheduled_kernels(sym, shapes, "llvm")
    return sum(_exp_calls(f) for f in kernels.values())


def test_a_producer_with_many_readers_is_computed_once():
    # one class: the decoding's own exp calls; more classes must not copy them
    once = _total_exps(1)
    assert once > 0
    assert _total_exps(CLASSES) == once


def test_the_per_class_decoder_matches_the_reference():
    sym, shapes = _per_class_decoder()
    rng = np.random.default_rng(0)
    feeds = {k: (rng.standard_normal(v) * 0.5).astype(np.float32) for k, v in shapes.items()}
    got = mxc.compile(sym, {}, shapes).run(feeds)
    want = run_graph(sym.graph, feeds)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-5, atol=1e-5)
