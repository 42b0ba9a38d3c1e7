"""The .mxc artifact: layout, verification before loading, atomic writes, CLI, lean imports."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc
import mxc.runtime as rt
from mxc.cli import main
from mxc.errors import ArtifactError
from mxc.runtime import artifact as art
from runtime_helpers import (MLP, REPO, compiled_mlp, mlp_input, mlp_reference, run_cli,
                             run_python)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return compiled_mlp(tmp_path_factory)


@pytest.fixture
def good(mlp, tmp_path):
    """A private copy of the MLP artifact a test may damage."""
    path = tmp_path / "mlp.mxc"
    shutil.copy(mlp[1], path)
    return path


def rewrite(src: Path, dst: Path, *, manifest=None, members=None, fix_checksums=True) -> Path:
    """Re-zip *src* with an edited manifest / replaced members (checksums kept valid or not)."""
    with zipfile.ZipFile(src) as zf:
        data = {n: zf.read(n) for n in zf.namelist()}
    man = json.loads(data.pop(art.MANIFEST))
    data.update(members or {})
    if fix_checksums:
        man["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                          for n, d in data.items()}
    if manifest:
        manifest(man)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr(art.MANIFEST, json.dumps(man))
        for n, d in data.items():
            zf.writestr(n, d)
    return dst


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------
def test_layout_and_manifest(mlp):
    model, path = mlp
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert names[0] == "manifest.json" and set(names) == {"manifest.json", "graph.json",
                                                              "lib.so"}
        assert zf.comment == b"mxc-artifact 1"
        man = json.loads(zf.read("manifest.json"))
        for name, meta in man["members"].items():
            assert hashlib.sha256(zf.read(name)).hexdigest() == meta["sha256"]
        graph = json.loads(zf.read("graph.json"))
    assert man["format"] == "mxc-artifact" and man["format_version"] == rt.FORMAT_VERSION
    assert man["mxc_version"] == mxc.__version__ and man["tvm_version"].startswith("0.27")
    assert man["target"]["kind"] == "llvm" and man["target"]["host"]["arch"] == art.machine_arch()
    assert man["target"]["host"]["features"]
    assert man["inputs"] == [{"name": "data", "shape": [4, 784], "dtype": "float32",
                              "optional": False}]
    assert man["outputs"] == [{"name": "softmax_output", "shape": [4, 10], "dtype": "float32",
                               "data_dependent_shape": False}]
    assert [r["function"] for r in man["regions"]] == ["region0"] and man["host_nodes"] == []
    assert man["pipeline"] == "remove-dropout,inline-fused,simplify,fold-batchnorm,dce"
    assert graph["steps"][0]["kind"] == "region" and graph["ignored_inputs"] == ["softmax_label"]
    assert rt.is_artifact(path) and not rt.is_artifact(MLP / "mlp-symbol.json")
    assert rt.read_manifest(path)["members"] == man["members"]


def test_unbound_params_are_stored_in_the_artifact(tmp_path):
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    model = mxc.compile(sym, (args, aux), {"data": (4, 784)}, passes="", bind_params=False)
    path = model.save(tmp_path / "unbound.mxc")
    with zipfile.ZipFile(path) as zf:
        with np.load(io.BytesIO(zf.read("params.npz"))) as npz:
            assert set(npz.files) == set(args)
            np.testing.assert_array_equal(npz["fc1_weight"], args["fc1_weight"])
    assert rt.read_manifest(path)["bind_params"] is False
    x = mlp_input()
    np.testing.assert_allclose(rt.load(path).run({"data": x})[0], mlp_reference(x),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# refused files: checked BEFORE any library is loaded
# ---------------------------------------------------------------------------
@pytest.fixture
def no_library_load(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a library was extracted before the artifact was verified")
    monkeypatch.setattr(art, "extract_library", refuse)


def _flip_byte_in(path: Path, member: str) -> None:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = bytearray(path.read_bytes())
    name_len, extra_len = (int.from_bytes(raw[info.header_offset + k:info.header_offset + k + 2],
                                          "little") for k in (26, 28))
    start = info.header_offset + 30 + name_len + extra_len
    raw[start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_corrupt_member_is_refused(good, no_library_load):
    _flip_byte_in(good, "lib.so")
    with pytest.raises(ArtifactError, match=r"lib\.so is corrupt|checksum mismatch for lib\.so"):
        rt.load(good)


def test_checksum_mismatch_is_refused(good, tmp_path, no_library_load):
    bad = rewrite(good, tmp_path / "bad.mxc", members={"graph.json": b'{"steps": []}'},
                  fix_checksums=False)
    # (a changed size is now caught before decompressing, an equal-size change by the checksum)
    with pytest.raises(ArtifactError, match=r"checksum mismatch for graph\.json|member graph\.json: "
                                            r"the zip declares 13 bytes, the manifest \d+"):
        rt.load(bad)


def test_unlisted_member_is_refused(good, tmp_path, no_library_load):
    bad = rewrite(good, tmp_path / "bad.mxc", members={"evil.so": b"x"}, fix_checksums=False)
    with pytest.raises(ArtifactError, match="unexpected member"):
        rt.load(bad)


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_file_is_refused(good, keep, no_library_load):
    data = good.read_bytes()
    good.write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        rt.load(good)


def test_not_an_artifact(tmp_path):
    empty = tmp_path / "empty.mxc"
    empty.write_bytes(b"")
    with pytest.raises(ArtifactError, match="empty file"):
        rt.load(empty)
    with pytest.raises(ArtifactError, match="not an mxc artifact"):
        rt.load(MLP / "mlp-symbol.json")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ArtifactError, match="not an mxc artifact"):
        rt.load(other)


@pytest.mark.parametrize("version, hint", [(99, "newer mxc"), (0, "recompile")])
def test_wrong_format_version_is_refused(good, tmp_path, version, hint, no_library_load):
    bad = rewrite(good, tmp_path / "v.mxc",
                  manifest=lambda m: m.update(format_version=version))
    with pytest.raises(ArtifactError, match=f"format version {version}.*{hint}"):
        rt.load(bad)


def _missing_feature() -> str | None:
    from mxc.runtime.cpu_features import KERNEL_FLAGS, host_cpu
    host = host_cpu()
    if host.arch != "x86_64" or host.flags is None:
        return None
    return next((f for f, flag in KERNEL_FLAGS["x86_64"].items() if flag not in host.flags),
                None)


def test_cpu_features_this_machine_lacks_are_refused(good, tmp_path, no_library_load):
    feature = _missing_feature()
    if feature is None:
        pytest.skip("no x86 feature this CPU lacks (or no /proc/cpuinfo)")

    def edit(m):
        m["target"]["host"]["features"].append(feature)
    bad = rewrite(good, tmp_path / "f.mxc", manifest=edit)
    with pytest.raises(ArtifactError, match=f"using {feature}, which this CPU lacks"):
        rt.load(bad)


def test_other_cpu_architecture_is_refused(good, tmp_path, no_library_load):
    bad = rewrite(good, tmp_path / "a.mxc",
                  manifest=lambda m: m["target"]["host"].update(arch="riscv64"))
    with pytest.raises(ArtifactError, match="compiled for riscv64 CPUs"):
        rt.load(bad)
    bad = rewrite(good, tmp_path / "k.mxc", manifest=lambda m: m["target"].update(kind="metal"))
    with pytest.raises(ArtifactError, match="cannot run target kind 'metal'"):
        rt.load(bad)


@pytest.fixture(scope="module")
def cuda_mlp(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    return compiled_mlp(tmp_path_factory, "cuda")


def test_cuda_artifact(cuda_mlp, no_library_load, monkeypatch):
    """Refused without a GPU (before loading anything); run and checked with one."""
    model, path = cuda_mlp
    man = rt.read_manifest(path)
    assert man["target"]["kind"] == "cuda" and man["target"]["arch"].startswith("sm_")
    if not rt.has_cuda():
        with pytest.raises(ArtifactError, match="no usable CUDA GPU"):
            rt.load(path)
        return
    monkeypatch.undo()
    sess = rt.load(path)
    x = mlp_input()
    outs, prof = sess.run({"data": x}, profile=True)
    np.testing.assert_allclose(outs[0], mlp_reference(x), rtol=1e-4, atol=1e-5)
    assert sess.device == "cuda" and prof.steps[0].kind == "region"


# ---------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------
def _interrupt_after(monkeypatch, n: int) -> None:
    real = art._write_member
    calls = []

    def write(zf, name, data):
        calls.append(name)
        if len(calls) > n:
            raise KeyboardInterrupt
        real(zf, name, data)
    monkeypatch.setattr(art, "_write_member", write)


def test_interrupted_write_leaves_no_file(mlp, tmp_path, monkeypatch):
    model = mlp[0]
    out = tmp_path / "model.mxc"
    _interrupt_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        model.save(out)
    assert list(tmp_path.iterdir()) == []             # neither the file nor a temporary


def test_interrupted_write_keeps_the_previous_file(mlp, tmp_path, monkeypatch):
    model, good = mlp
    out = tmp_path / "model.mxc"
    shutil.copy(good, out)
    before = out.read_bytes()
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        model.save(out)
    assert out.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["model.mxc"]


def test_interrupted_mxc_compile_leaves_no_output(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mlp.mxc"
    _interrupt_after(monkeypatch, 2)
    rc = main(["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
               "--shape", "data=4,784", "-q", "-o", str(out)])
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------
def test_cli_compile_run_inspect(tmp_path, capsys):
    out = tmp_path / "mlp.mxc"
    assert main(["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--shape", "data=4,784", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 compiled region(s), 0 host node(s)" in captured.out
    assert "[1/5] passes" in captured.err and "[4/5] build for llvm" in captured.err
    res = tmp_path / "out.npz"
    assert main(["run", str(out), "--inputs", str(MLP / "input.npz"), "--output", str(res),
                 "--profile"]) == 0
    text = capsys.readouterr().out
    assert "softmax_output: shape (4, 10) dtype float32" in text
    assert "fused_dense" in text and " kernel " in text     # per-kernel profile (tvmc's)
    x = mlp_input()
    np.testing.assert_allclose(np.load(res)["out0"], mlp_reference(x), rtol=1e-5, atol=1e-6)
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "target: " in text and "tvm_subgraph0 -> region0" in text and "lib.so" in text
    assert main(["inspect", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "mxc-artifact"


def test_cli_run_symbol_json_with_tvm_backend(tmp_path, capsys):
    res = tmp_path / "out.npz"
    assert main(["run", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                 "--backend", "tvm", "--inputs", str(MLP / "input.npz"), "-o", str(res)]) == 0
    np.testing.assert_allclose(np.load(res)["out0"], mlp_reference(mlp_input()), rtol=1e-5,
                               atol=1e-6)


def test_cli_default_output_name(tmp_path):
    r = run_cli("compile", str(MLP / "mlp-symbol.json"), "--params",
                str(MLP / "mlp-0000.params"), "--shape", "data=4,784", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "mlp.mxc").exists() and r.stderr == ""


def test_cli_errors_are_one_line_with_the_artifact_exit_code(good, tmp_path):
    good.write_bytes(good.read_bytes()[:1000])
    r = run_cli("run", str(good), "--inputs", str(MLP / "input.npz"), "-o",
                str(tmp_path / "o.npz"))
    assert r.returncode == ArtifactError.exit_code == 8
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mxc run: error: ") and "truncated" in lines[0]
    assert not (tmp_path / "o.npz").exists()
    r = run_cli("compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
                "-q", "-o", str(tmp_path / "x.mxc"))
    # a missing --shape is a usage error (issue 22): the verb's usage, then one error line
    assert r.returncode == 64 and r.stderr.startswith("usage: mxc compile ")
    assert [ln for ln in r.stderr.splitlines() if "error:" in ln] == [
        'mxc compile: error: no shape for input(s) data: give --shape data=D1,D2,... (or '
        '--input-shapes "data:[D1,D2,...]")']


def test_cli_artifact_rejects_model_options(mlp, tmp_path):
    r = run_cli("run", str(mlp[1]), "--params", str(MLP / "mlp-0000.params"), "-o",
                str(tmp_path / "o.npz"))
    assert r.returncode != 0 and "compiled artifact" in r.stderr


# ---------------------------------------------------------------------------
# what running an artifact imports (fresh interpreters)
# ---------------------------------------------------------------------------
WATCHED = ("lark", "mxc.frontend", "mxc.compiler", "tvm", "tvm.relax")

_RUN = """
import json, sys
import numpy as np
{prologue}
import mxc.runtime as rt
sess = rt.load({path!r})
out = sess.run({{"data": np.load({inputs!r})["data"]}})[0]
print(json.dumps({{"shape": list(out.shape),
                   "imported": [m for m in {watched!r} if m in sys.modules],
                   "mxc": sorted(m for m in sys.modules if m.startswith("mxc"))}}))
