"""``mx.random``: seeding.

mxc.mxnet draws random numbers with numpy; ``seed`` seeds numpy's global
generator (what the random operators' reference kernels and the
``initialize()`` of Gluon parameters use).  MXNet's own generator streams are
not reproduced: the same seed gives different numbers than MXNet does.
"""

from __future__ import annotations

import numpy as np

from .context import check_cpu

__all__ = ["seed", "uniform", "normal"]


def seed(seed_state: int, ctx="all") -> None:
    if ctx != "all":
        check_cpu(ctx, "random.seed")
    np.random.seed(int(seed_state) % (2 ** 32))


def uniform(low=0.0, high=1.0, shape=(1,), dtype="float32", ctx=None, **_kwargs):
    from .ndarray import NDArray
    check_cpu(ctx, "random.uniform")
    return NDArray(np.random.uniform(low, high, shape).astype(dtype))


def normal(loc=0.0, scale=1.0, shape=(1,), dtype="float32", ctx=None, **_kwargs):
    from .ndarray import NDArray
    check_cpu(ctx, "random.normal")
    return NDArray(np.random.normal(loc, scale, shape).astype(dtype))
