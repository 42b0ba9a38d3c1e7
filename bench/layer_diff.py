"""Layer-by-layer comparison of mxc's reference interpreter with MXNet (issue 40).

When a whole network differs from MXNet, the output alone cannot say which
operator is wrong: an error born early is amplified by every layer after it.
This tool finds the op in two halves, one per interpreter:

    bench/.venv-peers/bin/python bench/layer_diff.py dump DIR --out INTERNALS
    PYTHONPATH=. python bench/layer_diff.py compare DIR --internals INTERNALS

``dump`` (MXNet 1.9.1, the peers' venv) binds ``sym.get_internals()`` of a
corpus-format directory (``symbol.json``, ``model.params``, ``io.npz``) and
writes every node output as ``INTERNALS/NNNN.npy`` with ``names.json``.
``compare`` (mxc) runs the graph node by node and reports for each node two
errors, both as max |mxc - MXNet| / max |MXNet|:

* ``prop``: mxc's own values carried from the inputs (what the model gives);
* ``local``: the node re-run on MXNet's values of its inputs, so an op whose
  semantics differ shows a large local error even when its inputs agree,
  while amplified noise from earlier layers shows only in ``prop``.

``perturb DIR --eps EPS`` (MXNet) moves the input by ``EPS x std`` (seeded), or
with ``--weights`` every float weight by ``EPS`` relative, and reports how far
MXNet's own outputs move: its sensitivity floor, the error no implementation
that merely sums in another order can be expected to beat.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _feeds(directory: Path):
    import numpy as np
    with np.load(directory / "io.npz") as z:
        feeds = {k[4:]: z[k] for k in z.files if k.startswith("in__")}
        ref = [z[k] for k in sorted((k for k in z.files if k.startswith("out__")),
                                    key=lambda k: int(k[5:]))]
    return feeds, ref


# -- MXNet half ---------------------------------------------------------------------
def _mx_bind(directory: Path, internals: bool):
    import mxnet as mx
    sym = mx.sym.load(str(directory / "symbol.json"))
    if internals:
        sym = sym.get_internals()
    params = mx.nd.load(str(directory / "model.params"))
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    return sym, args, aux


def _mx_run(sym, args, aux, feeds):
    import mxnet as mx
    full = {**args, **{k: mx.nd.array(v) for k, v in feeds.items()}}
    full = {k: v for k, v in full.items() if k in sym.list_arguments()}
    ex = sym.bind(mx.cpu(), args=full, aux_states={k: aux[k] for k in sym.list_auxiliary_states()},
                  grad_req="null")
    return [o.asnumpy() for o in ex.forward(is_train=False)]


def dump(directory: Path, out: Path) -> None:
    import numpy as np
    feeds, ref = _feeds(directory)
    sym, args, aux = _mx_bind(directory, internals=True)
    names = sym.list_outputs()
    out.mkdir(parents=True, exist_ok=True)
    values = _mx_run(sym, args, aux, feeds)
    for i, v in enumerate(values):
        np.save(out / f"{i:04d}.npy", v)
    (out / "names.json").write_text(json.dumps(names))
    # the internals' last output is the network's first one: it must be MXNet's own result
    final = _mx_run(*_mx_bind(directory, internals=False), feeds)
    same = all(np.array_equal(a, b) for a, b in zip(final, ref))
    print(json.dumps({"dumped": len(names), "outputs_match_io_npz": same}))


def perturb(directory: Path, eps: float, weights: bool = False, seed: int = 1) -> None:
    """MXNet's sensitivity floor: its output's move when the input moves by eps x std
    (or, with *weights*, when every float weight moves by eps relative: eps ~ 6e-8 is
    the rounding of float64 weights to float32)."""
    import mxnet as mx
    import numpy as np
    feeds, ref = _feeds(directory)
    sym, args, aux = _mx_bind(directory, internals=False)
    rng = np.random.RandomState(seed)
    moved = dict(feeds)
    margs = args
    if weights:
        margs = {}
        for k, v in args.items():
            a = v.asnumpy()
            if a.dtype.kind == "f":
                a = (a * (1 + eps * rng.standard_normal(a.shape))).astype(a.dtype)
            margs[k] = mx.nd.array(a, dtype=a.dtype)
    else:
        for k, v in feeds.items():
            if v.dtype.kind == "f" and v.size > 1:
                v = (v + eps * float(v.std()) * rng.standard_normal(v.shape)).astype(v.dtype)
            moved[k] = v
    base = _mx_run(sym, args, aux, feeds)
    outs = _mx_run(sym, margs, aux, moved)
    rows = []
    for i, (a, b) in enumerate(zip(base, outs)):
        d = float(np.abs(a.astype("f8") - b).max()) if a.size else 0.0
        rows.append({"output": i, "max_abs_move": d,
                     "scale": float(np.abs(a).max()) if a.size else 0.0})
    print(json.dumps({"moved": "weights (relative)" if weights else "input (x std)",
                      "eps": eps, "outputs": rows}))


def native(directory: Path) -> None:
    """MXNet against itself: its outputs with oneDNN off (``MXNET_MKLDNN_ENABLED=0``, its
    own reference CPU kernels, another summation order) against ``io.npz`` (oneDNN on)."""
    import os
    import subprocess
    import tempfile
    import numpy as np
    _, ref = _feeds(directory)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MXNET_MKLDNN_ENABLED": "0", "MXNET_SUBGRAPH_BACKEND": "NONE"}
        subprocess.run([sys.executable, __file__, "_run", str(directory), "--out",
                        f"{tmp}/o.npz"], env=env, check=True, capture_output=True)
        with np.load(f"{tmp}/o.npz") as z:
            outs = [z[f"o{i}"] for i in range(len(ref))]
    rows = [{"output": i, "max_abs_diff": float(np.abs(a.astype("f8") - b).max()) if a.size
             else 0.0, "scale": float(np.abs(b).max()) if b.size else 0.0}
            for i, (a, b) in enumerate(zip(outs, ref))]
    print(json.dumps({"mxnet_native_vs_onednn": rows}))


def _run_to(directory: Path, out: str) -> None:
    import numpy as np
    feeds, _ = _feeds(directory)
    outs = _mx_run(*_mx_bind(directory, internals=False), feeds)
    np.savez(out, **{f"o{i}": o for i, o in enumerate(outs)})


# -- mxc half -----------------------------------------------------------------------
def _err(got, want) -> float:
    import numpy as np
    got, want = np.asarray(got, "f8"), np.asarray(want, "f8")
    if got.shape != want.shape:
        return float("inf")
    if not got.size:
        return 0.0
    scale = max(float(np.abs(want).max()), 1e-30)
    return float(np.abs(got - want).max()) / scale


def compare(directory: Path, internals: Path, threshold: float, limit: int) -> list[dict]:
    import numpy as np
    import mxc
    from mxc.compiler import interpret
    from mxc.compiler.infer import inference_memo
    from mxc.compiler.ir import Entry

    names = json.loads((internals / "names.json").read_text())
    where: dict[str, int] = {}
    for i, n in enumerate(names):
        where[n] = -1 if n in where else i          # a name used twice: not comparable

    def ref(name):
        i = where.get(name, -1)
        return None if i < 0 else np.load(internals / f"{i:04d}.npy")

    sym = mxc.sym.load(str(directory / "symbol.json"))
    graph = sym.graph
    params = mxc.nd.load(str(directory / "model.params"))
    feeds, _ = _feeds(directory)
    arrays = {k.split(":", 1)[-1]: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
              for k, v in params.items()}
    arrays.update(feeds)
    rows = []
    with inference_memo(), np.errstate(all="ignore"):
        order = graph.topo_order()
        given = [n for n in order if n.op is None and n.name in arrays]
        types = graph.types({n.name: arrays[n.name].shape for n in given},
                            {n.name: arrays[n.name].dtype.name for n in given})
        values = {}
        for node in order:
            if node.op is None:
                values[Entry(node, 0).key] = arrays.get(node.name)
                continue
            ins = [values[e.key] for e in node.inputs]
            outs = interpret._run_node(node, ins, types.shapes, types.dtypes)
            ref_ins = [ref(graph.output_name(e)) for e in node.inputs]
            local_outs = None
            if all(r is not None for r in ref_ins) and any(e.node.op for e in node.inputs):
                ref_ins = [r.astype(x.dtype) if r.dtype != x.dtype else r
                           for r, x in zip(ref_ins, ins)]
                local_outs = interpret._run_node(node, ref_ins, types.shapes, types.dtypes)
            for i in range(node.num_visible_outputs()):
                name = graph.output_name(Entry(node, i))
                want = ref(name)
                values[Entry(node, i).key] = outs[i]
                if want is None:
                    continue
                row = {"node": name, "op": node.op, "shape": list(want.shape),
                       "scale": float(np.abs(want.astype("f8")).max()) if want.size else 0.0,
                       "prop": _err(outs[i], want),
                       "local": _err(local_outs[i], want) if local_outs else None}
                rows.append(row)
            for j in range(node.num_visible_outputs(), len(outs)):
                values[Entry(node, j).key] = outs[j]
    meta = json.loads((directory / "meta.json").read_text()) \
        if (directory / "meta.json").is_file() else {}
    atol, rtol = meta.get("atol", 0.0), meta.get("rtol", 0.0)
    for i, (e, want) in enumerate(zip(graph.outputs, _feeds(directory)[1])):
        got = np.asarray(values[e.key], "f8")
        excess = np.abs(got - want) - (atol + rtol * np.abs(want.astype("f8")))
        print(f"output {i}: max abs err {float(np.abs(got - want).max()):.4g} (max|MXNet| "
              f"{float(np.abs(want).max()):.4g}); within atol {atol:.3g} + rtol {rtol:g}: "
              f"{bool((excess <= 0).all())}")
    worst_local = sorted((r for r in rows if r["local"] is not None),
                         key=lambda r: -r["local"])[:limit]
    print("| node | op | shape | max|MXNet| | prop err | local err |\n|---|---|---|---:|---:|---:|")
    last = 0.0
    for r in rows:        # the propagated error's jumps: where it first grows past threshold
        if r["prop"] > max(threshold, 10 * last) or r in worst_local:
            local = "-" if r["local"] is None else f"{r['local']:.3g}"
            print(f"| {r['node']} | {r['op']} | {r['shape']} | {r['scale']:.4g} | "
                  f"{r['prop']:.3g} | {local} |")
        last = max(last, r["prop"])
    print("\nworst local errors:")
    for r in worst_local:
        print(f"  {r['node']} ({r['op']}, {r['shape']}): local {r['local']:.3g}, "
              f"prop {r['prop']:.3g}, scale {r['scale']:.4g}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="MXNet: write every internal output (peers' venv)")
    d.add_argument("dir", type=Path)
    d.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("perturb", help="MXNet: its outputs' move for an input moved by EPS x std")
    s.add_argument("dir", type=Path)
    s.add_argument("--eps", type=float, default=1e-6)
    s.add_argument("--weights", action="store_true", help="move the weights instead")
    s.add_argument("--seed", type=int, default=1, help="the move's random direction")
    n = sub.add_parser("native", help="MXNet: oneDNN off against io.npz (oneDNN on)")
    n.add_argument("dir", type=Path)
    r = sub.add_parser("_run")                 # native's child: MXNet's outputs to --out
    r.add_argument("dir", type=Path)
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="mxc: node-by-node errors against a dump")
    c.add_argument("dir", type=Path)
    c.add_argument("--internals", type=Path, required=True)
    c.add_argument("--threshold", type=float, default=1e-5,
                   help="report the propagated error once it passes this (relative)")
    c.add_argument("--limit", type=int, default=10, help="how many worst local errors")
    c.add_argument("--json", type=Path, help="write every node's row here")
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        import os
        os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
        dump(args.dir, args.out)
    elif args.cmd == "native":
        native(args.dir)
    elif args.cmd == "_run":
        _run_to(args.dir, args.out)
    elif args.cmd == "perturb":
        import os
        os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
        perturb(args.dir, args.eps, args.weights, args.seed)
    else:
        sys.path.insert(0, str(REPO))
        rows = compare(args.dir, args.internals, args.threshold, args.limit)
        if args.json:
            args.json.write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
