"""ONNX Runtime's habits beyond ``InferenceSession(path)`` (issue 22, item 11).

Original failures: ``mxc.runtime.get_available_providers`` and ``SessionOptions``
did not exist, and an ORT ``SessionOptions`` passed in was ignored without a word
(``intra_op_num_threads`` had no effect); ``sess.get_modelmeta()`` did not exist;
``InferenceSession(bytes)`` was refused.  Oracles: TVM's own ``runtime.NumThreads``
in a fresh process, the artifact's manifest, the path-loaded session's outputs,
and ``relu(a @ b)`` for a custom operator.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc  # noqa: E402
import mxc.runtime  # noqa: E402
from mxc.errors import ArtifactError, MxcError  # noqa: E402
from mxc.runtime import threads  # noqa: E402

from runtime_helpers import REPO, compiled_mlp, mlp_input  # noqa: E402


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    return compiled_mlp(tmp_path_factory)[1]


def test_available_providers():
    got = mxc.runtime.get_available_providers()
    assert got[-1] == "CPUExecutionProvider"
    assert ("CUDAExecutionProvider" in got) == mxc.runtime.has_cuda()
    assert got == (["CUDAExecutionProvider"] if mxc.runtime.has_cuda() else []) + \
        ["CPUExecutionProvider"]


_PROBE = """
import json, sys
import numpy as np
import tvm_ffi
import mxc.runtime
from mxc.runtime.executors import EXECUTORS
so = mxc.runtime.SessionOptions()
so.intra_op_num_threads = int(sys.argv[2])
s = mxc.runtime.InferenceSession(sys.argv[1], so)
s.run(None, {"data": np.zeros((4, 784), "float32")})
# compiled code runs on mxc's executor threads: ask TVM's pool of the one that serves the session
pool = EXECUTORS.call(s.threads, tvm_ffi.get_global_func("runtime.NumThreads"))
print(json.dumps({"session": s.threads, "tvm": pool}))
"""


@pytest.mark.parametrize("intra, want", [(1, 1), (0, 2)])
def test_intra_op_num_threads_is_applied(mlp_path, intra, want):
    env = {k: v for k, v in os.environ.items() if k not in threads.POOL_VARIABLES}
    env["TVM_NUM_THREADS"] = "2"       # a pool of 2 whatever this machine has
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", _PROBE, str(mlp_path), str(intra)], env=env,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"session": want, "tvm": want}


def test_options_mxc_cannot_honour_are_refused(mlp_path):
    so = mxc.runtime.SessionOptions()
    so.graph_optimization_level = mxc.runtime.GraphOptimizationLevel.ORT_ENABLE_ALL  # default
    so.execution_mode = mxc.runtime.ExecutionMode.ORT_SEQUENTIAL                      # default
    assert mxc.runtime.InferenceSession(str(mlp_path), so).threads >= 1
    for name, value, says in (
            ("graph_optimization_level", mxc.runtime.GraphOptimizationLevel.ORT_DISABLE_ALL,
             "--passes ''"),
            ("enable_profiling", True, "profile=True"),
            ("inter_op_num_threads", 4, "intra_op_num_threads"),
            ("intra_op_num_threads", -1, "integer >= 0")):
        so = mxc.runtime.SessionOptions()
        setattr(so, name, value)
        with pytest.raises(MxcError, match=f"SessionOptions.{name}.*{says}"):
            mxc.runtime.InferenceSession(str(mlp_path), so)
    with pytest.raises(AttributeError, match="no option 'intra_op_threads'"):
        mxc.runtime.SessionOptions().intra_op_threads = 2          # a typo is not ignored
    with pytest.raises(MxcError, match="disabled_optimizers not supported"):
        mxc.runtime.InferenceSession(str(mlp_path), disabled_optimizers=["x"])


MY_OPS = str(REPO / "examples" / "extensions" / "my_ops.py")


_CUSTOM_PROBE = """
import json, sys
import numpy as np
import mxc.runtime
from mxc.errors import ArtifactError
art, lib = sys.argv[1], sys.argv[2]
try:
    mxc.runtime.InferenceSession(art)
    refused = ""
