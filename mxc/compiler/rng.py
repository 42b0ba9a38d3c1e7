"""The random state every mxc sampler draws from (MXNet's ``mx.random.seed``).

MXNet keeps one seeded generator per device; ``mx.random.seed(s)`` resets it and
a bound executor then draws the same values on every run.  mxc gives the same
guarantee without depending on the order in which an executor happens to run
the nodes: each random node draws from its own stream, derived from

    (the global seed, the node's name, how many times that node has drawn since
     the last :func:`seed`)

so the reference backend, a compiled model's host nodes and a reloaded
artifact produce identical samples for an identical seed and call sequence,
whatever the schedule.  The draws are NOT MXNet's bits (MXNet's mt19937 /
Philox streams are not reproduced); only the distributions are MXNet's.

Public API::

    from mxc.compiler import rng
    rng.seed(42)            # what mx.random.seed(42) maps to
    g = rng.generator("node_name")   # a numpy Generator for one draw of one node

The process starts seeded with :data:`DEFAULT_SEED`, so unseeded runs are
reproducible too (as MXNet's, whose global generator has a fixed start seed).
"""

from __future__ import annotations

import logging
import threading
import zlib

import numpy as np

__all__ = ["DEFAULT_SEED", "seed", "current_seed", "generator"]

log = logging.getLogger(__name__)

#: The seed the process starts with.
DEFAULT_SEED = 0

_lock = threading.Lock()
_seed = DEFAULT_SEED
_draws: dict[str, int] = {}


def seed(value: int) -> None:
    """Reset every random stream: what ``mx.random.seed(value)`` does in MXNet.

    *value* must be an integer (MXNet takes a 32-bit int; any Python int
    >= 0 works here).
    """
    global _seed
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"random seed must be a non-negative integer, got {value!r}")
    with _lock:
        _seed = int(value)
        _draws.clear()
    log.debug("random streams reset with seed %d", _seed)


def current_seed() -> int:
    """The seed of the last :func:`seed` call (:data:`DEFAULT_SEED` if none)."""
    return _seed


def generator(stream: str) -> np.random.Generator:
    """A generator for the next draw of *stream* (a node name).

    Each call advances the stream's draw counter, so a node run twice draws
    fresh values, and the sequence restarts after :func:`seed`.
    """
    key = zlib.crc32(stream.encode("utf-8"))
    with _lock:
        count = _draws.get(stream, 0)
        _draws[stream] = count + 1
        base = _seed
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([base, key, count])))
