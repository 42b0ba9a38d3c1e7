"""Partitioning time on synthetic 10k- and 100k-node graphs (default backend).

The graph is a chain of residual blocks whose operators alternate between
selected and unselected ones, so every block holds a region that needs
MXNet's cycle breaking::

    x = negative(h)           unselected
    a = exp(x)                selected
    b = sin(a)                unselected
    c = cos(b)                selected     a -> b -> c leaves and re-enters {a, c, y}
    y = elemwise_add(c, a)    selected     (residual inside the block)
    h = broadcast_add(y, h)   unselected   (residual around the block)

partitioned with ``op_names=exp,cos,elemwise_add``.  Reports the median wall
and CPU time of ``--repeat`` runs of
:func:`~mxc.compiler.partition.partition_graph` (graph copy included) and
the 100k/10k ratio (10 for linear scaling).  CPU time is the steadier figure
on a shared machine.

``--pathological`` also times the case MXNet's algorithm is superlinear on
by design: a chain whose residual adds are selected, so one selected
component spans the whole graph and is peeled one region at a time (O(n^2)
in mxc, O(n^3) in MXNet; see :mod:`mxc.compiler.partition.algorithm`).

Run ``python bench/bench_partition.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxc.compiler.ir import Entry, Graph, Node  # noqa: E402
from mxc.compiler.partition import partition_graph  # noqa: E402

OP_NAMES = "exp,cos,elemwise_add"


def residual_chain(num_nodes: int) -> Graph:
    """About *num_nodes* nodes of alternating selected/unselected residual blocks."""
    data = Node(None, "data", {"__shape__": "(2, 3)"})
    nodes = [data]
    h = data
    for k in range((num_nodes - 1) // 6):
        x = Node("negative", f"neg{k}", inputs=[Entry(h)])
        a = Node("exp", f"exp{k}", inputs=[Entry(x)])
        b = Node("sin", f"sin{k}", inputs=[Entry(a)])
        c = Node("cos", f"cos{k}", inputs=[Entry(b)])
        y = Node("elemwise_add", f"add{k}", inputs=[Entry(c), Entry(a)])
        h2 = Node("broadcast_add", f"res{k}", inputs=[Entry(y), Entry(h)])
        nodes += [x, a, b, c, y, h2]
        h = h2
    return Graph(nodes, [Entry(h)])


def peeling_chain(num_nodes: int) -> Graph:
    """Residual adds selected: one component over the whole chain (resnet-like)."""
    data = Node(None, "data", {"__shape__": "(2, 3)"})
    nodes = [data]
    h = data
    for k in range((num_nodes - 1) // 3):
        a = Node("exp", f"exp{k}", inputs=[Entry(h)])
        b = Node("sin", f"sin{k}", inputs=[Entry(a)])
        h2 = Node("elemwise_add", f"add{k}", inputs=[Entry(b), Entry(h)])
        nodes += [a, b, h2]
        h = h2
    return Graph(nodes, [Entry(h)])


def time_partition(graph: Graph, repeat: int,
                   op_names: str = OP_NAMES) -> tuple[float, float, int]:
    """(median wall seconds, median CPU seconds, number of subgraphs)."""
    walls, cpus = [], []
    regions = 0
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = partition_graph(graph, "default", op_names=op_names)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        regions = sum(1 for n in out.nodes if n.op == "_CachedOp")
        del out
    return statistics.median(walls), statistics.median(cpus), regions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs=2, default=(10_000, 100_000))
    ap.add_argument("--pathological", action="store_true",
                    help="also time the whole-graph-component case on small sizes")
    args = ap.parse_args(argv)
    small, large = args.sizes
    partition_graph(residual_chain(100), "default", op_names=OP_NAMES)  # load op registry
    wall, cpu = {}, {}
    for n in (small, large):
        g = residual_chain(n)
        wall[n], cpu[n], regions = time_partition(g, args.repeat)
        print(f"{len(g.nodes):>7} nodes: {wall[n]:7.3f} s wall, {cpu[n]:7.3f} s CPU  "
              f"({regions} subgraphs, median of {args.repeat})")
    print(f"ratio {large // 1000}k/{small // 1000}k: {wall[large] / wall[small]:.2f} wall, "
          f"{cpu[large] / cpu[small]:.2f} CPU (node ratio {large / small:.0f})")
    if args.pathological:
        for n in (600, 1200, 2400):
            g = peeling_chain(n)
            w, c, regions = time_partition(g, 1, "exp,elemwise_add")
            print(f"pathological {len(g.nodes):>6} nodes: {w:7.3f} s wall, {c:7.3f} s CPU "
                  f"({regions} subgraphs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
