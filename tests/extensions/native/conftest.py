"""Build the corpus's extension libraries once per session (g++), or skip saying why.

``build_extensions("v11")`` runs ``corpus/extensions/build.sh v11 DIR`` into a
per-session directory (or ``$MXC_EXT_BUILD/v11`` when set, reused when it
already holds the libraries) and returns DIR.  The sources are read from the
corpus, never copied into the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

from tests.conftest import corpus_path

LIBS = ("libinit_lib.so", "libgemm_lib.so", "libtransposecsr_lib.so",
        "libtransposerowsp_lib.so", "libpass_lib.so", "libsubgraph_lib.so")
_ROOT = Path(os.environ.get("MXC_EXT_BUILD") or tempfile.mkdtemp(prefix="mxc-ext-"))


@lru_cache(maxsize=None)
def _build(version: str) -> tuple[Path | None, str]:
    corpus = corpus_path()
    script = corpus / "extensions" / "build.sh" if corpus else None
    if script is None or not script.exists():
        return None, "MXNet extension corpus not found (corpus/extensions/build.sh)"
    if shutil.which("g++") is None:
        return None, "no C++ compiler (g++) to build the extension libraries"
    out = _ROOT / version
    if not all((out / name).exists() for name in LIBS):
        out.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["bash", str(script), version, str(out)], capture_output=True,
                           text=True, timeout=900)
        if r.returncode != 0:
            return None, f"build.sh {version} failed: {r.stderr[-500:]}"
    return out, ""


def build_extensions(version: str) -> Path:
    """The directory of the built libraries of lib_api *version*, or skip."""
    out, why = _build(version)
    if out is None:
        pytest.skip(why)
    return out


def golden(version: str, name: str) -> dict:
    """A golden file of the corpus (``goldens/v11/gemm_lib.json``), or skip."""
    corpus = corpus_path()
    path = corpus / "extensions" / "goldens" / version / f"{name}.json" if corpus else None
    if path is None or not path.exists():
        pytest.skip(f"golden {version}/{name} not in the corpus")
    return json.loads(path.read_text())


def flow(doc: dict, name: str) -> dict:
    for f in doc["flows"]:
        if f["name"] == name:
            return f
    raise KeyError(name)


def value(encoded: dict):
    """A golden ``A(ndarray)`` value as a numpy array."""
    import numpy as np
    return np.array(encoded["value"], dtype=encoded["dtype"]).reshape(encoded["shape"])


def example_graphs():
    """test_subgraph.py's two graphs: ``log(exp(a + b))`` and ``log(exp(a))``, MXNet's names."""
    import mxc
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    sym = mxc.sym.log(mxc.sym.exp(mxc.sym.elemwise_add(a, b, name="_plus0"), name="exp0"),
                      name="log0")
    sym2 = mxc.sym.log(mxc.sym.exp(a, name="exp1"), name="log1")
    return sym, sym2


@pytest.fixture(scope="session")
def v11_libs() -> Path:
    return build_extensions("v11")


@pytest.fixture(scope="session")
def v7_libs() -> Path:
    return build_extensions("v7")


@pytest.fixture(autouse=True, scope="module")
def _unload_native_libraries():
    """Leave the registries as the module found them (compiled libraries register names --
    ``my_gemm`` -- that other tests' Python extensions use too)."""
    import mxc
    before = {id(r) for r in mxc.library.loaded()}
    yield
    import gc
    gc.collect()
    for rec in reversed(mxc.library.loaded()):
        if id(rec) not in before and rec.native is not None:
            mxc.library.unload(rec)
