"""Export a Gluon model-zoo network in the corpus format (run by the peers' venv python).

    python zoo_export.py resnet50_v2 --out DIR [--seed 0]

The MXNet corpus only holds small models; the benchmark's larger ones
(resnet50_v2, mobilenetv2_1.0, densenet121, inceptionv3) are made here the
way the corpus made its own: ``vision.get_model(name, pretrained=False)``
(nothing is downloaded), deterministic synthetic weights, ``hybridize()``,
one forward pass, ``export``.  The weights follow the corpus README's recipe
in spirit -- He-scaled convolution/dense weights, BatchNorm statistics that
are not an identity -- so activations keep a sane range through 100+ layers.

DIR receives ``symbol.json``, ``model.params``, ``io.npz`` (``in__data`` and
MXNet's own outputs ``out__0``...: the reference mxc is checked against) and
``meta.json`` (inputs, tolerances, MXNet version).  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zlib
from pathlib import Path

#: the Gluon model-zoo names, and their input side (Inception v3 takes 299x299)
SIDES = {"inceptionv3": 299}


def _synthetic(name: str, param, rng_seed: int):
    """Deterministic values for one parameter, seeded by its name (stable across runs)."""
    import numpy as np
    rng = np.random.RandomState((zlib.crc32(name.encode()) + rng_seed) % (2 ** 32))
    shape = param.shape
    if name.endswith("running_var"):
        return rng.uniform(0.5, 2.0, shape)
    if name.endswith("running_mean"):
        return rng.normal(0.0, 0.2, shape)
    if name.endswith("gamma"):
        return rng.uniform(0.7, 1.3, shape)
    if name.endswith(("beta", "bias")):
        return rng.normal(0.0, 0.05, shape)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)


def fixed_affine(name: str, grad_req: str) -> bool:
    """Whether *name* is a BatchNorm affine parameter training never changes
    (``BatchNorm(scale=False, center=False)``: resnet*_v2's input normalisation), which
    keeps its initial 1 (gamma) or 0 (beta) instead of a synthetic value.  MXNet ignores
    such a gamma (``fix_gamma``) but its ONNX exporter writes the stored one, so a random
    gamma made ORT and OpenVINO disagree with MXNet (max |diff| 66 on resnet50_v2)."""
    return grad_req == "null" and name.endswith(("gamma", "beta"))


def export(model: str, out: Path, seed: int = 0) -> dict:
    import mxnet as mx
    import numpy as np
    from mxnet.gluon.model_zoo import vision

    net = vision.get_model(model, pretrained=False)
    net.initialize(mx.init.Zero())
    side = SIDES.get(model, 224)
    data = np.random.RandomState(seed).uniform(-1.0, 1.0, (1, 3, side, side)).astype(np.float32)
    net(mx.nd.array(data))                       # materialise deferred shapes
    for name, param in net.collect_params().items():
        if fixed_affine(name, param.grad_req):
            continue
        param.set_data(mx.nd.array(_synthetic(name, param, seed).astype(param.dtype)))
    net.hybridize(static_alloc=False)
    outs = net(mx.nd.array(data))
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    net.export(str(tmp / "net"), epoch=0)
    (tmp / "net-symbol.json").rename(tmp / "symbol.json")
    (tmp / "net-0000.params").rename(tmp / "model.params")
    ref = [o.asnumpy() for o in outs]
    np.savez(tmp / "io.npz", in__data=data, **{f"out__{i}": r for i, r in enumerate(ref)})
    scale = max(float(np.abs(r).max()) for r in ref)
    meta = {"name": model, "mxnet_version": mx.__version__,
            "source": f"mxnet.gluon.model_zoo.vision.get_model({model!r}, pretrained=False); "
                      f"synthetic deterministic weights (seed {seed}); hybridize(); export()",
            "inputs": {"data": {"shape": list(data.shape), "dtype": "float32"}},
            # float32 through 50-120 layers: the corpus's own tolerances for resnet18_v1
            "rtol": 1e-3, "atol": 1e-4 * max(scale, 1.0),
            "mxnet_exec": {"engine": "default", "subgraph_backend": "NONE", "ctx": "cpu"}}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return {"model": model, "dir": str(out), "output_shapes": [list(r.shape) for r in ref]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import os
    os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")  # the reference: no oneDNN fusion
    print(json.dumps(export(args.model, args.out, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
