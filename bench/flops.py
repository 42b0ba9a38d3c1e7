"""Count the FLOPs of a model's matrix-multiply-like ops from its graph and inferred shapes.

Counted, as 2 FLOPs (one multiply, one add) per multiply-accumulate:

* ``Convolution`` (any rank, groups): ``2 * prod(out) * prod(weight.shape[1:])``
  (each output element is a dot product of ``C_in/groups * prod(kernel)`` terms);
* ``Deconvolution``: ``2 * prod(data) * prod(weight.shape[1:])``;
* ``FullyConnected``: ``2 * prod(out) * weight.shape[1]``;
* ``dot`` / ``batch_dot`` / ``linalg_gemm2``: ``2 * prod(out) * K`` (K the contracted length).

Bias additions, BatchNorm, activations, pooling and elementwise ops are not
counted: they are memory-bound and a small fraction of a CNN's arithmetic, and
this is the usual convention for "GFLOP/s" of a network.  Subgraph ops
(``_CachedOp`` ...) are counted through their nested graphs.

    python bench/flops.py MODEL-symbol.json --shape data=1,3,224,224
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Mapping

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COUNTED = ("Convolution", "Deconvolution", "FullyConnected", "dot", "batch_dot", "linalg_gemm2")


def _prod(shape) -> int:
    return math.prod(int(d) for d in shape)


def node_flops(op: str, params, in_shapes: list, out_shape) -> int | None:
    """FLOPs of one node, or None when *op* is not counted or a shape is unknown."""
    if op not in COUNTED or out_shape is None or any(s is None for s in in_shapes[:2]):
        return None
    if op == "Convolution":
        return 2 * _prod(out_shape) * _prod(in_shapes[1][1:])
    if op == "Deconvolution":
        return 2 * _prod(in_shapes[0]) * _prod(in_shapes[1][1:])
    if op == "FullyConnected":
        return 2 * _prod(out_shape) * int(in_shapes[1][1])
    a = in_shapes[0]
    if op == "dot":
        ta = bool(params.get("transpose_a", False))
        k = int(a[0]) if ta else int(a[-1])
        return 2 * _prod(out_shape) * k
    ta = bool(params.get("transpose_a", False))   # batch_dot, linalg_gemm2
    k = int(a[-2]) if ta else int(a[-1])
    return 2 * _prod(out_shape) * k


def graph_flops(graph, shapes: Mapping[str, tuple]) -> dict:
    """``{"total": FLOPs, "by_op": {op: FLOPs}, "nodes": {op: count}, "unknown": [names]}``.

    *graph* is an mxc :class:`~mxc.compiler.ir.Graph` (or a Symbol); *shapes*
    the input shapes by name (parameters' shapes are inferred like MXNet's
    ``infer_shape``).
    """
    from mxc.compiler.infer import infer_shapes

    graph = getattr(graph, "graph", graph)
    inferred = infer_shapes(graph, {k: tuple(v) for k, v in shapes.items()})
    out = {"total": 0, "by_op": {}, "nodes": {}, "unknown": []}
    _accumulate(graph, inferred, out)
    return out


def _accumulate(graph, inferred, out: dict) -> None:
    from mxc.compiler.infer import infer_shapes

    for node in graph.topo_order():
        if node.op is None:
            continue
        in_shapes = [inferred.get(e.key) for e in node.inputs]
        if node.subgraphs:
            for sub in node.subgraphs:  # nested graph: its variables take the outer shapes
                given = {v.name: s for v, s in zip(sub.input_nodes(), in_shapes) if s is not None}
                _accumulate(sub, infer_shapes(sub, given), out)
            continue
        if node.op not in COUNTED:
            continue
        try:
            params = node.params
        except Exception:  # noqa: BLE001 - attribute errors: count without params
            params = {}
        n = node_flops(node.op, params, in_shapes, inferred.get((node, 0)))
        if n is None:
            out["unknown"].append(node.name)
            continue
        out["total"] += n
        out["by_op"][node.op] = out["by_op"].get(node.op, 0) + n
        out["nodes"][node.op] = out["nodes"].get(node.op, 0) + 1


def symbol_flops(symbol_path: str | Path, shapes: Mapping[str, tuple]) -> dict:
    import mxc
    return graph_flops(mxc.sym.load(str(symbol_path)), shapes)


def main() -> None:
    ap = argparse.ArgumentParser(description="FLOPs of Convolution/FullyConnected/dot ops")
    ap.add_argument("symbol")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...")
    args = ap.parse_args()
    shapes = {}
    for item in args.shape:
        name, _, dims = item.partition("=")
        shapes[name] = tuple(int(d) for d in dims.split(",") if d)
    res = symbol_flops(args.symbol, shapes)
    print(json.dumps({**res, "gflop": res["total"] / 1e9}, indent=1))


if __name__ == "__main__":
    main()
