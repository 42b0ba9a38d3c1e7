"""Shared helpers of the runtime tests (compiled models cached for the session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
_CACHE: dict = {}


def mlp_input() -> np.ndarray:
    return np.load(MLP / "input.npz")["data"]


def mlp_reference(x: np.ndarray) -> np.ndarray:
    import mxc
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    return sym.bind(args={**args, "data": x}, aux_states=aux).forward()[0]


def compiled_mlp(tmp_path_factory, target: str = "llvm"):
    """(CompiledModel, artifact path) of the example MLP, compiled once per session."""
    key = ("mlp", target)
    if key not in _CACHE:
        import mxc
        sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
        model = mxc.compile(sym, (args, aux), {"data": (4, 784)}, target=target)
        path = tmp_path_factory.mktemp(f"mlp-{target}") / "mlp.mxc"
        model.save(path)
        _CACHE[key] = (model, path)
    return _CACHE[key]


def compiled_custom(tmp_path_factory):
    """A model with a host node between two regions: FC -> relu -> my_scale (Python) -> FC."""
    if "custom" not in _CACHE:
        import mxc
        from mxc import sym as S
        register_scale_op()
        x = S.var("data")
        y = S.relu(S.FullyConnected(x, num_hidden=8, name="fc1"), name="relu1")
        y = S.rt_test_scale(y, k=3.0, name="scale")
        y = S.softmax(S.FullyConnected(y, num_hidden=4, name="fc2"), name="prob")
        rng = np.random.RandomState(0)
        params = {"fc1_weight": rng.randn(8, 5).astype("f"), "fc1_bias": rng.randn(8).astype("f"),
                  "fc2_weight": rng.randn(4, 8).astype("f"), "fc2_bias": rng.randn(4).astype("f")}
        model = mxc.compile(y, params, {"data": (2, 5)})
        path = tmp_path_factory.mktemp("custom") / "custom.mxc"
        model.save(path)
        _CACHE["custom"] = (y, params, model, path)
    return _CACHE["custom"]


SCALE_OP_SOURCE = '''
import mxc


@mxc.register_custom_op("rt_test_scale")
class RtTestScale(mxc.CustomOp):
    """y = k * x"""

    def parse_attrs(self, attrs):
        return 1, 1

    def infer_shape(self, attrs, in_shapes):
        return in_shapes, [in_shapes[0]]

    def forward(self, attrs, inputs, outputs):
        return [inputs[0] * float(attrs.get("k", "1"))]
'''


def register_scale_op() -> None:
    from mxc.compiler.ops.registry import has_op
    if not has_op("rt_test_scale"):
        exec(compile(SCALE_OP_SOURCE, "rt_test_scale_op", "exec"), {"__name__": "rt_test_ops"})


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return e


def run_python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run *code* in a fresh interpreter (repository on the path)."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd or REPO, env=env(),
                          capture_output=True, text=True)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxc.cli", *args], cwd=cwd or REPO, env=env(),
                          capture_output=True, text=True)
