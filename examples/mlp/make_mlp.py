"""Regenerate the example MLP checkpoint shipped with mxc.

A Module-API style MLP (FC128-relu-FC64-relu-FC10-SoftmaxOutput) with
deterministic random weights, written in MXNet's own formats by mxc:
``mlp-symbol.json``, ``mlp-0000.params`` and an ``input.npz`` batch.
Run ``python examples/mlp/make_mlp.py`` from the repository root.
"""

from pathlib import Path

import numpy as np

import mxc
from mxc import sym

HERE = Path(__file__).resolve().parent


def build() -> sym.Symbol:
    with sym.NameManager():
        x = sym.var("data")
        x = sym.FullyConnected(x, num_hidden=128, name="fc1")
        x = sym.Activation(x, act_type="relu", name="relu1")
        x = sym.FullyConnected(x, num_hidden=64, name="fc2")
        x = sym.Activation(x, act_type="relu", name="relu2")
        x = sym.FullyConnected(x, num_hidden=10, name="fc3")
        return sym.SoftmaxOutput(x, name="softmax")


def main() -> None:
    net = build()
    rng = np.random.RandomState(0)
    arg_shapes, _, _ = net.infer_shape(data=(4, 784), softmax_label=(4,))
    args = {}
    for name, shape in zip(net.list_arguments(), arg_shapes):
        if name in ("data", "softmax_label"):
            continue
        scale = 1.0 / np.sqrt(shape[-1]) if len(shape) > 1 else 0.1
        args[name] = rng.uniform(-scale, scale, size=shape).astype(np.float32)
    mxc.save_checkpoint(str(HERE / "mlp"), 0, net, args, {})
    data = rng.uniform(0, 1, size=(4, 784)).astype(np.float32)
    np.savez(HERE / "input.npz", data=data)


if __name__ == "__main__":
    main()