except ArtifactError as exc:
    refused = str(exc)
so = mxc.runtime.SessionOptions()
so.register_custom_ops_library(lib)
a, b = np.ones((2, 3), "float32"), np.arange(12, dtype="float32").reshape(3, 4) - 6
out = mxc.runtime.InferenceSession(art, so).run(None, {"a": a, "b": b})[0]
print(json.dumps({"refused": refused, "out": out.tolist()}))
"""


def test_register_custom_ops_library_loads_the_artifacts_library(tmp_path):
    """In a fresh process (this one has the operator registered already)."""
    art = tmp_path / "gemm.mxc"
    build = ("import sys, mxc, mxc.library, mxc.symbol as S\n"
             "mxc.library.load(sys.argv[1], verbose=False)\n"
             "y = S.create('relu', S.create('my_gemm', S.var('a'), S.var('b')))\n"
             "mxc.compile(y, {}, {'a': (2, 3), 'b': (3, 4)}).save(sys.argv[2])\n")
    r = subprocess.run([sys.executable, "-c", build, MY_OPS, str(art)], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", _CUSTOM_PROBE, str(art), MY_OPS], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert "my_gemm" in got["refused"] and "not registered" in got["refused"]   # without it
    a, b = np.ones((2, 3), "float32"), np.arange(12, dtype="float32").reshape(3, 4) - 6
    np.testing.assert_allclose(got["out"], np.maximum(a @ b, 0))


def test_get_modelmeta_comes_from_the_manifest(mlp_path):
    manifest = mxc.runtime.read_manifest(mlp_path)
    meta = mxc.runtime.InferenceSession(str(mlp_path)).get_modelmeta()
    assert meta.producer_name == f"mxc {mxc.__version__}" == f"mxc {manifest['mxc_version']}"
    assert meta.graph_name == (manifest["name"] or "")   # mxc compile: the symbol file's name
    assert meta.version == manifest["format_version"] == mxc.runtime.FORMAT_VERSION
    custom = meta.custom_metadata_map
    assert custom["tvm_version"] == manifest["tvm_version"]
    assert custom["created"] == manifest["created"]
    assert custom["pipeline"] == manifest["pipeline"]
    assert all(isinstance(v, str) for v in custom.values())


def _leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "mxc-bytes-*")))


def test_bytes_load_and_are_verified_like_a_file(mlp_path):
    before = _leftovers()
    data = mlp_path.read_bytes()
    x = mlp_input()
    from_bytes = mxc.runtime.InferenceSession(data, providers=["CPUExecutionProvider"])
    from_path = mxc.runtime.load(mlp_path)
    np.testing.assert_array_equal(from_bytes.run(None, {"data": x})[0],
                                  from_path.run({"data": x})[0])
    assert from_bytes.get_modelmeta() == from_path.get_modelmeta()
    # one byte changed inside the library: refused by its checksum, as the file would be
    import io
    import zipfile
    member = zipfile.ZipFile(io.BytesIO(data)).getinfo("lib.so")
    lib_at = member.header_offset + 30 + len(member.filename) + len(member.extra) + 100
    bad = bytearray(data)
    bad[lib_at] ^= 0xFF
    (mlp_path.parent / "bad.mxc").write_bytes(bad)
    with pytest.raises(ArtifactError) as from_file:
        mxc.runtime.load(mlp_path.parent / "bad.mxc")
    with pytest.raises(ArtifactError) as from_mem:
        mxc.runtime.InferenceSession(bytes(bad))
    assert str(from_mem.value) == str(from_file.value).replace(
        str(mlp_path.parent / "bad.mxc"), "<bytes>")
    with pytest.raises(ArtifactError, match="<bytes>: .*not an mxc artifact|<bytes>: empty"):
        mxc.runtime.InferenceSession(b"")
    with pytest.raises(ArtifactError, match="compiled for llvm"):
        mxc.runtime.InferenceSession(data, providers=["CUDAExecutionProvider"])
    assert _leftovers() == before                 # no temporary file stays behind
