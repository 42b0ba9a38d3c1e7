"""Signed artifacts: Ed25519 signatures over the manifest (the ``cryptography`` package).

A ``.mxc`` file holds native code, and loading it runs that code (the
library's ELF constructors run inside ``dlopen``, before any mxc check can
fail).  The manifest lists every other member's size and sha256, so signing
the manifest's exact bytes authenticates the whole artifact: a member changed
after signing no longer matches its checksum, and a manifest rewritten to
match no longer matches the signature.

The signature is the member ``manifest.sig`` (JSON: algorithm, public key and
signature, hex), written right after the manifest.  ``load(path,
verify_key=KEY)`` reads only those two members, verifies, and refuses the
artifact -- before any other member is decompressed or the library is written
to disk -- when the signature is missing or does not verify with *KEY*.

Keys are PEM files: ``mxc keygen -o KEY`` writes the private key to ``KEY``
(mode 0600) and the public key to ``KEY.pub``; ``openssl genpkey -algorithm
ed25519`` makes the same kind of private key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Union

from ..errors import ArtifactError, SigningError

SIGNATURE = "manifest.sig"
ALGORITHM = "ed25519"
#: largest signature member read (it holds two hex strings)
MAX_SIGNATURE_BYTES = 4096

KeyLike = Union[str, os.PathLike, bytes, Any]


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - a dependency of mxc
        raise SigningError(f"signed artifacts need the 'cryptography' package ({exc}); "
                           f"pip install cryptography") from None
    return serialization, ed25519, InvalidSignature


def _key_bytes(key: KeyLike, what: str) -> tuple[bytes, str]:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key), f"the given {what} key"
    if isinstance(key, (str, os.PathLike)):
        path = Path(key)
        try:
            return path.read_bytes(), str(path)
        except OSError as exc:
            raise SigningError(f"{path}: cannot read the {what} key: "
                               f"{exc.strerror or exc}") from None
    raise TypeError  # a key object: handled by the callers


def load_private_key(key: KeyLike):
    """An Ed25519 private key from a PEM/DER file or bytes (or a key object)."""
    serialization, ed25519, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    data, label = _key_bytes(key, "private")
    try:
        if len(data) == 32:
            return ed25519.Ed25519PrivateKey.from_private_bytes(data)
        loader = (serialization.load_pem_private_key if data.lstrip().startswith(b"-----")
                  else serialization.load_der_private_key)
        priv = loader(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{label}: not an unencrypted Ed25519 private key ({exc}); make "
                           f"one with `mxc keygen -o KEY`") from None
    if not isinstance(priv, ed25519.Ed25519PrivateKey):
        raise SigningError(f"{label}: a {type(priv).__name__}, not an Ed25519 private key")
    return priv


def load_public_key(key: KeyLike):
    """An Ed25519 public key from a PEM/DER file or bytes, raw 32 bytes, or a key object.

    A private key is accepted too (its public half is used).
    """
    serialization, ed25519, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    data, label = _key_bytes(key, "public")
    try:
        if len(data) == 32:
            return ed25519.Ed25519PublicKey.from_public_bytes(data)
        pem = data.lstrip().startswith(b"-----")
        if b"PRIVATE KEY" in data:
            return load_private_key(data).public_key()
        loader = serialization.load_pem_public_key if pem else serialization.load_der_public_key
        pub = loader(data)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{label}: not an Ed25519 public key ({exc})") from None
    if not isinstance(pub, ed25519.Ed25519PublicKey):
        raise SigningError(f"{label}: a {type(pub).__name__}, not an Ed25519 public key")
    return pub


def public_key_bytes(key: KeyLike) -> bytes:
    """The raw 32 bytes of the public key *key* names (what a pickled session carries)."""
    return _raw_public(load_public_key(key))


def _raw_public(pub) -> bytes:
    serialization, _, _ = _crypto()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign_manifest(manifest_bytes: bytes, key: KeyLike) -> bytes:
    """The ``manifest.sig`` member for *manifest_bytes* signed with the private *key*."""
    priv = load_private_key(key)
    sig = priv.sign(manifest_bytes)
    return json.dumps({"algorithm": ALGORITHM,
                       "public_key": _raw_public(priv.public_key()).hex(),
                       "signature": sig.hex()}, indent=1).encode()


def verify_manifest(manifest_bytes: bytes, signature: bytes | None, key: KeyLike,
                    path: Any) -> None:
    """Raise :class:`ArtifactError` unless *signature* signs *manifest_bytes* with *key*."""
    _, _, invalid = _crypto()
    pub = load_public_key(key)
    if signature is None:
        raise ArtifactError(f"{path}: the artifact is not signed, and a verify key was given; "
                            f"refusing to load it (sign it with `mxc compile --sign KEY`)")
    try:
        doc = json.loads(signature)
        algorithm, sig_hex = doc["algorithm"], doc["signature"]
        sig = bytes.fromhex(sig_hex)
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{path}: member {SIGNATURE} is malformed ({type(exc).__name__}: "
                            f"{exc}); refusing to load the artifact") from None
    if algorithm != ALGORITHM:
        raise ArtifactError(f"{path}: member {SIGNATURE}: field 'algorithm' is {algorithm!r}, "
                            f"this mxc verifies {ALGORITHM!r}; refusing to load the artifact")
    try:
        pub.verify(sig, manifest_bytes)
    except invalid:
        raise ArtifactError(f"{path}: the signature does not verify with the given key: the "
                            f"artifact was modified after signing or signed with another key; "
                            f"refusing to load it") from None


def generate_key(path: str | os.PathLike) -> tuple[Path, Path]:
    """Write a new Ed25519 private key to *path* (0600) and its public key to *path*.pub."""
    serialization, ed25519, _ = _crypto()
    from ..utils import atomic_write_bytes
    priv = ed25519.Ed25519PrivateKey.generate()
    private_pem = priv.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
    public_pem = priv.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    path = Path(path)
    pub_path = path.with_name(path.name + ".pub")
    atomic_write_bytes(path, private_pem, mode=0o600)
    atomic_write_bytes(pub_path, public_pem)
    return path, pub_path
