"""Issue 14 failure 8: compiled ``gather_nd`` wrapped out-of-range indices where MXNet (and
the reference backend) raise."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
from mxc import sym as S
from mxc.errors import ExecutionError


@pytest.fixture(scope="module")
def compiled():
    y = S.gather_nd(S.var("data"), S.var("indices"), name="g")
    return y, mxc.compile(y, {}, {"data": (2, 3), "indices": (2, 2)},
                          dtypes={"indices": "int32"})


def test_in_range_indices_match_the_reference(compiled):
    y, model = compiled
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.array([[-1, 0], [-3, 2]], np.int32)  # negatives wrap once, as MXNet
    out = model.run({"data": x, "indices": idx})[0]
    np.testing.assert_array_equal(out, [x[1, 0], x[0, 2]])
    ref = y.bind(args={"data": x, "indices": idx}).forward()[0]
    np.testing.assert_array_equal(out, ref)


def test_out_of_range_indices_raise_like_the_reference(compiled):
    y, model = compiled
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    idx = np.array([[5, 0], [0, 1]], np.int32)  # 5 is outside [-2, 2) for dimension 0
    with pytest.raises(ExecutionError, match="out of bounds"):
        y.bind(args={"data": x, "indices": idx}).forward()
    with pytest.raises(ExecutionError, match="out of bounds"):
        model.run({"data": x, "indices": idx})
    assert "g" in model.host_nodes  # why: compiled code cannot check indices at run time
