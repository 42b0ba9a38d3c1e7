"""Batch arithmetic, in one place: the batch range a session takes, and joining,
padding and splitting batches along their batch axis.

Three runners group or reshape batches: the serving batcher concatenates
concurrent requests and splits the outputs back, Triton's Python backend does
the same with the requests Triton hands it, and a dynamic-batch session pads a
batch to its bucket and slices the outputs.  They used to do it each in its
own words, and to read the batch range each their own way; they now call
these functions.  Joining checked feeds keeps the proof of the check
(:class:`~mxc.runtime.feeds.CheckedFeeds`): rows of requests that each passed
the check, joined to a batch the range takes, need no second check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .feeds import CheckedFeeds


@dataclass(frozen=True)
class BatchRange:
    """The batch sizes a session runs: ``lo == hi`` for a static artifact; ``hi``
    None when a dynamic one declares no upper bound."""

    lo: int
    hi: int | None

    @property
    def dynamic(self) -> bool:
        return self.hi != self.lo


def _declared_range(owner: Any) -> tuple[int, int | None] | None:
    rng = getattr(owner, "batch_range", None)
    if rng is None:
        return None
    lo, hi = rng
    return int(lo or 1), (int(hi) if hi is not None else None)


def batch_range(session: Any) -> BatchRange | None:
    """The batch sizes *session* runs along its inputs' leading dimension, read from
    its ``inputs`` (and ``batch_range``, where it declares one); None when its inputs
    do not share a leading batch dimension (then nothing can be batched).

    An open leading dimension (``-1``, None or a name such as ``'batch'``, as a
    dynamic-batch artifact shows it) takes the declared range, ``1..`` without one."""
    fixed: set[int] = set()
    dynamic = False
    declared = _declared_range(session)
    for info in session.inputs:
        if not info.shape:
            return None
        lead = info.shape[0]
        if isinstance(lead, (int, np.integer)) and lead >= 0:
            fixed.add(int(lead))
        else:
            dynamic = True
            declared = declared or _declared_range(info)
    if dynamic and not fixed:
        lo, hi = declared or (1, None)
        return BatchRange(lo, hi)
    if len(fixed) == 1 and not dynamic:
        (b,) = fixed
        return BatchRange(b, b)
    return None


def request_batch(feeds: Mapping[str, Any]) -> int | None:
    """The leading dimension all of *feeds*' arrays share (None when they differ)."""
    if type(feeds) is CheckedFeeds and feeds.batch is not None:
        return feeds.batch
    sizes = {np.shape(v)[0] if np.ndim(v) else None for v in feeds.values()}
    return sizes.pop() if len(sizes) == 1 else None


def concat(parts: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """*parts* (feeds with the same names) joined along axis 0.  Feeds one signature
    checked give feeds it checked (their batch, the sum, checked against its range);
    others a plain dict.  A single part is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    arrays = {n: np.concatenate([np.asarray(p[n]) for p in parts]) for n in first}
    sig = first.signature if type(first) is CheckedFeeds else None
    if sig is not None and all(type(p) is CheckedFeeds and p.signature is sig
                               and p.batch is not None for p in parts):
        return sig.assume_checked(arrays, sig.check_batch(sum(p.batch for p in parts)))
    return arrays


def split(outputs: Sequence[Any], sizes: Sequence[int]) -> list[list[np.ndarray]]:
    """The outputs of a joined batch, split back along axis 0 into parts of *sizes* rows."""
    out, start = [], 0
    for size in sizes:
        stop = start + size
        out.append([np.asarray(o)[start:stop] for o in outputs])
        start = stop
    return out


def pad(arrays: Mapping[str, Any], axes: Mapping[str, int], batch: int, size: int
        ) -> dict[str, Any]:
    """*arrays* of *batch* rows (along ``axes[name]``; other arrays unchanged) padded to
    *size* rows by repeating their last row, so that ops such as log or division
    see real values in the padding."""
    if size == batch:
        return dict(arrays)
    rows = np.minimum(np.arange(size), batch - 1)
    return {k: (np.take(np.asarray(v), rows, axis=axes[k]) if k in axes else v)
            for k, v in arrays.items()}


def first_rows(outputs: Sequence[np.ndarray], axes: Sequence[int], batch: int
               ) -> list[np.ndarray]:
    """The first *batch* rows of each output along its axis (from ``axes``): undoes
    :func:`pad`.  A slice along axis 0 is a view; along another axis, a compact copy."""
    out = []
    for axis, value in zip(axes, outputs):
        view = value[(slice(None),) * axis + (slice(0, batch),)]
        out.append(view if axis == 0 else np.ascontiguousarray(view))
    return out
