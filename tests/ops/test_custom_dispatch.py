"""MXNet's ``Custom`` node routes ``op_type`` to the custom op registered under that name."""

from __future__ import annotations

import numpy as np
import pytest

import mxc
from mxc import sym as S
from mxc.compiler.custom_op import unregister_custom_op
from mxc.errors import UnsupportedOpError


@pytest.fixture
def scaled_abs():
    mxc.register_custom_op(
        "test_scaled_abs", override=True,
        parse_attrs=lambda attrs: (1, 1),
        input_names=lambda attrs, n: ["data"],
        infer_shape=lambda attrs, s: (s, [s[0]]),
        forward=lambda attrs, xs, outs: [np.float32(attrs.get("k", "1")) * np.abs(xs[0])])
    yield "test_scaled_abs"
    unregister_custom_op("test_scaled_abs")


def test_custom_runs_the_registered_op_with_its_string_attributes(scaled_abs):
    y = S.Custom(S.var("x"), op_type=scaled_abs, k="3")
    assert y.list_arguments() == ["x"] and y.infer_shape(x=(2, 2))[1] == [(2, 2)]
    x = np.array([[-1, 2], [-3, 0]], np.float32)
    np.testing.assert_array_equal(np.asarray(y.bind(args={"x": x}).forward()[0]),
                                  [[3, 6], [9, 0]])


def test_custom_with_an_unregistered_op_type_says_how_to_register_it():
    with pytest.raises(UnsupportedOpError, match="not_registered_here.*register_custom_op"):
        S.Custom(S.var("x"), op_type="not_registered_here").infer_shape(x=(2,))


def test_custom_keeps_one_state_per_node_for_stateful_ops():
    class Counter:
        def __init__(self):
            self.calls = 0

        def forward(self, inputs, outputs):
            self.calls += 1
            return [inputs[0] + np.float32(self.calls)]

    mxc.register_custom_op(
        "test_counter", override=True, parse_attrs=lambda attrs: (1, 1),
        infer_shape=lambda attrs, s: (s, [s[0]]), create_op_state=lambda attrs: Counter())
    try:
        exe = S.Custom(S.var("x"), op_type="test_counter").bind(
            args={"x": np.zeros(2, np.float32)})
        assert np.asarray(exe.forward()[0]).tolist() == [1, 1]
        assert np.asarray(exe.forward()[0]).tolist() == [2, 2]
    finally:
        unregister_custom_op("test_counter")
