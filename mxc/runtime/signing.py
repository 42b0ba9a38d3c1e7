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
ed25519`` makes the same kind of private key.  A verify key that is
degenerate (small order, outside the prime-order subgroup, non-canonical:
:mod:`.signing_points`) is refused, since such a key accepts forged
signatures.

A signature can bind a name (``NamedKey``, ``mxc compile --sign-name
resnet50@3``): the signed message is then the name and the manifest, and a
verifier that expects a name (``mxc run --verify-name resnet50@3``) refuses
an artifact signed for another name -- an older version signed with the
same key, say.  Without a name the signature covers the manifest alone, as
before.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ..errors import ArtifactError, SigningError

log = logging.getLogger("mxc.signing")

SIGNATURE = "manifest.sig"
ALGORITHM = "ed25519"
#: largest signature member read (it holds two hex strings)
MAX_SIGNATURE_BYTES = 4096

#: longest name a signature binds
MAX_NAME_CHARS = 256
_NAME_DOMAIN = b"mxc-signed-name:v1\n"

KeyLike = Union[str, os.PathLike, bytes, Any]


@dataclass(frozen=True)
class NamedKey:
    """A key and the model name (and version) its signatures bind.

    As ``sign=``: sign for *name* (``NamedKey("signing.key", "resnet50@3")``).
    As ``verify_key=``: accept only a signature made for exactly *name*.
    """

    key: Any
    name: str

    def __post_init__(self):
        check_name(self.name)


def check_name(name: Any) -> str:
    """*name* if it can be bound by a signature (printable text, one line, not too long)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS \
            or not name.isprintable():
        raise SigningError(f"a signed name must be 1 to {MAX_NAME_CHARS} printable characters "
                           f"on one line (e.g. resnet50@3), not {name!r:.80}")
    return name


def _message(manifest_bytes: bytes, name: str | None) -> bytes:
    if name is None:
        return manifest_bytes
    return _NAME_DOMAIN + name.encode("utf-8") + b"\n" + manifest_bytes


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - a dependency of mxc
        raise SigningError(f"signed artifacts need the 'cryptography' package ({exc}); "
                           f"pip install cryptography") from None
    return serialization, ed25519, InvalidSignature


def _unreadable():
    """What ``cryptography`` raises for key bytes it cannot read: ValueError and TypeError,
    and UnsupportedAlgorithm for a key of an algorithm it does not know (a bad OID)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    return ValueError, TypeError, UnsupportedAlgorithm


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
    raise SigningError(f"the {what} key must be a PEM/DER file path, bytes or an Ed25519 key "
                       f"object, not {type(key).__name__} ({key!r:.40})")


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
    except _unreadable() as exc:
        raise SigningError(f"{label}: not an unencrypted Ed25519 private key ({exc}); make "
                           f"one with `mxc keygen -o KEY`") from None
    if not isinstance(priv, ed25519.Ed25519PrivateKey):
        raise SigningError(f"{label}: a {type(priv).__name__}, not an Ed25519 private key")
    return priv


def load_public_key(key: KeyLike):
    """An Ed25519 public key from a PEM/DER file or bytes, raw 32 bytes, or a key object.

    A private key is accepted too (its public half is used), with a warning:
    the verifying side needs only ``KEY.pub``, and a private key there can sign.
    A degenerate key (:func:`~.signing_points.degenerate_reason`) is a
    :class:`SigningError`.
    """
    return _checked(_public_key(key))


def _public_key(key: KeyLike):
    serialization, ed25519, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key, "the given public key"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        _warn_private("the given key object")
        return key.public_key(), "the given private key"
    data, label = _key_bytes(key, "public")
    try:
        if len(data) == 32:
            return ed25519.Ed25519PublicKey.from_public_bytes(data), label
        pem = data.lstrip().startswith(b"-----")
        if b"PRIVATE KEY" in data:
            pub = load_private_key(data).public_key()
            _warn_private(label)
            return pub, label
        loader = serialization.load_pem_public_key if pem else serialization.load_der_public_key
        pub = loader(data)
    except _unreadable() as exc:
        raise SigningError(f"{label}: not an Ed25519 public key ({exc})") from None
    if not isinstance(pub, ed25519.Ed25519PublicKey):
        raise SigningError(f"{label}: a {type(pub).__name__}, not an Ed25519 public key")
    return pub, label


