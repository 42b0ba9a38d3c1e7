"""Adaptive batching on a fake session that declares its batch range (no server, no kserve).

The fake session's ``run`` doubles its input and records the batch sizes it
was called with, so each test can check both how requests were grouped and
that every request got exactly its own rows back.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import numpy as np
import pytest

from mxc.serving.batcher import AdaptiveBatcher, BatchRange, batch_range


@dataclass(frozen=True)
class Info:
    name: str
    shape: tuple
    dtype: str = "float32"


class FakeSession:
    def __init__(self, lead, batch_range=None, fail=False):
        self.inputs = [Info("x", (lead, 3))]
        if batch_range is not None:
            self.batch_range = batch_range
        self.calls: list[int] = []
        self.fail = fail
        self._lock = threading.Lock()

    def run(self, feeds):
        x = feeds["x"]
        with self._lock:
            self.calls.append(x.shape[0])
        if self.fail:
            raise RuntimeError("kernel failed")
        return [x * 2, x.sum(axis=1, keepdims=True)]


def _requests(n, rows=1, cols=3):
    return [np.full((rows, cols), i, dtype="float32") for i in range(n)]


async def _submit_all(batcher, xs):
    return await asyncio.gather(*(batcher.submit({"x": x}) for x in xs))


@pytest.mark.parametrize("lead,declared,want", [
    (4, None, BatchRange(4, 4)),          # static artifact: only its own batch
    (-1, None, BatchRange(1, None)),      # open batch, no declared bound
    ("batch", (1, 64), BatchRange(1, 64)),  # ORT-style name with a declared range
    (None, (2, 16), BatchRange(2, 16)),
])
def test_batch_range_read_from_session_inputs(lead, declared, want):
    assert batch_range(FakeSession(lead, declared)) == want


def test_inputs_without_a_shared_batch_dimension_are_not_batched():
    s = FakeSession(4)
    s.inputs = [Info("x", (4, 3)), Info("y", (2, 3))]
    assert batch_range(s) is None


def test_32_concurrent_batch1_requests_run_as_fewer_batches_with_their_own_outputs():
    sess = FakeSession(-1, (1, 64))
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=8, max_latency_ms=1000)
    xs = _requests(32)
    outs = asyncio.run(_submit_all(b, xs))
    # the first finds the batcher idle and runs at once; the 31 that arrive while it
    # runs are grouped up to the cap
    assert sess.calls == [1, 8, 8, 8, 7]
    for x, (doubled, total) in zip(xs, outs):
        np.testing.assert_array_equal(doubled, x * 2)
        np.testing.assert_array_equal(total, x.sum(axis=1, keepdims=True))


def test_batches_never_pass_the_declared_range():
    sess = FakeSession(-1, (1, 4))
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=32, max_latency_ms=1000)
    asyncio.run(_submit_all(b, _requests(10)))
    assert max(sess.calls) <= 4 and sum(sess.calls) == 10


def test_static_artifact_runs_each_request_alone():
    sess = FakeSession(2)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=32, max_latency_ms=1000)
    assert not b.batching
    xs = _requests(5, rows=2)
    outs = asyncio.run(_submit_all(b, xs))
    assert sess.calls == [2] * 5
    for x, o in zip(xs, outs):
        np.testing.assert_array_equal(o[0], x * 2)


def test_requests_of_other_trailing_shapes_are_not_mixed():
    sess = FakeSession(-1)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=16, max_latency_ms=1000)
    xs = _requests(3) + _requests(3, cols=5)
    outs = asyncio.run(_submit_all(b, xs))
    assert sorted(sess.calls) == [1, 2, 3]   # the first ran alone (the batcher was idle)
    for x, o in zip(xs, outs):
        np.testing.assert_array_equal(o[0], x * 2)


def test_multi_row_requests_are_split_back_by_their_own_size():
    sess = FakeSession(-1)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=16, max_latency_ms=1000)
    xs = [np.arange(r * 3, dtype="float32").reshape(r, 3) + 100 * r for r in (1, 3, 2, 4)]
    outs = asyncio.run(_submit_all(b, xs))
    assert sess.calls == [1, 9]   # the first ran alone (the batcher was idle)
    for x, o in zip(xs, outs):
        np.testing.assert_array_equal(o[0], x * 2)


def test_a_failed_batch_fails_each_of_its_requests_and_the_batcher_keeps_serving():
    sess = FakeSession(-1, fail=True)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=4, max_latency_ms=1000)

    async def scenario():
        res = await asyncio.gather(*(b.submit({"x": x}) for x in _requests(4)),
                                   return_exceptions=True)
        sess.fail = False
        ok = await b.submit({"x": np.ones((1, 3), "float32")})
        return res, ok
    res, ok = asyncio.run(scenario())
    assert all(isinstance(r, RuntimeError) for r in res)
    np.testing.assert_array_equal(ok[0], np.full((1, 3), 2, "float32"))


def test_a_lone_request_runs_after_max_latency_without_company():
    sess = FakeSession(-1)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=8, max_latency_ms=1)
    out = asyncio.run(b.submit({"x": np.ones((1, 3), "float32")}))
    assert sess.calls == [1]
    np.testing.assert_array_equal(out[0], np.full((1, 3), 2, "float32"))


def test_a_request_that_finds_the_batcher_idle_does_not_wait_for_max_latency():
    sess = FakeSession(-1)
    waits = []
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=8, max_latency_ms=600_000,
                        observe=lambda size, w: waits.extend(w))

    async def scenario():  # would wait the 10 minutes before the fast path
        return await asyncio.wait_for(b.submit({"x": np.ones((1, 3), "float32")}), 60)
    out = asyncio.run(scenario())
    assert sess.calls == [1] and waits == [0.0]
    np.testing.assert_array_equal(out[0], np.full((1, 3), 2, "float32"))


def test_submit_runs_batches_through_futures_without_the_loops_thread_pool():
    from concurrent.futures import ThreadPoolExecutor
    sess = FakeSession(-1, (1, 64))
    pool = ThreadPoolExecutor(1, thread_name_prefix="fake-executor")
    ran_on = []

    def submit(feeds):
        ran_on.append(threading.current_thread().name)
        return pool.submit(sess.run, feeds)

    def run(feeds):  # the loop's pool must not be used when submit is given
        raise AssertionError("run called instead of submit")
    b = AdaptiveBatcher(run, batch_range(sess), max_batch_size=8, max_latency_ms=1000,
                        submit=submit)
    xs = _requests(12)
    outs = asyncio.run(_submit_all(b, xs))
    pool.shutdown()
    assert sess.calls == [1, 8, 3] and len(ran_on) == 3
    for x, (doubled, total) in zip(xs, outs):
        np.testing.assert_array_equal(doubled, x * 2)
        np.testing.assert_array_equal(total, x.sum(axis=1, keepdims=True))


def test_after_a_batched_run_the_next_request_waits_for_company():
    """Closed-loop clients: after a batch of 4 the next four requests arrive one by one;
    the first must not run alone (that would split every batch into 1 + the rest)."""
    sess = FakeSession(-1)
    b = AdaptiveBatcher(sess.run, batch_range(sess), max_batch_size=4, max_latency_ms=60_000)

    async def scenario():
        first = asyncio.gather(*(b.submit({"x": x}) for x in _requests(5)))
        await asyncio.wait_for(first, 60)        # 1 alone (idle), then 4 together
        pending = [asyncio.ensure_future(b.submit({"x": x})) for x in _requests(4)]
        return await asyncio.wait_for(asyncio.gather(*pending), 60)
    outs = asyncio.run(scenario())
    assert sess.calls == [1, 4, 4]
    for x, o in zip(_requests(4), outs):
        np.testing.assert_array_equal(o[0], x * 2)
