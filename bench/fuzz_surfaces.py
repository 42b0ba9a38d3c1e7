"""Fuzz targets for the surfaces of issue 28: native libraries, signing, ``mxc.mxnet``.

Each target is a class with ``seeds`` (bytes), ``make()`` (one mutated input) and
``__call__(data)`` (run one input); :mod:`bench.fuzz` drives them like its own targets,
so an expected outcome is success or an :class:`mxc.errors.MxcError`.

* ``native_library`` -- what a compiled extension library answers.  A small lib_api v11
  library (``fuzz_puppet.cc``, built once with g++) takes its answers from a struct the
  input fills: version, ``initialize``'s verdict, operator names (arbitrary bytes), input
  and output counts, dtype codes, output shapes, messages, which hook throws a C++
  exception.  Each input loads it (``mxc.library.load``), runs every hook of every
  operator and builds a symbol of it, then unloads it.  One input in five is instead a
  truncated or header-mutated copy of the library file, checked by the pre-``dlopen`` ELF
  check (never ``dlopen``-ed: a mutated library may run anything).  The answers are
  arbitrary in value but honest about memory, as any library MXNet could load must be.
* ``signing`` -- :func:`mxc.runtime.signing.verify_manifest` on a mutated signature
  member, verify key (PEM, DER, raw, a ``NamedKey``) and manifest.  Besides the error
  types, one invariant: a verification that succeeds used the real public key and the
  original manifest (a forgery that verifies is a finding).
* ``mxnet`` -- a JSON document of ``mxc.mxnet`` calls: ``Module.bind`` with its
  ``data_shapes``/``label_shapes``, ``set_params``, ``nd.array``, indexing and
  ``nd.save``.  The three calls where MXNet 1.9 raises plain ``IndexError`` /
  ``TypeError`` / ``ValueError`` (docs/migrating-from-mxnet.md) accept those types too.
  Shapes the harness would have to allocate past 2**22 elements (but under MXNet's cap)
  are skipped, to keep the campaign's memory bounded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SURFACES = ("native_library", "signing", "mxnet")
_SPLIT = b"\x00--mxc-fuzz--\x00"


@contextlib.contextmanager
def _quiet(logger_name: str):
    """Silence one logger while a fuzz input runs, and give it back as it was: the
    targets also run inside the test suite, whose later tests read those warnings."""
    logger = logging.getLogger(logger_name)
    saved, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = saved


def _mutator(seeds, rng):
    from bench.fuzz import Mutator
    return Mutator(seeds, rng)


# ---------------------------------------------------------------------------------------
# native libraries
# ---------------------------------------------------------------------------------------
_CFG = struct.Struct("<8iI5i")          # version .. nmsg, as struct MxcfConfig
_NAMES = 4 * 32


def build_puppet(workdir: Path) -> Path:
    """``libmxcf_puppet.so`` built from ``fuzz_puppet.cc`` into *workdir* (once)."""
    out = workdir / "libmxcf_puppet.so"
    if not out.exists():
        compiler = shutil.which(os.environ.get("CXX", "g++"))
        if compiler is None:
            raise RuntimeError("the native_library fuzz target needs g++")
        tmp = workdir / "libmxcf_puppet.so.tmp"
        subprocess.run([compiler, "-shared", "-fPIC", "-O1", str(ROOT / "bench" /
                                                                "fuzz_puppet.cc"),
                        "-o", str(tmp)], check=True)
        os.replace(tmp, out)
    return out


def _config(version=11, init_ok=1, nops=1, throw_at=0, nin=1, nout=1, type_code=0, ndim=2,
            dim=3, n_ctx=1, parse_ok=1, shape_ok=1, type_ok=1, nmsg=0,
            names=(b"puppet_op",), msg=b"") -> bytes:
    fields = _CFG.pack(version, init_ok, nops, throw_at, nin, nout, type_code, ndim, dim,
                       n_ctx, parse_ok, shape_ok, type_ok, nmsg)
    block = b"".join(n[:31].ljust(32, b"\0") for n in list(names)[:4]).ljust(_NAMES, b"\0")
    return fields + block + msg[:63].ljust(64, b"\0")


class NativeLibraryTarget:
    def __init__(self, workdir: Path, rng: random.Random):
        import ctypes
        self.rng = rng
        self.lib_path = build_puppet(workdir)
        self.lib_bytes = self.lib_path.read_bytes()
        self.scratch = workdir / "libscratch.so"
        self.cdll = ctypes.CDLL(str(self.lib_path))
        self.cfg = (ctypes.c_char * (_CFG.size + _NAMES + 64)).in_dll(self.cdll, "mxcf_cfg")
        self.seeds = [b"C" + _config(),
                      b"C" + _config(nops=2, names=(b"a", b"b"), nout=3, type_code=6),
                      b"C" + _config(version=7, nmsg=1, msg=b"hello", init_ok=0),
                      b"C" + _config(nout=1 << 24, nin=-1, type_code=99, throw_at=5),
                      b"C" + _config(names=(b"caf\xe9",), ndim=8, dim=0xFFFFFFFF),
                      b"E" + self.lib_bytes[:4096]]
        self.mutate = _mutator(self.seeds[:-1], rng)

    def make(self) -> bytes:
        if self.rng.random() < 0.2:      # a damaged file: truncated, header bytes changed
            data = bytearray(self.lib_bytes[:self.rng.randrange(len(self.lib_bytes) + 1)])
            for _ in range(self.rng.randrange(4)):
                if data:
                    i = self.rng.randrange(min(len(data), 512))
                    data[i] = self.rng.randrange(256)
            return b"E" + bytes(data)
        return self.mutate()

    def __call__(self, data: bytes) -> None:
        from mxc.library.native.elf import check_elf_extent
        if data[:1] == b"E":
            self.scratch.write_bytes(data[1:])
            try:
                check_elf_extent(self.scratch)
            except OSError:
                pass
            return
        body = data[1:].ljust(len(self.cfg), b"\0")[:len(self.cfg)]
        self.cfg.raw = body
        self._exercise()

    def _exercise(self) -> None:
        with _quiet("mxc.library"):     # "no CPU forward" warnings
            self._exercise_quietly()

    def _exercise_quietly(self) -> None:
        import mxc
        from mxc.compiler.symbol import builder
        from mxc.library.native import calls, op_entry
        record = None
        try:
            record = mxc.library.load(self.lib_path, verbose=False)
            for name in record.registrations.get("operators", []):
                entry = op_entry(name)
                if entry is None:
                    continue
                nin, nout = calls.parse_attrs(entry, {})
                nin = min(nin, 4)
                calls.infer_type(entry, {}, ["float32"] * nin, nout)
                calls.infer_shape(entry, {}, [(2, 3)] * nin, nout)
                calls.mutate_inputs(entry, {})
                # the builder itself: mxc.sym.<name> leaves dunder names to Python
                sym = builder(name)(*[mxc.sym.var(f"x{i}") for i in range(nin)])
                sym.infer_shape(**{f"x{i}": (2, 3) for i in range(nin)})
        finally:
            if record is not None:
                mxc.library.unload(record)


# ---------------------------------------------------------------------------------------
# signing
# ---------------------------------------------------------------------------------------
class SigningTarget:
    def __init__(self, workdir: Path, rng: random.Random):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
        from mxc.runtime.signing import NamedKey, sign_manifest
        self.rng = rng
        priv = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        self.public = priv.public_key().public_bytes(serialization.Encoding.Raw,
                                                     serialization.PublicFormat.Raw)
        pem_pub = priv.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
        der_pub = priv.public_key().public_bytes(serialization.Encoding.DER,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
        pem_priv = priv.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
        self.manifest = json.dumps({"format": "mxc-artifact", "format_version": 1,
                                    "members": {"graph.json": {"size": 10, "sha256": "0" * 64}},
                                    "name": "mlp"}, indent=1).encode()
        plain = sign_manifest(self.manifest, priv)
        named = sign_manifest(self.manifest, NamedKey(priv, "mlp@3"))
        self.seeds = []
        for sig in (plain, named):
            for key in (pem_pub, der_pub, self.public, pem_priv, b"N" + pem_pub):
                self.seeds.append(_SPLIT.join([sig, key, self.manifest]))
        self.mutate = _mutator(self.seeds, rng)

    def make(self) -> bytes:
        return self.mutate()

    def __call__(self, data: bytes) -> None:
        with _quiet("mxc.signing"):     # private-key warnings
            self._check(data)

    def _check(self, data: bytes) -> None:
        from mxc.runtime.signing import NamedKey, load_public_key, verify_manifest
        from mxc.runtime.signing import _raw_public
        parts = data.split(_SPLIT)
        sig, key, manifest = (parts + [b"", b"", b""])[:3] if len(parts) >= 3 else \
            (data, self.public, self.manifest)
        if key[:1] == b"N":
            key = NamedKey(key[1:], "mlp@3")
        verify_manifest(manifest, sig, key, "<fuzz>")
        # it verified: it must be the real key, over the original manifest
        raw = _raw_public(load_public_key(key.key if isinstance(key, NamedKey) else key))
        if raw != self.public or manifest != self.manifest:
            raise AssertionError("a signature verified with another key or manifest")


# ---------------------------------------------------------------------------------------
# mxc.mxnet
# ---------------------------------------------------------------------------------------
_MXNET_SEEDS = [
    {"data_shapes": [["data", [4, 784]]], "set_params": True, "array": [[1, 2], [3, 4]],
     "index": [1, 0], "save": {"a": [1.0, 2.0]}},
    {"data_shapes": [["data", [4, 784]]], "label_shapes": [["softmax_label", [4]]],
     "set_params": True, "array": [1.5, -2.0, 3.0], "index": 2, "save": [[1, 2]]},
    {"data_shapes": [["data", [2, 5]]], "set_params": True, "array": "abc",
     "index": [0, 0, 0], "save": {"x": 3}},
    {"data_shapes": "data", "array": [[[]]], "index": "x"},
    {"data_shapes": [[None, [4, 784]]], "array": [[1], [2, 3]], "index": [[0, 1]]},
    {"data_shapes": [["data", "4,784"]], "label_shapes": 7, "array": None, "index": None},
    {"data_shapes": [["data", [2147483648, 2]]], "set_params": True},
    {"data_shapes": [["data", [4, -1]]], "array": {"k": 1}, "save": [1, 2]},
]
_MAX_HARNESS_ELEMENTS = 1 << 22
_VALUES = [None, True, False, -1, 0, 1, 3, 784, 2 ** 31 - 1, 2 ** 31, 2 ** 40, 2 ** 63, -2 ** 63,
           4.5, float("1e300"), "", "data", "softmax_label", "4,784", "x", [], {}, [4, 784],
           [4], [4, 784, 1], [None, [4, 784]], ["data"], [["data", [4, 784]]], [[1, 2], [3]],
           {"data": [4, 784]}, [[[[[]]]]], ["data", [4, 784], "extra"], [0, 0, 0, 0, 0, 0]]


def _edit(node, rng: random.Random):
    """*node* with one value somewhere inside it replaced (or added) at random."""
    if isinstance(node, dict) and node and rng.random() < 0.8:
        key = rng.choice(sorted(node))
        out = dict(node)
        out[key] = _edit(node[key], rng)
        return out
    if isinstance(node, list) and node and rng.random() < 0.8:
        i = rng.randrange(len(node))
        out = list(node)
        out[i] = _edit(node[i], rng)
        return out
    if isinstance(node, list) and rng.random() < 0.3:
        return node + [rng.choice(_VALUES)]
    return rng.choice(_VALUES)


def _too_big_for_the_harness(shapes) -> bool:
    """Shapes under MXNet's cap that would still allocate more than the harness allows."""
    from mxc.mxnet.module import MAX_TENSOR_ELEMENTS
    for item in shapes if isinstance(shapes, list) else []:
        shape = item[1] if isinstance(item, list) and len(item) >= 2 else None
        if isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape):
            size = 1
            for d in shape:
                size *= d
            if _MAX_HARNESS_ELEMENTS < size <= MAX_TENSOR_ELEMENTS:
                return True
    return False


