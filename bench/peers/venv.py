"""The peers' virtualenv: ``bench/.venv-peers`` with MXNet 1.9.1 and ONNX Runtime.

Created on first use with ``python3 -m venv`` (the interpreter running the
harness, or ``--peers-python``) and ``pip install`` of :data:`REQUIREMENTS`.
MXNet 1.9.1's wheel is ``py3-none-manylinux2014_x86_64`` (no CPython ABI tag),
so it installs into any Python 3; ``numpy<1.24`` keeps ``np.bool``/``np.object``
that MXNet 1.9.1 still uses (numpy 1.23.5 has CPython 3.11 wheels); ``onnx
1.14.1`` with ``protobuf<4`` is the combination MXNet's ONNX exporter works
with.  mxc itself never depends on any of these.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
VENV = BENCH / ".venv-peers"
REQUIREMENTS = ["mxnet==1.9.1", "numpy<1.24", "onnx==1.14.1", "protobuf<4", "onnxruntime"]
_MARKER = "mxc-peers.json"
_PROBE = ("import json, mxnet, numpy, onnx, onnxruntime, google.protobuf as pb; "
          "print(json.dumps({'mxnet': mxnet.__version__, 'numpy': numpy.__version__, "
          "'onnx': onnx.__version__, 'onnxruntime': onnxruntime.__version__, "
          "'protobuf': pb.__version__}))")


def venv_python(venv: Path = VENV) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def probe(python: Path) -> dict | None:
    """The peers' package versions in *python*'s environment, or None if they do not import."""
    try:
        out = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                             timeout=120, env=_quiet_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def _quiet_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the venv must not see the harness's packages
    return env


def ensure(venv: Path = VENV, base_python: str | None = None, log=print) -> tuple[Path, dict]:
    """The venv's python and the peers' versions; creates/installs the venv when needed.

    Raises ``RuntimeError`` (with pip's tail) when the install fails.
    """
    python = venv_python(venv)
    marker = venv / _MARKER
    if python.exists() and marker.exists():
        try:
            recorded = json.loads(marker.read_text())
        except ValueError:
            recorded = {}
        if recorded.get("requirements") == REQUIREMENTS:
            versions = probe(python)
            if versions:
                return python, versions
    if not python.exists():
        base = base_python or sys.executable
        log(f"[peers] creating {venv} with {base} -m venv")
        _run([base, "-m", "venv", str(venv)])
    log(f"[peers] pip install {' '.join(REQUIREMENTS)} (first use only)")
    _run([str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS])
    versions = probe(python)
    if not versions:
        raise RuntimeError(f"the peers' packages do not import in {python} after installing "
                           f"{REQUIREMENTS}")
    marker.write_text(json.dumps({"requirements": REQUIREMENTS, "versions": versions}, indent=1))
    return python, versions


def _run(cmd: list[str]) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, env=_quiet_env())
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {out.returncode}):\n{tail}")


if __name__ == "__main__":  # python bench/peers/venv.py: create/check the venv
    py, vers = ensure()
    print(py)
    print(json.dumps(vers, indent=1))
