"""Issue 28, item 4: degenerate verify keys, malformed signature members, bad key types,
private keys given to verify with, and signatures that bind a model name."""

from __future__ import annotations

import json
import logging
import zipfile

import pytest

pytest.importorskip("tvm")
pytest.importorskip("cryptography")

import mxc.runtime as rt
from mxc.errors import ArtifactError, SigningError
from mxc.runtime.signing import NamedKey, generate_key
from mxc.runtime.signing_points import _L, _P, _add, _decode, _times
from reliability_helpers import REPO, members, mlp_artifact, mlp_input, mlp_model, run_cli


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    return generate_key(d / "signing.key") + generate_key(d / "other.key")


def _with_signature(src, dst, sig: bytes):
    data = members(src)
    data.pop("manifest.sig", None)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("manifest.json", data.pop("manifest.json"))
        zf.writestr("manifest.sig", sig)
        for n, d in data.items():
            zf.writestr(n, d)
    return dst


def _encode(point) -> bytes:
    x, y, z, _ = point
    zi = pow(z, _P - 2, _P)
    x, y = x * zi % _P, y * zi % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _identity_forgery(key_raw: bytes) -> bytes:
    """R = identity, S = 0: verifies any message under a small-order key."""
    return json.dumps({"algorithm": "ed25519", "public_key": key_raw.hex(),
                       "signature": ((1).to_bytes(32, "little") + bytes(32)).hex()}).encode()


def _honest_plus_torsion(keys) -> bytes:
    pub = keys[1].read_bytes()
    from mxc.runtime.signing import _raw_public, load_public_key
    x, y = _decode(_raw_public(load_public_key(pub)))
    torsion = _decode(bytes(32))              # y = 0: a point of order 4
    t = (torsion[0], torsion[1], 1, torsion[0] * torsion[1] % _P)
    return _encode(_add((x, y, 1, x * y % _P), t))


@pytest.mark.parametrize("which", ["identity", "order-4", "non-canonical identity",
                                   "x=0 with sign bit", "mixed order"])
def test_degenerate_verify_keys_are_refused(tmp_path_factory, tmp_path, keys, which,
                                            no_library_write):
    raw = {"identity": (1).to_bytes(32, "little"),
           "order-4": bytes(32),
           "non-canonical identity": (_P + 1).to_bytes(32, "little"),
           "x=0 with sign bit": bytes([1] + [0] * 30 + [0x80])}.get(which)
    if raw is None:
        raw = _honest_plus_torsion(keys)
        assert _times(_L, _decode(raw) + (1, 0)) != (0, 1, 1, 0)   # not prime order
    forged = _with_signature(mlp_artifact(tmp_path_factory), tmp_path / "forged.mxc",
                             _identity_forgery(raw))
    with pytest.raises(SigningError, match="degenerate Ed25519 public key"):
        rt.load(forged, verify_key=raw)


def test_a_deeply_nested_signature_member_is_malformed_not_a_recursion_error(
        tmp_path_factory, tmp_path, keys, no_library_write):
    bad = _with_signature(mlp_artifact(tmp_path_factory), tmp_path / "deep.mxc",
                          b"[" * 2000 + b"]" * 2000)
    with pytest.raises(ArtifactError, match="manifest.sig is malformed"):
        rt.load(bad, verify_key=keys[1])


@pytest.mark.parametrize("key", [0, False, [1, 2], 1.5, {"k": 1}])
def test_a_verify_key_of_the_wrong_type_is_a_signing_error(tmp_path_factory, key):
    with pytest.raises(SigningError, match="must be a PEM/DER file path, bytes or an Ed25519"):
        rt.load(mlp_artifact(tmp_path_factory), verify_key=key)


def test_a_private_key_given_to_verify_warns(tmp_path_factory, keys, caplog):
    path = tmp_path_factory.mktemp("signed-p") / "m.mxc"
    mlp_model(tmp_path_factory).save(path, sign=keys[0])
    with caplog.at_level(logging.WARNING, logger="mxc.signing"):
        rt.load(path, verify_key=keys[0])
    assert any("is a private key" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mxc.signing"):
        rt.load(path, verify_key=keys[1])
    assert not caplog.records


def test_a_signature_binds_the_name(tmp_path_factory, keys, tmp_path):
    path = tmp_path_factory.mktemp("named") / "m.mxc"
    mlp_model(tmp_path_factory).save(path, sign=NamedKey(keys[0], "mlp@3"))
    x = mlp_input()
    sess = rt.load(path, verify_key=NamedKey(keys[1], "mlp@3"))
    assert sess.run({"data": x})[0].shape == (4, 10)
    rt.load(path, verify_key=keys[1])                      # a name is not required
    with pytest.raises(ArtifactError, match="signed for 'mlp@3', not for 'mlp@4'"):
        rt.load(path, verify_key=NamedKey(keys[1], "mlp@4"))
    old = tmp_path_factory.mktemp("unnamed") / "m.mxc"
    mlp_model(tmp_path_factory).save(old, sign=keys[0])
    with pytest.raises(ArtifactError, match="signed without a name"):
        rt.load(old, verify_key=NamedKey(keys[1], "mlp@3"))
    doc = json.loads(members(path)["manifest.sig"])        # rename it: no longer verifies
    doc["name"] = "mlp@4"
    renamed = _with_signature(path, tmp_path / "renamed.mxc", json.dumps(doc).encode())
    with pytest.raises(ArtifactError, match="signature does not verify"):
        rt.load(renamed, verify_key=NamedKey(keys[1], "mlp@4"))
    with pytest.raises(SigningError, match="signed name"):
        NamedKey(keys[0], "two\nlines")


def test_cli_sign_name_verify_name_and_private_key_warning(tmp_path, keys):
    out = tmp_path / "mlp.mxc"
    r = run_cli("compile", str(REPO / "examples/mlp/mlp-symbol.json"), "--params",
                str(REPO / "examples/mlp/mlp-0000.params"), "--shape", "data=4,784",
                "--sign", str(keys[0]), "--sign-name", "mlp@2", "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    inputs = ["--inputs", str(REPO / "examples/mlp/input.npz")]
    good = run_cli("run", str(out), "--verify-key", str(keys[0]), "--verify-name", "mlp@2",
                   *inputs, "-o", str(tmp_path / "o.npz"))
    assert good.returncode == 0, good.stderr
    assert b"is a private key" in good.stderr
    older = run_cli("run", str(out), "--verify-key", str(keys[1]), "--verify-name", "mlp@3",
                    *inputs, "-o", str(tmp_path / "o2.npz"))
    assert older.returncode == 8 and b"not for 'mlp@3'" in older.stderr
    assert b"Traceback" not in older.stderr


@pytest.mark.parametrize("private", [False, True])
def test_a_key_of_an_unknown_algorithm_is_a_signing_error(tmp_path_factory, keys, private):
    """An unknown algorithm OID raised cryptography's UnsupportedAlgorithm (found by
    bench/fuzz.py's signing target)."""
    from cryptography.hazmat.primitives import serialization
    from mxc.runtime.signing import load_private_key, load_public_key
    key = (load_private_key(keys[0]).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()) if private else load_public_key(keys[1]).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    oid = b"\x06\x03\x2b\x65\x70"                 # 1.3.101.112, Ed25519
    assert oid in key
    bad = key.replace(oid, b"\x06\x03\x2b\x65\x7b")  # 1.3.101.123: no such algorithm
    loader = load_private_key if private else load_public_key
    with pytest.raises(SigningError, match="not an (unencrypted )?Ed25519"):
        loader(bad)