class MXNetTarget:
    def __init__(self, workdir: Path, rng: random.Random):
        import mxc.mxnet as mx
        self.rng = rng
        self.sym, self.arg, self.aux = mx.model.load_checkpoint(
            str(ROOT / "examples" / "mlp" / "mlp"), 0)
        self.scratch = workdir / "saved.nd"
        self.seeds = [json.dumps(d).encode() for d in _MXNET_SEEDS]
        self.mutate = _mutator(self.seeds, rng)

    def make(self) -> bytes:
        """A structural edit of a seed document (3 in 4), else a byte mutation."""
        if self.rng.random() < 0.25:
            return self.mutate()
        doc = json.loads(self.rng.choice(self.seeds))
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            doc = _edit(doc, self.rng)
        return json.dumps(doc).encode()

    def __call__(self, data: bytes) -> None:
        import mxc.mxnet as mx
        from mxc.errors import MxcError
        try:
            doc = json.loads(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return                  # not a document of calls: nothing of mxc's ran
        if not isinstance(doc, dict):
            return
        if "data_shapes" in doc and not (_too_big_for_the_harness(doc["data_shapes"]) or
                                         _too_big_for_the_harness(doc.get("label_shapes"))):
            mod = mx.mod.Module(self.sym, context=mx.cpu())
            try:
                mod.bind(data_shapes=doc["data_shapes"], label_shapes=doc.get("label_shapes"),
                         for_training=False)
            except RuntimeError as exc:          # MXNet 1.9's type when shapes do not infer
                if not str(exc).startswith("simple_bind error") or isinstance(exc, MxcError):
                    raise
                return
            if doc.get("set_params"):
                mod.set_params(self.arg, self.aux)
        if "array" in doc:
            try:
                arr = mx.nd.array(doc["array"])
            except (TypeError, ValueError):      # MXNet 1.9's types for odd objects
                return
            index = doc.get("index")
            if isinstance(index, list):
                index = tuple(index)
            try:
                arr[index]
            except IndexError:                   # MXNet 1.9's type for odd indexing
                pass
        if "save" in doc:
            value = doc["save"]
            try:
                if isinstance(value, dict):
                    value = {str(k): mx.nd.array(v) if isinstance(v, list) else v
                             for k, v in value.items()}
                mx.nd.save(str(self.scratch), value)
            except (TypeError, ValueError):      # MXNet 1.9: save only accepts NDArrays
                pass


def make_target(name: str, workdir: Path, rng: random.Random):
    return {"native_library": NativeLibraryTarget, "signing": SigningTarget,
            "mxnet": MXNetTarget}[name](workdir, rng)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="mxc-fuzz-"))
