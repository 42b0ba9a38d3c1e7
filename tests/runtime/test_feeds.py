"""Feeds checked once (issue 36): ``Session.check_feeds`` returns ``CheckedFeeds`` that
``run``/``submit`` take without a second check, and the batch arithmetic of
:mod:`mxc.runtime.batching`.

Oracles: outputs are compared with the MXNet graph run by mxc's reference executor
(``mlp_reference``) and with ``run`` on a plain dict; checks are counted with a spy
on the one check (``FeedSignature.check_values``); the batch arithmetic is compared with numpy slicing
written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime as rt
from mxc.errors import ExecutionError
from mxc.runtime import batching
from mxc.runtime.feeds import CheckedFeeds, Declared, FeedError, FeedSignature, InputSpec
from runtime_helpers import compiled_mlp, mlp_input, mlp_reference


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return rt.load(compiled_mlp(tmp_path_factory)[1])


@pytest.fixture
def checks(monkeypatch):
    """The inputs checked against a signature (every check goes through
    ``check_values``), one entry per input of each check."""
    seen: list[str] = []
    check_values = FeedSignature.check_values

    def spy(self, feeds):
        seen.extend(sorted(feeds))
        return check_values(self, feeds)
    monkeypatch.setattr(FeedSignature, "check_values", spy)
    return seen


def test_checked_feeds_run_without_a_second_check(session, checks):
    x = mlp_input()
    checked = session.check_feeds({"data": x.tolist()})     # converted as it is checked
    assert isinstance(checked, CheckedFeeds) and checks == ["data"]
    assert checked["data"].dtype == np.float32 and checked["data"].shape == (4, 784)
    got = session.run(checked)[0]
    got_async = session.submit(checked).result(timeout=60)[0]
    assert checks == ["data"]                                # run and submit: no second check
    np.testing.assert_allclose(got, mlp_reference(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_async, got)
    session.run({"data": x})                                 # a plain dict: checked by run
    assert checks == ["data", "data"]


def test_feeds_checked_by_another_signature_are_checked_again(session, checks):
    other = FeedSignature([InputSpec("data", (4, 784), np.dtype("float32"))])
    foreign = other.assume_checked({"data": np.zeros((2, 784), "float32")})
    with pytest.raises(ExecutionError, match=r"expected shape \(4, 784\), got \(2, 784\)"):
        session.run(foreign)
    assert checks == ["data"]


def test_declared_tensors_are_checked_before_their_values_exist(session, checks):
    x = mlp_input()
    declared = session.check_feeds({"data": Declared((4, 784), np.dtype("float32"))})
    assert declared.declared and checks == ["data"]
    with pytest.raises(ExecutionError, match="declared tensor without values"):
        session.run(declared)
    filled = declared.fill({"data": x.ravel()})               # takes the declared shape
    assert not filled.declared and filled["data"].shape == (4, 784)
    np.testing.assert_allclose(session.run(filled)[0], mlp_reference(x), rtol=1e-5, atol=1e-6)
    assert checks == ["data"]
    with pytest.raises(FeedError) as refused:
        declared.fill({"data": np.zeros(5, "float32")})
    assert refused.value.reason == "values"


@pytest.mark.parametrize("feeds, reason, names", [
    ({"data": Declared((4, 784), np.dtype("int64"))}, "dtype", ("data",)),
    ({"data": Declared((4, 785), np.dtype("float32"))}, "shape", ("data",)),
    ({}, "missing", ("data",)),
    ({"data": np.zeros((4, 784), "float32"), "b": 1, "a": 2}, "unknown", ("a", "b")),
    ([np.zeros((4, 784), "float32")], "type", ()),
])
def test_refusals_name_the_reason_and_the_inputs(session, feeds, reason, names):
    with pytest.raises(FeedError) as refused:
        session.check_feeds(feeds)
    assert (refused.value.reason, refused.value.names) == (reason, names)
    assert isinstance(refused.value, ExecutionError)


RANGED = FeedSignature([InputSpec("x", (0, 3), np.dtype("float32"), batch_axis=0,
                                  batch_range=(1, 8))])


def test_a_ranged_signature_checks_the_batch_in_its_range():
    assert RANGED.check({"x": np.zeros((5, 3), "float32")}).batch == 5
    for rows in (0, 9):
        with pytest.raises(FeedError, match=rf"batch {rows} \(dimension 0\) is outside the "
                                            r"artifact's batch range 1\.\.8") as refused:
            RANGED.check({"x": np.zeros((rows, 3), "float32")})
        assert refused.value.reason == "batch"
    with pytest.raises(FeedError) as refused:
        RANGED.check({"x": np.zeros((2, 4), "float32")})
    assert refused.value.reason == "shape"


def test_concat_keeps_the_check_and_split_gives_each_part_its_rows():
    parts = [RANGED.check({"x": np.full((n, 3), i, "float32")}) for i, n in enumerate((1, 3, 2))]
    joined = batching.concat(parts)
    assert type(joined) is CheckedFeeds and joined.signature is RANGED and joined.batch == 6
    want = np.vstack([np.full((n, 3), i, "float32") for i, n in enumerate((1, 3, 2))])
    np.testing.assert_array_equal(joined["x"], want)
    outs = [joined["x"] * 2, joined["x"].sum(axis=1)]
    back = batching.split(outs, [1, 3, 2])
    for (a, b), lo, hi in zip(back, (0, 1, 4), (1, 4, 6)):
        np.testing.assert_array_equal(a, want[lo:hi] * 2)
        np.testing.assert_array_equal(b, want[lo:hi].sum(axis=1))
    with pytest.raises(FeedError, match="batch 9"):            # beyond the range: refused
        batching.concat(parts + [RANGED.check({"x": np.zeros((3, 3), "float32")})])
    plain = batching.concat([{"x": np.ones((1, 3))}, {"x": np.zeros((2, 3))}])
    assert type(plain) is dict and plain["x"].shape == (3, 3)


def test_pad_repeats_the_last_row_and_first_rows_undoes_it():
    x = np.arange(6, dtype="float32").reshape(3, 2)
    y = np.arange(6, dtype="float32").reshape(2, 3)           # batch on axis 1
    padded = batching.pad({"x": x, "y": y, "z": 7}, {"x": 0, "y": 1}, 3, 5)
    np.testing.assert_array_equal(padded["x"], x[[0, 1, 2, 2, 2]])
    np.testing.assert_array_equal(padded["y"], y[:, [0, 1, 2, 2, 2]])
    assert padded["z"] == 7
    first = batching.first_rows([padded["x"], padded["y"]], [0, 1], 3)
    np.testing.assert_array_equal(first[0], x)
    np.testing.assert_array_equal(first[1], y)
    assert first[1].flags.c_contiguous
