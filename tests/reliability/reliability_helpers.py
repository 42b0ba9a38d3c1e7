"""Shared helpers of the reliability tests: one compiled MLP per session, artifact forging."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp"
_CACHE: dict = {}


def mlp_artifact(tmp_path_factory, *, bind_params: bool = True) -> Path:
    """The example MLP compiled once per session (weights compiled in, or in params.npz)."""
    key = ("mlp", bind_params)
    if key not in _CACHE:
        import mxc
        sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
        model = mxc.compile(sym, (args, aux), {"data": (4, 784)}, bind_params=bind_params)
        path = tmp_path_factory.mktemp("mlp") / f"mlp-{int(bind_params)}.mxc"
        model.save(path)
        _CACHE[key] = (model, path)
    return _CACHE[key][1]


def mlp_model(tmp_path_factory):
    mlp_artifact(tmp_path_factory)
    return _CACHE[("mlp", True)][0]


def mlp_input() -> np.ndarray:
    return np.load(MLP / "input.npz")["data"]


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def forge(dst: Path, data: dict[str, bytes], *, manifest=None, graph=None,
          recompute: bool = True) -> Path:
    """Write *data* (members) to *dst* as an attacker would: the manifest's checksums are
    recomputed to match (*recompute*), after *manifest(man)* / *graph(g)* edits."""
    data = dict(data)
    if graph is not None:
        g = json.loads(data["graph.json"])
        graph(g)
        data["graph.json"] = json.dumps(g).encode()
    man = json.loads(data.pop("manifest.json"))
    data.pop("manifest.sig", None)
    if recompute:
        man["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                          for n, d in data.items()}
    if manifest is not None:
        manifest(man)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("manifest.json", json.dumps(man))
        for n, d in data.items():
            zf.writestr(n, d)
    return dst


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def run_python(code: str, *, timeout: float = 300, preexec=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO, preexec_fn=preexec)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mxc", *args], capture_output=True,
                          timeout=timeout, env=env, cwd=REPO)
