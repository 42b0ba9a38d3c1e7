"""Issue 14, items 1 and 2: artifacts are code (signatures), and loads do not leak."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("cryptography")

import mxc.runtime as rt
from mxc.errors import ArtifactError
from mxc.runtime import artifact as art
from mxc.runtime import session as session_mod
from mxc.runtime.signing import SigningError, generate_key
from reliability_helpers import (REPO, forge, members, mlp_artifact, mlp_input, mlp_model,
                                 run_cli, run_python)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    return generate_key(d / "signing.key") + generate_key(d / "other.key")


@pytest.fixture(scope="module")
def signed(tmp_path_factory, keys):
    model = mlp_model(tmp_path_factory)
    path = tmp_path_factory.mktemp("signed") / "mlp-signed.mxc"
    model.save(path, sign=keys[0])
    return path


def test_keygen_writes_a_private_key_only_the_owner_reads(keys):
    private, public = keys[0], keys[1]
    assert private.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in private.read_bytes() and b"PUBLIC KEY" in public.read_bytes()


def test_signed_artifact_verifies_and_runs(signed, keys):
    with zipfile.ZipFile(signed) as zf:
        assert zf.namelist()[:2] == ["manifest.json", "manifest.sig"]
    sess = rt.load(signed, verify_key=keys[1])
    x = mlp_input()
    np.testing.assert_allclose(sess.run({"data": x})[0], rt.load(signed).run({"data": x})[0])


def test_resigned_artifact_with_modified_library_is_refused_before_extraction(
        signed, keys, tmp_path, no_library_write):
    """Issue 14 failure 1: a re-signed (checksums recomputed) modified lib.so must not load."""
    data = members(signed)
    lib = bytearray(data["lib.so"])
    lib[len(lib) // 2] ^= 0xFF
    data["lib.so"] = bytes(lib)
    bad = forge(tmp_path / "resigned.mxc", data)  # manifest checksums match the new lib.so
    with zipfile.ZipFile(bad) as zf:  # keep the original signature: it no longer verifies
        sig_members = dict((n, zf.read(n)) for n in zf.namelist())
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("manifest.json", sig_members.pop("manifest.json"))
        zf.writestr("manifest.sig", members(signed)["manifest.sig"])
        for n, d in sig_members.items():
            zf.writestr(n, d)
    with pytest.raises(ArtifactError, match="signature does not verify"):
        rt.load(bad, verify_key=keys[1])


def test_unsigned_artifact_is_refused_when_a_key_is_given(tmp_path_factory, keys,
                                                          no_library_write):
    with pytest.raises(ArtifactError, match="not signed"):
        rt.load(mlp_artifact(tmp_path_factory), verify_key=keys[1])


def test_artifact_signed_with_another_key_is_refused(signed, keys, no_library_write):
    with pytest.raises(ArtifactError, match="signature does not verify"):
        rt.load(signed, verify_key=keys[3])


def test_malformed_signature_member_is_refused(signed, keys, tmp_path, no_library_write):
    data = members(signed)
    bad = tmp_path / "badsig.mxc"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("manifest.json", data.pop("manifest.json"))
        zf.writestr("manifest.sig", b'{"algorithm": "ed25519", "signature": "zz"}')
        for n, d in data.items():
            if n != "manifest.sig":
                zf.writestr(n, d)
    with pytest.raises(ArtifactError, match="manifest.sig is malformed"):
        rt.load(bad, verify_key=keys[1])


def test_a_key_that_is_not_ed25519_is_a_typed_error(tmp_path, signed):
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("hello")
    with pytest.raises(SigningError, match="not an Ed25519 public key"):
        rt.load(signed, verify_key=bad)


def test_cli_compile_sign_and_run_verify_key(tmp_path, keys):
    """`mxc compile --sign` then `mxc run --verify-key` (and a wrong key: exit code 8)."""
    out = tmp_path / "mlp.mxc"
    r = run_cli("compile", str(REPO / "examples/mlp/mlp-symbol.json"), "--params",
                str(REPO / "examples/mlp/mlp-0000.params"), "--shape", "data=4,784",
                "--sign", str(keys[0]), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert b"signed" in r.stdout
    good = run_cli("run", str(out), "--verify-key", str(keys[1]), "--inputs",
                   str(REPO / "examples/mlp/input.npz"), "-o", str(tmp_path / "o.npz"))
    assert good.returncode == 0, good.stderr
    bad = run_cli("run", str(out), "--verify-key", str(keys[3]), "--inputs",
                  str(REPO / "examples/mlp/input.npz"), "-o", str(tmp_path / "o2.npz"))
    assert bad.returncode == 8 and b"signature does not verify" in bad.stderr
    assert b"Traceback" not in bad.stderr and not (tmp_path / "o2.npz").exists()


# ---------------------------------------------------------------------------------------
# item 2: loads do not leak
# ---------------------------------------------------------------------------------------
def test_same_library_is_loaded_once(tmp_path_factory, monkeypatch):
    path = mlp_artifact(tmp_path_factory)
    extracted = []
    real = art.extract_library
    monkeypatch.setattr(session_mod, "_LIBRARIES", {})
    monkeypatch.setattr(art, "extract_library", lambda data: extracted.append(1) or real(data))
    for _ in range(5):
        rt.load(path)
    assert len(extracted) == 1


def test_300_loads_of_one_artifact_grow_rss_by_less_than_30_mib(tmp_path_factory):
    """Issue 14 failure 2: every load dlopened a fresh copy (0.8 MiB each for the MLP)."""
    path = mlp_artifact(tmp_path_factory)
    code = f"""
import gc, json, resource
import mxc.runtime
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
for _ in range(5):
    s = mxc.runtime.load({str(path)!r}); del s
gc.collect(); before = rss()
for _ in range(300):
    s = mxc.runtime.load({str(path)!r}); del s
gc.collect()
print(json.dumps({{"growth_mib": rss() - before}}))
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    growth = json.loads(r.stdout.strip().splitlines()[-1])["growth_mib"]
    assert growth < 30, f"300 loads grew RSS by {growth:.1f} MiB"
