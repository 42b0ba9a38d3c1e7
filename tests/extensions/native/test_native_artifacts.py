"""Models with library operators compile to ``.mxc``; the artifact names the library.

The artifact runs in a fresh process only when the same library file (by
sha256) is given explicitly; otherwise the error names the library and the
sha256 it needs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import skip_where_simulated  # noqa: E402

import mxc
from mxc.errors import ArtifactError
from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    build_extensions, _unload_native_libraries)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    libs = build_extensions("v11")
    lib = libs / "libgemm_lib.so"
    mxc.library.load(lib, verbose=False)
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    y = mxc.sym.state_gemm(mxc.sym.relu(mxc.sym.my_gemm(a, b, name="my_gemm0")), b, test_kw=3,
                           name="state_gemm0")
    model = mxc.compile(y, None, {"a": (2, 4), "b": (4, 4)})
    path = tmp_path_factory.mktemp("art") / "gemm.mxc"
    model.save(path)
    return path, lib, model


def inputs():
    rs = np.random.RandomState(0)
    return rs.rand(2, 4).astype(np.float32), rs.rand(4, 4).astype(np.float32)


def test_manifest_names_the_library_with_its_sha256(artifact):
    path, lib, model = artifact
    entry = model.manifest["libraries"][0]
    assert entry["name"] == "libgemm_lib.so" and entry["lib_api_version"] == 11
    assert entry["sha256"] == mxc.library.native.sha256_of(lib)
    assert sorted(entry["operators"]) == ["my_gemm", "state_gemm"]
    assert set(model.host_nodes) == {"my_gemm0", "state_gemm0"}
    a, b = inputs()
    np.testing.assert_allclose(model.run({"a": a, "b": b})[0], np.maximum(a @ b, 0) @ b,
                               rtol=1e-5)


def _fresh(script: str, *argv) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-c", script, *map(str, argv)], capture_output=True,
                          text=True, env=env, timeout=300)


RUN = """
import sys, numpy as np, mxc
from mxc.errors import ArtifactError
rs = np.random.RandomState(0)
a = rs.rand(2, 4).astype(np.float32); b = rs.rand(4, 4).astype(np.float32)
libs = sys.argv[2:]
try:
    s = mxc.runtime.load(sys.argv[1], libraries=libs)
except ArtifactError as e:
    print("ArtifactError:", e); raise SystemExit(3)
np.save(sys.argv[1] + ".out.npy", s.run({"a": a, "b": b})[0])
"""


def test_reloads_in_a_fresh_process_with_the_library(artifact):
    path, lib, _ = artifact
    r = _fresh(RUN, path, lib)
    assert r.returncode == 0, r.stderr + r.stdout
    a, b = inputs()
    np.testing.assert_allclose(np.load(str(path) + ".out.npy"), np.maximum(a @ b, 0) @ b,
                               rtol=1e-5)


def test_missing_library_names_it_and_its_sha256(artifact):
    path, lib, model = artifact
    r = _fresh(RUN, path)
    assert r.returncode == 3
    assert "libgemm_lib.so" in r.stdout and model.manifest["libraries"][0]["sha256"] in r.stdout


def test_a_different_library_file_is_refused(artifact):
    path, _, model = artifact
    other = build_extensions("v10") / "libgemm_lib.so"
    with pytest.raises(ArtifactError, match="was compiled with sha256 "
                       + model.manifest["libraries"][0]["sha256"]):
        mxc.runtime.load(path, libraries=[other])


def test_cli_run_with_load(artifact, tmp_path):
    path, lib, _ = artifact
    a, b = inputs()
    np.savez(tmp_path / "in.npz", a=a, b=b)
    env = {**os.environ, "PYTHONPATH": REPO}
    cmd = [sys.executable, "-m", "mxc", "run", str(path), "-i", str(tmp_path / "in.npz"),
           "-o", str(tmp_path / "out.npz")]
    r = subprocess.run(cmd + ["--load", str(lib)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["out0"], np.maximum(a @ b, 0) @ b, rtol=1e-5)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "libgemm_lib.so" in r.stderr


def test_cli_compile_with_load(tmp_path, simulated_host):
    skip_where_simulated(simulated_host, "`mxc compile`")
    lib = build_extensions("v11") / "libgemm_lib.so"
    mxc.library.load(lib, verbose=False)
    c = mxc.sym.my_gemm(mxc.sym.var("a"), mxc.sym.var("b"))
    c.save(tmp_path / "gemm-symbol.json")
    env = {**os.environ, "PYTHONPATH": REPO}
    out = tmp_path / "gemm.mxc"
    cmd = [sys.executable, "-m", "mxc", "compile", str(tmp_path / "gemm-symbol.json"),
           "--shape", "a=2,3", "--shape", "b=3,2", "-o", str(out), "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode != 0 and "my_gemm" in r.stderr       # unknown op without the library
    r = subprocess.run(cmd + ["--load", str(lib)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    manifest = mxc.runtime.read_manifest(out)
    assert manifest["libraries"][0]["sha256"] == mxc.library.native.sha256_of(lib)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(mxc.runtime.load(out, libraries=[lib]).run({"a": a, "b": b})[0],
                                  a @ b)


def test_partitioned_model_runs_the_librarys_subgraph_op(tmp_path, capfd):
    """A region made by the library's partitioner compiles to a host node running the
    library's stateful subgraph op (nested graph and attributes travel in the artifact)."""
    lib = build_extensions("v11") / "libsubgraph_lib.so"
    mxc.library.load(lib, verbose=False)
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    sym = mxc.sym.log(mxc.sym.exp(mxc.sym.elemwise_add(a, b)))
    args = {"a": np.full((3, 2), 0.5, np.float32), "b": np.ones((3, 2), np.float32)}
    part = sym.optimize_for("myProp", args)
    model = mxc.compile(part, None, {"a": (3, 2), "b": (3, 2)}, passes="")
    assert model.manifest["libraries"][0]["operators"] == ["_custom_subgraph_op"]
    path = model.save(tmp_path / "part.mxc")
    capfd.readouterr()
    out = mxc.runtime.load(path, libraries=[lib]).run(args)[0]
    np.testing.assert_allclose(out, np.log(np.exp(args["a"] + args["b"])), rtol=1e-6)
    printed = capfd.readouterr().out
    assert "subgraphOp attributes: myKey ==> myVal" in printed
    assert "Info: subgraph is: " in printed
