"""Cost of a pass that inserts one node after every node of a large graph.

The pass is what a cast- or copy-inserting pass does: for every node of an
n-node chain it creates an ``identity`` node reading it, named with
``Graph.fresh_name``, placed just after it with ``Graph.add_node(after=)``
(timed: the pass alone; afterwards each copy is checked to follow its node).  With an O(1) container the whole pass is
O(n), so 10k -> 100k must cost at most ~10x (the acceptance bound is 12x);
with a list-backed graph each insert (``list.index``) and each fresh name
(a set of every name) is O(n), so the pass is O(n^2).

Run ``python bench/bench_graph_insert.py [--sizes 10000 100000] [--budget S]``;
each size reports the best of three runs, each started after a full
collection (with the collector paused during the pass, the earlier runs'
cyclic garbage would otherwise still sit in the heap the pass walks).
Only public ``Graph`` methods that existed before the O(1) container are used,
so the same script, copied into an older checkout, measures that checkout; a
size whose pass would exceed ``--budget`` seconds (estimated from a sample of
its inserts) is reported as an extrapolation instead of being run.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout it sits in

from mxc.compiler.ir import Graph, Node  # noqa: E402
# the pass runs with the cyclic collector paused, as the partitioner runs on big graphs:
# its periodic scans of a heap holding 100k nodes are the interpreter's cost, not the
# container's, and would blur the 10k -> 100k ratio
from mxc.compiler.partition._graphutil import gc_paused  # noqa: E402


def chain(n: int) -> Graph:
    """An n-node chain: one variable then ``relu`` activations."""
    nodes = [Node(None, "data")]
    for i in range(n - 1):
        nodes.append(Node("Activation", f"relu{i}", {"act_type": "relu"}, [nodes[-1].out]))
    return Graph(nodes, [nodes[-1].out])


def insert_after_every_node(graph: Graph, limit: int | None = None) -> int:
    """The pass: one ``identity`` after each original node; returns how many were added."""
    added = 0
    for node in list(graph.nodes):
        if limit is not None and added >= limit:
            break
        name = graph.fresh_name(f"{node.name}_copy")
        graph.add_node(Node("identity", name, {}, [node.out]), after=node)
        added += 1
    return added


def measure(n: int, budget: float, repeat: int = 3) -> tuple[float, bool]:
    """Best-of-*repeat* seconds of the pass on an n-node chain, and whether extrapolated."""
    sample = 200
    timings = []
    for limit in (sample, 2 * sample):  # the difference cancels one-time costs (snapshots)
        probe = chain(n)
        t0 = time.perf_counter()
        insert_after_every_node(probe, limit=limit)
        timings.append(time.perf_counter() - t0)
    estimate = max(timings[1] - timings[0], 0.0) / sample * n
    if estimate > budget:
        return estimate, True
    best = float("inf")
    for _ in range(repeat):
        graph = None
        gc.collect()  # the previous runs' garbage is not this run's working set
        graph = chain(n)
        with gc_paused():
            t0 = time.perf_counter()
            added = insert_after_every_node(graph)
            best = min(best, time.perf_counter() - t0)
    nodes = list(graph.nodes)
    assert added == n and len(nodes) == 2 * n
    assert all(nodes[2 * i + 1].inputs[0].node is nodes[2 * i] for i in range(n)), \
        "every copy must sit just after the node it reads"
    return best, False


def machine_baseline(n: int, repeat: int = 3) -> float:
    """Best-of-*repeat* seconds of a loop that is linear by construction, for comparison.

    One new slotted object and one dict insertion per element: the same kind of
    work as the pass, with no container logic at all.  Its 10k -> 100k ratio
    shows what this machine's caches and allocator add to any linear Python loop.
    """
    class Item:
        __slots__ = ("a", "b", "c", "d", "e", "f", "g", "h")

    items = [Item() for _ in range(n)]
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        table: dict = {x: None for x in items}
        with gc_paused():
            t0 = time.perf_counter()
            for x in items:
                table[Item()] = x
            best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds above which a size is extrapolated instead of run")
    ap.add_argument("--baseline", action="store_true",
                    help="also time a loop linear by construction at the same sizes")
    args = ap.parse_args(argv)
    results = []
    for n in args.sizes:
        seconds, estimated = measure(n, args.budget)
        results.append(seconds)
        note = " (extrapolated from 200 inserts: over budget)" if estimated else ""
        print(f"{n:>7} nodes: insert-after-every-node pass {seconds:8.3f} s{note}")
    if len(results) >= 2:
        ratio = results[-1] / results[0]
        growth = args.sizes[-1] / args.sizes[0]
        print(f"ratio {args.sizes[0]} -> {args.sizes[-1]}: {ratio:.1f}x "
              f"(linear would be {growth:.0f}x)")
    if args.baseline and len(args.sizes) >= 2:
        lo, hi = machine_baseline(args.sizes[0]), machine_baseline(args.sizes[-1])
        print(f"baseline (one object + one dict insert per element): {lo:.3f} s -> "
              f"{hi:.3f} s, ratio {hi / lo:.1f}x on this machine")


if __name__ == "__main__":
    main()
