"""A data-dependent output shape (``_contrib_boolean_mask``): inferred as unknown,
computed exactly, and marked in the compiled artifact's manifest."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from mxc import sym as S


def _filter():
    x, score = S.var("x"), S.var("score")
    return S.Group([S._contrib_boolean_mask(x, score > 0), S.sum(score > 0)])


def test_the_kept_extent_is_unknown_to_inference():
    _, outs, _ = _filter().infer_shape_partial(x=(5, 3), score=(5,))
    assert outs == [(None, 3), (1,)]
    assert _filter().infer_shape(x=(5, 3), score=(5,)) == (None, None, None)


def test_compiled_filter_runs_as_host_step_and_manifest_marks_the_output(tmp_path):
    pytest.importorskip("tvm")
    import mxc.runtime
    model = mxc.compile(_filter(), {}, shapes={"x": (5, 3), "score": (5,)})
    assert [o["data_dependent_shape"] for o in model.manifest["outputs"]] == [True, False]
    assert model.manifest["outputs"][0]["shape"] == [None, 3]
    sess = mxc.runtime.load(model.save(tmp_path / "filter.mxc"))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for score, rows in (([1, -1, 2, 0, 3], [0, 2, 4]), ([-1] * 5, [])):
        kept, count = sess.run({"x": x, "score": np.array(score, np.float32)})
        np.testing.assert_array_equal(kept, x[rows].reshape(len(rows), 3))
        assert count.tolist() == [len(rows)]
