"""Which shapes an artifact's input takes: the one place that decides it.

A compiled input takes exactly the shape it was compiled for.  Callers that
check a shape before running (``mxc run --shape``, tools that size their
inputs from a session) ask :func:`accepts` and print :func:`shape_text`, so
that when an input can take more than one shape (a range of batch sizes)
only these two functions learn it.
"""

from __future__ import annotations

from typing import Sequence

from .session import TensorInfo


def accepts(info: TensorInfo, shape: Sequence[int]) -> bool:
    """True when the input *info* can be fed an array of *shape*."""
    return tuple(int(d) for d in shape) == tuple(info.shape)


def shape_text(info: TensorInfo) -> str:
    """What *info* takes, as ``--shape`` writes it: ``data=4,784``."""
    return f"{info.name}={','.join(map(str, info.shape))}"
