"""Adaptive batching: concurrent requests run as one batched ``Session.run``.

A session declares which batch sizes it runs through the leading dimension of
its inputs (:func:`batch_range`):

* a fixed size ``B`` (a static artifact): every request must have batch ``B``
  and runs on its own -- nothing can be grouped;
* an open dimension (``-1``, ``None`` or a name such as ``'batch'``, the way a
  dynamic-batch artifact shows it in ``sess.inputs``/``get_inputs()``), with the
  range from ``sess.batch_range`` / ``TensorInfo.batch_range`` where the session
  has one: requests are queued and grouped until the batch would pass
  ``min(range max, max_batch_size)`` or the oldest request has waited
  ``max_latency_ms``; the outputs are split back per request.

A request that finds the batcher idle (no batch running or being gathered,
nothing queued) after a run of a single request runs at once, alone: under
light load, waiting ``max_latency_ms`` for company that is not coming would
only add that wait to a lone client's latency.  After a batched run the next
request waits for company as usual: the clients of that batch are about to
send their next requests, and running the first of them alone would split
every batch in two (1, then the rest).  Requests that arrive while a batch
runs queue up and are grouped for the next run, so batches grow with the load.

Requests are grouped only with requests of the same trailing shapes and
dtypes (they are concatenated along axis 0).  The batch range and the
joining and splitting of batches are the runtime's
(:mod:`mxc.runtime.batching`); requests the session checked
(``Session.check_feeds``) are joined into feeds it runs without checking
them again.  The batcher knows nothing of
HTTP: ``submit(feeds)`` returns the request's own outputs, and a failed run
fails every request of its batch with the same exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..runtime.batching import BatchRange, batch_range, concat, request_batch, split

__all__ = ["AdaptiveBatcher", "BatchRange", "batch_range", "request_batch"]

log = logging.getLogger(__name__)

Feeds = Mapping[str, np.ndarray]


@dataclass
class _Pending:
    feeds: Feeds
    size: int
    key: tuple
    future: asyncio.Future
    queued_at: float = field(default_factory=time.perf_counter)


class AdaptiveBatcher:
    """Groups concurrent requests into batched runs of *run* (a ``Session.run``).

    *run* is called in *executor* (the event loop's default when None) so the
    loop keeps accepting requests while a batch runs; with *submit* (a
    :meth:`mxc.runtime.Session.submit`, returning a ``concurrent.futures.Future``)
    the run is started without that thread hop.  At most *max_inflight*
    batches run at once.  *observe(batch_size, queue_seconds_list)* is called
    for every run (metrics).
    """

    def __init__(self, run: Callable[[Feeds], Sequence[np.ndarray]], batch: BatchRange | None, *,
                 max_batch_size: int = 1, max_latency_ms: float = 5.0, max_inflight: int = 1,
                 executor: Any = None, observe: Callable[[int, list[float]], None] | None = None,
                 submit: Callable[[Feeds], Any] | None = None):
        self._run, self._submit, self.batch = run, submit, batch
        cap = max(1, int(max_batch_size))
        if batch is not None and batch.hi is not None:
            cap = min(cap, batch.hi)
        self.cap = cap
        self.max_latency = max(0.0, float(max_latency_ms)) / 1000.0
        self._executor, self._observe = executor, observe
        self._slots = asyncio.Semaphore(max(1, max_inflight))
        self._queue: deque[_Pending] = deque()
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._active = 0  # runs in flight or being gathered
        self._last_size = 1  # the batch of the last run: 1 (light load) lets a request run at once

    @property
    def batching(self) -> bool:
        """Whether requests are grouped at all (a dynamic batch and a cap above 1)."""
        return self.batch is not None and self.batch.dynamic and self.cap > 1

    async def submit(self, feeds: Feeds) -> list[np.ndarray]:
        """Run one request (possibly inside a larger batch) and return its outputs."""
        size = request_batch(feeds)
        if (not self.batching or size is None or size >= self.cap
                or (not self._active and not self._queue and self._last_size <= 1)):
            return await self._run_alone(feeds, size)
        loop = asyncio.get_running_loop()
        key = tuple((k, np.shape(v)[1:], np.asarray(v).dtype.str) for k, v in sorted(feeds.items()))
        item = _Pending(feeds, size, key, loop.create_future())
        self._queue.append(item)
        self._ensure_worker()
        self._wakeup.set()
        return await item.future

    async def _call(self, feeds: Feeds) -> Sequence[np.ndarray]:
        if self._submit is not None:
            return await asyncio.wrap_future(self._submit(feeds))
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._run, feeds)

    async def _run_alone(self, feeds: Feeds, size: int | None) -> list[np.ndarray]:
        self._active += 1
        try:
            async with self._slots:
                outs = await self._call(feeds)
        finally:
            self._active -= 1
        self._last_size = size or 1
        if self._observe:
            self._observe(size or 0, [0.0])
        return list(outs)

    def _ensure_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._wakeup = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._collect())

    async def _collect(self) -> None:
        while True:
            while not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            await self._slots.acquire()
            self._active += 1   # until _run_group ends
            group = await self._gather()
            asyncio.get_running_loop().create_task(self._run_group(group))

    async def _gather(self) -> list[_Pending]:
        """Take the oldest request and those that fit with it, waiting at most until
        the oldest has been queued for ``max_latency_ms``."""
        first = self._queue.popleft()
        group, total = [first], first.size
        deadline = first.queued_at + self.max_latency
        while total < self.cap:
            total = self._take_fitting(group, total, first.key)
            if total >= self.cap:
                break
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                self._take_fitting(group, total, first.key)
                break
        return group

    def _take_fitting(self, group: list[_Pending], total: int, key: tuple) -> int:
        kept: deque[_Pending] = deque()
        while self._queue:
            item = self._queue.popleft()
            if item.key == key and total + item.size <= self.cap:
                group.append(item)
                total += item.size
            else:
                kept.append(item)
        self._queue.extendleft(reversed(kept))
        return total

    async def _run_group(self, group: list[_Pending]) -> None:
        try:
            started = time.perf_counter()
            feeds = concat([g.feeds for g in group])
            try:
                outs = await self._call(feeds)
            except Exception as exc:  # noqa: BLE001 - every request of the batch gets it
                for g in group:
                    if not g.future.done():
                        g.future.set_exception(exc)
                return
            self._last_size = sum(g.size for g in group)
            if self._observe:
                self._observe(self._last_size, [started - g.queued_at for g in group])
            for g, mine in zip(group, split(outs, [g.size for g in group])):
                if not g.future.done():
                    g.future.set_result(mine)
        finally:
            self._active -= 1
            self._slots.release()