"""
# the mxc package object alone, without running mxc/__init__.py: what the runtime
# package itself imports
_STUB = ("import types; _p = types.ModuleType('mxc'); _p.__path__ = [{pkg!r}]; "
         "sys.modules['mxc'] = _p")


def _fresh_run(path: Path, prologue: str = "") -> dict:
    code = _RUN.format(prologue=prologue, path=str(path), inputs=str(MLP / "input.npz"),
                       watched=WATCHED)
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_runtime_package_imports_neither_compiler_nor_frontend_nor_tvm(mlp):
    """Load and run a fully compiled artifact with only the runtime package."""
    res = _fresh_run(mlp[1], _STUB.format(pkg=str(REPO / "mxc")))
    assert res["shape"] == [4, 10]
    assert res["imported"] == [], f"the runtime imported {res['imported']}"
    assert set(res["mxc"]) <= {"mxc", "mxc.errors", "mxc.atomic_files", "mxc.output_paths",
                               "mxc.memory_limits", "mxc.runtime",
                               "mxc.runtime._tvm", "mxc.runtime.artifact",
                               "mxc.runtime.session", "mxc.runtime.threads", "mxc.runtime.executors",
                               "mxc.runtime.plan", "mxc.runtime.info", "mxc.runtime.validate",
                               "mxc.runtime.bfloat16", "mxc.runtime.cpu_features",
                               "mxc.runtime.signatures", "mxc.runtime.feeds",
                               "mxc.runtime.instruments",
                               "mxc.runtime.signing"}, res["mxc"]


def test_import_mxc_runtime_in_a_fresh_interpreter(mlp):
    """``import mxc.runtime`` as users write it: never TVM's Python package, lark, the
    frontend or the compiler (the top-level package imports its parts lazily)."""
    res = _fresh_run(mlp[1])
    assert res["shape"] == [4, 10]
    assert res["imported"] == [], f"import mxc.runtime pulled in {res['imported']}"


def test_host_fallback_imports_the_op_definitions_only(tmp_path):
    """An artifact with host nodes: the runtime imports mxc's op definitions (whose module
    imports the attribute grammar, hence lark), never TVM's Python package nor the JSON
    frontend."""
    from mxc import sym as S
    data = S.var("data")
    y = S.exp(S._contrib_box_nms(S.relu(data), overlap_thresh=0.5, name="nms"), name="e")
    path = mxc.compile(y, None, {"data": (1, 6, 6)}).save(tmp_path / "nms.mxc")
    code = (f"import sys, json\nimport numpy as np\n{_STUB.format(pkg=str(REPO / 'mxc'))}\n"
            f"import mxc.runtime as rt\ns = rt.load({str(path)!r})\n"
            f"s.run({{'data': np.ones((1, 6, 6), np.float32)}})\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith(('mxc', 'tvm')))))")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    mods = set(json.loads(r.stdout.strip().splitlines()[-1]))
    assert "mxc.runtime.host" in mods and "mxc.compiler.ops.registry" in mods
    assert "tvm" not in mods and "tvm.relax" not in mods
    assert "mxc.frontend.symbol_json" not in mods and "mxc.compiler.symbol" not in mods
