"""Issue 14, items 4-6: artifacts are validated before use; every failure is an ArtifactError.

Each test reproduces one failure of the issue's fuzzing campaign (named in its docstring)
and checks it is now refused with a typed error naming the member and field, before any
library is written to disk.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime as rt
from mxc.errors import ArtifactError
from mxc.runtime import artifact as art
from reliability_helpers import forge, members, mlp_artifact, npz_bytes, run_cli


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return mlp_artifact(tmp_path_factory)


@pytest.fixture(scope="module")
def unbound(tmp_path_factory):
    return mlp_artifact(tmp_path_factory, bind_params=False)


# ---------------------------------------------------------------------------------------
# sizes: checked before decompressing
# ---------------------------------------------------------------------------------------
def test_manifest_that_inflates_past_the_cap_is_refused_before_reading(good, tmp_path):
    """Failure 4: a 1.5 MB .mxc whose manifest.json inflates to 1 GiB loaded (2 GiB peak)."""
    data = members(good)
    padded = data["manifest.json"][:-1] + b" " * (art.MAX_MANIFEST_BYTES + 10) + b"}"
    bomb = tmp_path / "bomb.mxc"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", padded)
        for n, d in data.items():
            if n != "manifest.json":
                zf.writestr(n, d)
    with zipfile.ZipFile(bomb) as zf:  # it is a (small) bomb
        assert zf.getinfo("manifest.json").compress_size < len(padded) // 50
    with pytest.raises(ArtifactError, match=r"member manifest.json declares [\d,]+ bytes, more "
                                            r"than the 1,048,576 allowed"):
        rt.load(bomb)


def test_library_whose_zip_size_differs_from_the_manifest_is_refused_before_inflating(
        good, tmp_path, no_library_write):
    """Failure 4: a lib.so inflating to 1.5 GiB reached 3.1 GiB before its size was compared."""
    data = members(good)
    real = data["lib.so"]
    data["lib.so"] = real + b"\0" * (8 << 20)  # deflates to a few KiB

    def keep_declared(man):
        man["members"]["lib.so"]["size"] = len(real)
    bomb = tmp_path / "libbomb.mxc"
    forge(bomb, data, manifest=keep_declared)
    with pytest.raises(ArtifactError, match=r"member lib.so: the zip declares 8,[\d,]+ bytes, "
                                            r"the manifest [\d,]+"):
        rt.load(bomb)


def test_num_slots_beyond_what_the_graph_declares_is_refused(good, tmp_path, no_library_write):
    """Failure 4: num_slots=2**27 in graph.json allocated 2.1 GiB."""
    bad = forge(tmp_path / "slots.mxc", members(good),
                graph=lambda g: g.update(num_slots=2 ** 27))
    with pytest.raises(ArtifactError, match=r"graph.json: num_slots: expected at most 3"):
        rt.load(bad)


def test_members_declaring_more_than_the_process_may_allocate_are_refused(
        good, tmp_path, monkeypatch, no_library_write):
    monkeypatch.setattr(art, "allocatable_bytes", lambda: (1000, "address space"))
    with pytest.raises(ArtifactError, match=r"more than this process may allocate \(1,000 "
                                            r"bytes: address space\)"):
        rt.load(good)


# ---------------------------------------------------------------------------------------
# corrupt zips without forging (failure 5)
# ---------------------------------------------------------------------------------------
def _patch_central(path, name: str, offset: int, fmt: str, value: int) -> None:
    """Set a field of *name*'s central-directory and local headers."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    local = info.header_offset
    cd = raw.rfind(b"PK\x01\x02" + raw[local + 4:local + 6])  # fallback search below
    for start in range(len(raw) - 46):
        if raw[start:start + 4] == b"PK\x01\x02" and raw[start + 46:start + 46 + len(name)] \
                == name.encode():
            cd = start
            break
    local_field = {"version": 4, "flags": 6, "method": 8}[offset]
    central_field = {"version": 6, "flags": 8, "method": 10}[offset]
    struct.pack_into(fmt, raw, local + local_field, value)
    struct.pack_into(fmt, raw, cd + central_field, value)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("field,value,message", [
    ("method", 99, "compression method 99"),                # was NotImplementedError
    ("version", 99, r"cannot read artifact: NotImplementedError: zip file version"),
    ("flags", 0x1, "encrypted"),                            # was RuntimeError
])
@pytest.mark.parametrize("member", ["graph.json", "manifest.json"])
def test_corrupt_zip_headers_are_artifact_errors(good, tmp_path, field, value, message, member,
                                                 no_library_write):
    """Failure 5: an unknown compression method or zip version -> NotImplementedError, the
    encrypted flag -> RuntimeError, from load, `mxc run` and `mxc inspect`."""
    bad = tmp_path / f"{field}.mxc"
    bad.write_bytes(good.read_bytes())
    _patch_central(bad, member, field, "<H", value)
    with pytest.raises(ArtifactError, match=message):
        rt.load(bad)
    r = run_cli("run", str(bad), "-o", str(tmp_path / "o.npz"))
    assert r.returncode == 8 and b"Traceback" not in r.stderr, r.stderr
    r = run_cli("inspect", str(bad))  # reads the manifest only: a bad graph.json is not seen
    assert r.returncode == (8 if member == "manifest.json" or field == "version" else 0)
    assert b"Traceback" not in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------
