"""Regenerate this fixture with MXNet 1.9.1 + GluonCV 0.10.5 (the peers' venv, issue 40):

    bench/.venv-peers/bin/python tests/models/data/zoo_blocks/make_fixture.py

A tiny network of the blocks issue 40 suspected in senet_154 and resnest50, built
from GluonCV's own classes: a ceil-mode max pool, GluonCV's ``SEBlock`` (grouped
convolution, squeeze-excitation sigmoid gate, ``avg_down``: a ceil-mode average pool
with ``count_include_pad=False`` on an odd map), GluonCV's ``SplitAttentionConv``
(radix 2, cardinality 2: the rSoftMax reshape/swapaxes/softmax), a dilated
convolution, global pooling and a dense layer.  Weights are bench/peers/zoo_export.py's
synthetic ones, calibrated by bench/peers/zoo_calibrate.py.  ``hybridize()``, one
forward pass, ``export()``; then MXNet's ``sym.get_internals()`` bound on the stored
input gives every internal output, saved in ``io.npz`` as ``int__<name>`` beside
``in__data`` and ``out__0``.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3] / "bench" / "peers"))

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from gluoncv.model_zoo.senet import SEBlock  # noqa: E402
from gluoncv.nn.splat import SplitAttentionConv  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

import zoo_export  # noqa: E402
from zoo_calibrate import calibrate  # noqa: E402


def build():
    net = nn.HybridSequential(prefix="zb_")
    with net.name_scope():
        net.add(nn.Conv2D(16, 3, padding=1, use_bias=False), nn.BatchNorm(),
                nn.Activation("relu"),
                nn.MaxPool2D(3, 2, ceil_mode=True),                        # 14 -> 7
                SEBlock(16, 4, 16, 2, downsample=True, avg_down=True),     # 7 -> 4, 64 ch
                # ResNeSt's padded ceil-mode average pools: the padding is not counted
                nn.AvgPool2D(3, 1, padding=1, ceil_mode=True, count_include_pad=False),
                nn.AvgPool2D(3, 1, padding=1),                              # ... and counted
                SplitAttentionConv(16, 3, padding=(1, 1), groups=2, radix=2, in_channels=64),
                nn.Conv2D(16, 3, padding=2, dilation=2), nn.Activation("relu"),
                nn.GlobalAvgPool2D(), nn.Dense(10))
    return net


def main():
    net = build()
    net.initialize(mx.init.Zero())
    shape = (1, 3, 14, 14)
    x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, shape).astype("f4"))
    net(x)
    for name, param in net.collect_params().items():
        if not zoo_export.fixed_affine(name, param.grad_req):
            param.set_data(mx.nd.array(zoo_export._synthetic(name, param, 0).astype(param.dtype)))
    cal = np.random.RandomState(1).uniform(-1, 1, (4,) + shape[1:]).astype("f4")
    calibrate(net, [mx.nd.array(cal)])
    net.hybridize()
    out = net(x).asnumpy()
    net.export(str(HERE / "net"), epoch=0)
    (HERE / "net-symbol.json").replace(HERE / "symbol.json")
    (HERE / "net-0000.params").replace(HERE / "model.params")
    sym = mx.sym.load(str(HERE / "symbol.json")).get_internals()
    params = mx.nd.load(str(HERE / "model.params"))
    args = {k[4:]: v for k, v in params.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in params.items() if k.startswith("aux:")}
    args["data"] = x
    ex = sym.bind(mx.cpu(), args={k: args[k] for k in sym.list_arguments()},
                  aux_states={k: aux[k] for k in sym.list_auxiliary_states()}, grad_req="null")
    internals = {}
    for name, v in zip(sym.list_outputs(), ex.forward(is_train=False)):
        if name.endswith("_output") and name not in internals:
            internals[name] = v.asnumpy()
    np.savez_compressed(HERE / "io.npz", in__data=x.asnumpy(), out__0=out,
                        **{f"int__{k}": v for k, v in internals.items()})
    print(json.dumps({"mxnet": mx.__version__, "internals": len(internals),
                      "out_scale": float(np.abs(out).max())}))


if __name__ == "__main__":
    main()
