"""Which shapes an artifact's input takes: the one place that decides it.

A compiled input takes exactly the shape it was compiled for.  Callers that
check a shape before running (``mxc run --shape``, tools that size their
inputs from a session) ask :func:`accepts` and print :func:`shape_text`, so
that when an input can take more than one shape (a range of batch sizes)
only these two functions learn it; the test itself is
:func:`mxc.runtime.feeds.takes_shape`, the one ``Session.check_feeds`` makes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .feeds import takes_shape
from .info import TensorInfo


def accepts(info: TensorInfo, shape: Sequence[int]) -> bool:
    """True when the input *info* can be fed an array of *shape* (any batch in its
    range on a dynamic-batch artifact's batch axis)."""
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        return False
    ranged = info.batch_range is not None
    return takes_shape(info.shape, tuple(int(d) for d in shape),
                       info.batch_axis if ranged else None, info.batch_range)


def shape_text(info: TensorInfo) -> str:
    """What *info* takes, as ``--shape`` writes it: ``data=4,784``, ``data=1..64,784``."""
    dims = [f"{info.batch_range[0]}..{info.batch_range[1]}"
            if axis == info.batch_axis and info.batch_range is not None else str(d)
            for axis, d in enumerate(info.shape)]
    return f"{info.name}={','.join(dims)}"


def example_shape(info: TensorInfo) -> tuple[int, ...]:
    """A shape *info* takes: its own, the lowest batch of a range on the batch axis."""
    return tuple(info.batch_range[0] if axis == info.batch_axis and info.batch_range
                 else int(d) for axis, d in enumerate(info.shape))
