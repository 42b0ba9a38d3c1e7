"""Print and parse time of the textual IR for a 10k-node graph.

Run ``python bench/bench_text_ir.py``; reports medians of repeated runs.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mxc.compiler.ir import Graph, Node  # noqa: E402
from mxc.compiler.ir.text import parse_graph, print_graph  # noqa: E402


def chain(n: int) -> Graph:
    nodes = [Node(None, "data")]
    for i in range(n - 1):
        nodes.append(Node("Activation", f"relu{i}", {"act_type": "relu"}, [nodes[-1].out]))
    return Graph(nodes, [nodes[-1].out])


def median_time(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    g = chain(10_000)
    text = print_graph(g)
    p = median_time(lambda: print_graph(g))
    q = median_time(lambda: parse_graph(text))
    print(f"10k-node chain: print {p * 1e3:.0f} ms, parse {q * 1e3:.0f} ms (median of 7)")


if __name__ == "__main__":
    main()
