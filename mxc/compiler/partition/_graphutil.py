"""Graph helpers for partitioning large graphs (internal).

The traversal and the copy are the IR's own (:func:`mxc.compiler.ir.post_order`,
:func:`mxc.compiler.ir.copy_graph`, both tuned for 100k-node graphs); the names
here stay for the partitioner's imports.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

from ..ir import Graph
from ..ir.graph import copy_graph, post_order

__all__ = ["post_order_fast", "copy_reachable", "gc_paused"]


#: the IR's own post-order (one implementation; this name stays for old imports)
post_order_fast = post_order


def copy_reachable(graph: Graph) -> Graph:
    """A deep copy of the part of *graph* its outputs reach, nodes in DFS order."""
    return copy_graph(graph, reachable_only=True)[0]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Suspend the cyclic garbage collector (restored on exit).

    Building a 100k-node graph allocates millions of objects; letting the
    collector rescan them over and over costs more than the work itself.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