def _warn_private(label: str) -> None:
    log.warning("%s is a private key, given to verify with: its public half is used, but "
                "the private key can sign artifacts; give the verifying side only the public "
                "key (KEY.pub from `mxc keygen`)", label)


def _checked(found):
    from .signing_points import degenerate_reason   # only when a key is used
    pub, label = found
    reason = degenerate_reason(_raw_public(pub))
    if reason is not None:
        raise SigningError(f"{label}: refusing a degenerate Ed25519 public key: {reason}")
    return pub


def public_key_bytes(key: KeyLike) -> bytes:
    """The raw 32 bytes of the public key *key* names (what a pickled session carries)."""
    return _raw_public(load_public_key(key))


def _raw_public(pub) -> bytes:
    serialization, _, _ = _crypto()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign_manifest(manifest_bytes: bytes, key: KeyLike) -> bytes:
    """The ``manifest.sig`` member for *manifest_bytes* signed with the private *key*
    (a :class:`NamedKey` binds its name too)."""
    name = key.name if isinstance(key, NamedKey) else None
    priv = load_private_key(key.key if isinstance(key, NamedKey) else key)
    doc = {"algorithm": ALGORITHM, "public_key": _raw_public(priv.public_key()).hex()}
    if name is not None:
        doc["name"] = name
    doc["signature"] = priv.sign(_message(manifest_bytes, name)).hex()
    return json.dumps(doc, indent=1).encode()


def verify_manifest(manifest_bytes: bytes, signature: bytes | None, key: KeyLike,
                    path: Any) -> None:
    """Raise :class:`ArtifactError` unless *signature* signs *manifest_bytes* with *key*."""
    _, _, invalid = _crypto()
    expected = key.name if isinstance(key, NamedKey) else None
    pub = load_public_key(key.key if isinstance(key, NamedKey) else key)
    if signature is None:
        raise ArtifactError(f"{path}: the artifact is not signed, and a verify key was given; "
                            f"refusing to load it (sign it with `mxc compile --sign KEY`)")
    try:
        doc = json.loads(signature)
        algorithm, sig_hex = doc["algorithm"], doc["signature"]
        sig = bytes.fromhex(sig_hex)
        name = doc.get("name")
        if name is not None:
            check_name(name)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError,
            SigningError) as exc:
        raise ArtifactError(f"{path}: member {SIGNATURE} is malformed ({type(exc).__name__}: "
                            f"{str(exc):.200}); refusing to load the artifact") from None
    if algorithm != ALGORITHM:
        raise ArtifactError(f"{path}: member {SIGNATURE}: field 'algorithm' is "
                            f"{algorithm!r:.80}, this mxc verifies {ALGORITHM!r}; refusing to "
                            f"load the artifact")
    if expected is not None and name != expected:
        signed_for = f"signed for {name!r}" if name is not None else "signed without a name"
        raise ArtifactError(f"{path}: the artifact is {signed_for}, not for {expected!r}; "
                            f"refusing to load it (an older or another model signed with the "
                            f"same key)")
    try:
        pub.verify(sig, _message(manifest_bytes, name))
    except invalid:
        raise ArtifactError(f"{path}: the signature does not verify with the given key: the "
                            f"artifact was modified after signing or signed with another key; "
                            f"refusing to load it") from None


def generate_key(path: str | os.PathLike) -> tuple[Path, Path]:
    """Write a new Ed25519 private key to *path* (0600) and its public key to *path*.pub."""
    serialization, ed25519, _ = _crypto()
    from ..atomic_files import atomic_write_bytes
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
