"""Control flow compiled as a host loop over compiled bodies, against the alternatives.

The wave-2 ``cf_foreach_rnn`` model (a tanh RNN cell under ``_foreach``, then
Dense on the final state) is run at sequence length ``--steps`` and batch
``--batch`` three ways, all from the same weights:

* ``foreach, compiled bodies``: ``mxc.compile`` + ``mxc.runtime`` (what mxc
  ships: the loop is a host step, the cell is a compiled function);
* ``foreach, reference``: the reference backend (numpy loop, numpy body);
* ``RNN op, compiled``: the same network written with the fused ``RNN`` op
  (mode ``rnn_tanh``), which the TVM backend unrolls into ONE Relax function
  -- what compiling the loop into Relax itself would give at best.

Reported: median latency (ms) and the per-step cost of the host loop
(``(foreach compiled - RNN compiled) / steps``).

    python bench/bench_control_flow.py [--steps 6,100] [--batch 2] [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.timing import measure, percentile  # noqa: E402

MODEL = REPO.parent / "shared" / "corpus" / "wave2" / "models" / "cf_foreach_rnn"


def _rnn_op_twin(hidden: int):
    """The cf_foreach_rnn network with the fused RNN op (same parameter names)."""
    from mxc import sym as S
    p = "fe0_rnn0_"
    flat = [S.Reshape(S.var(p + n), shape=(-1,)) for n in
            ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
    params = S._rnn_param_concat(*flat, num_args=4, dim=0)
    rnn = S.RNN(S.var("data"), params, S._zeros(shape=(1, 0, hidden)), state_size=hidden,
                num_layers=1, mode="rnn_tanh", state_outputs=True)
    final = S.Reshape(rnn[1], shape=(-1, hidden))
    return S.FullyConnected(final, S.var("fe0_dense0_weight"), S.var("fe0_dense0_bias"),
                            num_hidden=4)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="6,100")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)

    import mxc
    import mxc.runtime
    sym = mxc.sym.load(MODEL / "symbol.json")
    params = {k[4:]: v for k, v in mxc.nd.load(MODEL / "model.params").items()}
    hidden = params["fe0_rnn0_h2h_weight"].shape[0]
    twin = _rnn_op_twin(hidden)
    tmp = Path(tempfile.mkdtemp())
    print(f"{'steps':>6} {'batch':>6} {'foreach compiled':>17} {'foreach reference':>18} "
          f"{'RNN op compiled':>16} {'host loop /step':>16}  (ms; median of {args.runs})")
    for steps in (int(s) for s in args.steps.split(",")):
        x = np.random.default_rng(0).uniform(-1, 1, (steps, args.batch, 12)).astype(np.float32)
        shapes = {"data": x.shape}
        fe = mxc.runtime.load(mxc.compile(sym, params, shapes=shapes).save(tmp / "fe.mxc"))
        op = mxc.runtime.load(mxc.compile(twin, params, shapes=shapes).save(tmp / "op.mxc"))
        exe = sym.bind(args={**params, "data": x})
        want = exe.forward()[0]
        for sess in (fe, op):
            np.testing.assert_allclose(sess.run({"data": x})[0], want, rtol=1e-4, atol=1e-5)
        runs = {"fe": lambda: fe.run({"data": x}), "ref": lambda: exe.forward(),
                "op": lambda: op.run({"data": x})}
        med = {k: percentile(measure(fn, warmup=10, runs=args.runs), 50) * 1e3
               for k, fn in runs.items()}
        print(f"{steps:>6} {args.batch:>6} {med['fe']:>17.3f} {med['ref']:>18.3f} "
              f"{med['op']:>16.3f} {(med['fe'] - med['op']) / steps:>16.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