# the manifest and graph.json are validated (failure 6)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("edit,field", [
    (lambda m: m.update(target="llvm"), "target: expected an object"),
    (lambda m: m["target"].update(host=["x86_64"]), "target.host: expected an object"),
    (lambda m: m["target"]["host"].update(features="avx2"), "target.host.features: expected a "
                                                           "list"),
    (lambda m: m["target"]["host"].update(features=[1, 2]), r"target.host.features\[0\]"),
    (lambda m: m["target"].pop("kind"), "target.kind: missing"),
    (lambda m: m["inputs"][0].update(shape="4x784"), r"inputs\[0\].shape"),
    (lambda m: m["regions"][0].update(ops=[]), r"regions\[0\].ops: expected an object"),
    (lambda m: m["host_nodes"].append(7), r"host_nodes\[0\]: expected an object"),
    (lambda m: m["members"]["graph.json"].update(size="645"), r"members\['graph.json'\].size"),
])
def test_manifest_fields_are_validated(good, tmp_path, edit, field, no_library_write):
    """Failure 6: wrong types in target/host/features gave TypeError/AttributeError from
    load, and `mxc inspect` crashed with 22 distinct KeyError/TypeError/AttributeError."""
    bad = forge(tmp_path / "man.mxc", members(good), manifest=edit)
    with pytest.raises(ArtifactError, match=f"manifest.json: {field}"):
        rt.load(bad)
    with pytest.raises(ArtifactError, match=f"manifest.json: {field}"):
        rt.read_manifest(bad)
    r = run_cli("inspect", str(bad))
    assert r.returncode == 8 and b"Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("edit,field", [
    (lambda g: g.pop("steps"), "steps: missing"),
    (lambda g: g["steps"][0].update(inputs=[7]), r"steps\[0\].inputs\[0\]: expected a slot in "
                                                 r"\[0, 2\)"),
    (lambda g: g["steps"][0].update(inputs=[1]), r"steps\[0\].inputs\[0\]: slot 1 is read "
                                                 r"before"),
    (lambda g: g["steps"][0].update(kind="python"), r"steps\[0\].kind: expected 'region', "
                                                    r"'host' or 'load'"),
    (lambda g: g["inputs"][0].update(shape=[-4, 784]), r"inputs\[0\].shape: expected "
                                                       r"dimensions"),
    (lambda g: g["inputs"][0].update(dtype="object"), r"inputs\[0\].dtype: expected a dtype"),
    (lambda g: g["inputs"][0].update(slot=True), r"inputs\[0\].slot: expected an integer"),
    (lambda g: g["outputs"][0].update(slot=0, shape=None), r"outputs\[0\].shape"),
    (lambda g: g["inputs"][0].update(shape=[2 ** 40, 2 ** 20], optional=True),
     "more than this process may allocate"),
])
def test_graph_fields_are_validated(good, tmp_path, edit, field, no_library_write):
    """Failure 6: once re-signed, graph.json produced 69 distinct bare exceptions."""
    bad = forge(tmp_path / "graph.mxc", members(good), graph=edit)
    with pytest.raises(ArtifactError, match=field):
        rt.load(bad)


@pytest.mark.parametrize("blob,message", [
    (b"not a zip at all", "params.npz is corrupt"),
    (npz_bytes(fc1_weight=np.zeros((2, 2), "f")), "parameter 'fc1_bias' is missing"),
])
def test_corrupt_params_npz_is_an_artifact_error(unbound, tmp_path, blob, message):
    data = members(unbound)
    data["params.npz"] = blob
    with pytest.raises(ArtifactError, match=message):
        rt.load(forge(tmp_path / "params.mxc", data))


def test_compressed_params_npz_members_are_refused(unbound, tmp_path):
    """A deflated array inside params.npz could inflate beyond the member's size."""
    data = members(unbound)
    with np.load(io.BytesIO(data["params.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    data["params.npz"] = buf.getvalue()
    with pytest.raises(ArtifactError, match="is compressed, encrypted or larger than the file"):
        rt.load(forge(tmp_path / "deflated.mxc", data))


def test_fifo_as_artifact_path_does_not_hang(tmp_path):
    """Failure 8: a FIFO as the artifact path hung `load`."""
    fifo = tmp_path / "pipe.mxc"
    os.mkfifo(fifo)
    result: list = []
    t = threading.Thread(target=lambda: result.append(_load_error(fifo)), daemon=True)
    t.start()
    t.join(10)
    assert result, "load blocked on the FIFO"
    assert "is a FIFO, not an artifact file" in result[0]
    assert not rt.is_artifact(fifo)


def _load_error(path) -> str:
    try:
        rt.load(path)
    except ArtifactError as exc:
        return str(exc)
    return "loaded"
