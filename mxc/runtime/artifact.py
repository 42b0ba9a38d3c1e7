"""The ``.mxc`` artifact: one zip file holding everything a deployment needs.

Layout (every member is listed with its size and sha256 in the manifest)::

    model.mxc  (zip, comment "mxc-artifact 1")
    ├── manifest.json   format version, mxc/TVM versions, target, inputs/outputs,
    │                   regions, host nodes, pass pipeline, member checksums
    ├── graph.json      the runtime graph: value slots, steps (compiled regions and
    │                   host nodes), graph inputs/outputs
    ├── params.npz      parameters that are not compiled into the library
    │                   (host-node weights; every weight with bind_params=False)
    ├── lib.so          the compiled library (``export_library``): Relax VM bytecode,
    │                   kernels and compiled-in constants; absent when nothing compiled
    └── manifest.sig    (signed artifacts only) Ed25519 signature of manifest.json,
                        second member (see :mod:`mxc.runtime.signing`)

``manifest.json`` is always the first member, so a file is recognised by its
first bytes (:func:`is_artifact`).  Writing goes through
:func:`mxc.atomic_files.atomic_open`: readers never see a partial file, even after
Ctrl-C.  Reading checks, in order, that the file is a regular file and a complete
zip, the signature (when a verify key is given), the format, version and
fields of the manifest, every member's declared size (before decompressing)
and checksum, that this machine can run the target, and the runtime graph's
fields -- all before any library is written to disk or loaded.  Loading an
artifact runs the native code in ``lib.so``: only load artifacts you trust,
or verify their signature (``verify_key=``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import ArtifactError, MxcError
from ..atomic_files import atomic_open, clean_stale
from ..memory_limits import allocatable_bytes, checked_nbytes
from .bfloat16 import npz_arrays, npz_bytes
from .cpu_features import ARCH_NAMES, canonical_arch, host_cpu, machine_arch  # noqa: F401 - machine_arch: API
from .signing import SIGNATURE
from .plan import Plan
from .validate import validate_dynamic, validate_manifest

FORMAT = "mxc-artifact"
FORMAT_VERSION = 1
#: a dynamic-batch artifact (batch buckets, :mod:`mxc.runtime.buckets`): a version a
#: runtime that reads 1 only refuses ("written by a newer mxc")
BUCKETS_FORMAT_VERSION = 2
ZIP_COMMENT = f"{FORMAT} {FORMAT_VERSION}".encode()
MANIFEST = "manifest.json"
GRAPH = "graph.json"
PARAMS = "params.npz"
LIBRARY = "lib.so"
_MAGIC = b"PK\x03\x04"


@dataclass
class Artifact:
    """The decoded members of an artifact (the library stays bytes until loaded)."""

    manifest: dict
    graph: dict
    params: dict[str, np.ndarray] = field(default_factory=dict)
    library: bytes | None = None
    path: str | None = None
    plan: Plan | None = None   # ``graph`` validated and typed (what a Session executes)
    members: dict[str, bytes] = field(default_factory=dict)  # the other buckets' members


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def write_artifact(path: str | os.PathLike, manifest: Mapping[str, Any], graph: Plan | Mapping,
                   params: Mapping[str, np.ndarray], library: bytes | None, *,
                   sign: Any = None, extra: Mapping[str, bytes] | None = None) -> None:
    """Write an artifact atomically: *path* is either the complete file or untouched.

    *extra*: more members by name (the other buckets of a dynamic-batch artifact,
    whose manifest's ``dynamic_batch`` section makes it format version 2).

    *manifest* gets its ``format``, ``format_version`` and ``members`` entries
    filled in here.  *sign*: an Ed25519 private key (PEM file path, bytes or
    key object) to sign the manifest with (:mod:`mxc.runtime.signing`).
    """
    if isinstance(graph, Plan):
        graph = graph.to_json()
    members: dict[str, bytes] = {GRAPH: json.dumps(graph, indent=1).encode()}
    if params:
        members[PARAMS] = npz_bytes(params)
    if library is not None:
        members[LIBRARY] = library
    members.update(extra or {})
    version = BUCKETS_FORMAT_VERSION if "dynamic_batch" in manifest else FORMAT_VERSION
    man = {"format": FORMAT, "format_version": version, **dict(manifest)}
    man["members"] = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for name, data in members.items()}
    man_bytes = json.dumps(man, indent=1).encode()
    signature = None
    if sign is not None:
        from .signing import sign_manifest
        signature = sign_manifest(man_bytes, sign)
    with atomic_open(path) as fh:
        with zipfile.ZipFile(fh, "w") as zf:
            zf.comment = f"{FORMAT} {version}".encode()
            _write_member(zf, MANIFEST, man_bytes)
            if signature is not None:
                _write_member(zf, SIGNATURE, signature)
            for name, data in members.items():
                _write_member(zf, name, data)


#: a library up to this size is deflated: its code (a third or more of a small model's
#: library) shrinks ~3x, and inflating it costs a few ms at load; a larger one is mostly
#: weights, which shrink ~8%, not worth inflating tens of MB at every load
DEFLATE_LIBRARY_MAX = 8 << 20


def _write_member(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    # JSON compresses; weights (npz, most of a large library) hardly do
    deflate = name.endswith(".json") or (name == LIBRARY and len(data) <= DEFLATE_LIBRARY_MAX)
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data, compresslevel=1 if name == LIBRARY else None)


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
#: hard caps, checked against the sizes the zip declares *before* decompressing
MAX_MANIFEST_BYTES = 1 << 20
MAX_GRAPH_BYTES = 256 << 20
MAX_MEMBER_BYTES = 1 << 36


def _regular(path) -> os.stat_result:
    """The file's stat; refuses what is not a regular file (a FIFO would block ``open``)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path}: cannot open artifact: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if
                stat.S_ISFIFO(st.st_mode) else "a device or socket")
        raise ArtifactError(f"{path}: is {kind}, not an artifact file")
    return st


def is_artifact(path: str | os.PathLike) -> bool:
    """True when *path* is a regular file that starts like an mxc artifact."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            head = fh.read(30 + len(MANIFEST))
    except (OSError, ValueError):
        return False
    return head[:4] == _MAGIC and head[30:] == MANIFEST.encode()


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest alone (format, version and fields checked; members not verified)."""
    with _open_zip(path) as zf:
        return _parse_manifest(_read(zf, MANIFEST, MAX_MANIFEST_BYTES, path), path)


def read_artifact(path: str | os.PathLike, *, check_target: bool = True,
                  verify_key: Any = None) -> Artifact:
    """Read and verify an artifact; raises :class:`~mxc.errors.ArtifactError`.

    In order: the file is a regular, complete zip; with *verify_key*, the
    manifest's signature verifies (before any other member is read); the
    manifest's fields are valid; every member's size in the zip matches the
    manifest *before* it is decompressed, and its checksum after; (*check_target*)
    this machine can run the target; ``graph.json`` and ``params.npz`` are valid.
    """
    with _open_zip(path) as zf:
        man_bytes = _read(zf, MANIFEST, MAX_MANIFEST_BYTES, path)
        names = _namelist(zf, path)
        if verify_key is not None:
            from .signing import MAX_SIGNATURE_BYTES, SIGNATURE as SIG, verify_manifest
            sig = _read(zf, SIG, MAX_SIGNATURE_BYTES, path) if SIG in names else None
            verify_manifest(man_bytes, sig, verify_key, path)
        man = _parse_manifest(man_bytes, path)
        listed = man["members"]
        extra = sorted(set(names) - set(listed) - {MANIFEST, SIGNATURE})
        if extra:
            raise ArtifactError(f"{path}: unexpected member(s) {', '.join(extra)} not listed in "
                                f"the manifest; the file was modified")
        if GRAPH not in listed:
            raise ArtifactError(f"{path}: manifest.json: members: {GRAPH} is not listed; the "
                                f"file is corrupt")
        _check_declared_sizes(zf, listed, path)
        data = {name: _member(zf, name, meta, path) for name, meta in listed.items()}
    if check_target:
        check_target_runnable(man["target"], path)
    graph = _json(data[GRAPH], GRAPH, path)
    plan = Plan.from_json(graph, path, check_bytes=lambda shape, dtype, what: _check_alloc(
        shape, dtype, what, path))
    params = read_npz(data[PARAMS], path) if PARAMS in data else {}
    rest = {k: v for k, v in data.items() if k not in (GRAPH, PARAMS, LIBRARY)}
    return Artifact(man, graph, params, data.get(LIBRARY), str(path), plan, rest)


def _open_zip(path) -> zipfile.ZipFile:
    st = _regular(path)
    if not is_artifact(path):
        if st.st_size == 0:
            raise ArtifactError(f"{path}: empty file, not an mxc artifact")
        raise ArtifactError(f"{path}: not an mxc artifact (expected a zip file whose first "
                            f"member is {MANIFEST})")
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"{path}: truncated or corrupt artifact ({exc}); write it again "
                            f"with `mxc compile`") from None
    except Exception as exc:  # noqa: BLE001 - zipfile raises many kinds on corrupt input
        raise ArtifactError(f"{path}: cannot read artifact: {type(exc).__name__}: {exc}"
                            ) from None


def _namelist(zf: zipfile.ZipFile, path) -> list[str]:
    names = zf.namelist()
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ArtifactError(f"{path}: member(s) {', '.join(dup)} appear twice; the file was "
                            f"modified")
    return names


def _read(zf: zipfile.ZipFile, name: str, limit: int, path) -> bytes:
    """Member *name*, refusing (before decompressing) more than *limit* bytes."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ArtifactError(f"{path}: member {name} is missing; the file is corrupt") from None
    if info.file_size > limit:
        raise ArtifactError(f"{path}: member {name} declares {info.file_size:,} bytes, more "
                            f"than the {limit:,} allowed; the file is corrupt or hostile")
    if info.flag_bits & 0x1:
        raise ArtifactError(f"{path}: member {name} is encrypted; mxc artifacts never are")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ArtifactError(f"{path}: member {name} uses compression method "
                            f"{info.compress_type}; mxc artifacts use stored or deflated only")
    try:
        with zf.open(info) as fh:
            data = fh.read(limit + 1)
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, EOFError, ...
        raise ArtifactError(f"{path}: member {name} is corrupt ({type(exc).__name__}: "
                            f"{exc})") from None
    if len(data) > limit:
        raise ArtifactError(f"{path}: member {name} inflates beyond {limit:,} bytes")
    return data


def _json(data: bytes, name: str, path) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # (UnicodeDecodeError is a ValueError)
        raise ArtifactError(f"{path}: {name} is not valid JSON ({type(exc).__name__}: "
                            f"{str(exc)[:200]})") from None


def _parse_manifest(data: bytes, path) -> dict:
    man = _json(data, MANIFEST, path)
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not an mxc artifact (manifest format "
                            f"{man.get('format') if isinstance(man, dict) else None!r})")
    version = man.get("format_version")
    if version not in (FORMAT_VERSION, BUCKETS_FORMAT_VERSION) or isinstance(version, bool):
        hint = ("written by a newer mxc; upgrade mxc" if isinstance(version, int)
                and version > BUCKETS_FORMAT_VERSION else "recompile the model with this mxc")
        raise ArtifactError(f"{path}: artifact format version {version!r}, this mxc reads "
                            f"versions {FORMAT_VERSION} and {BUCKETS_FORMAT_VERSION} ({hint})")
    validate_manifest(man, path, max_member=MAX_MEMBER_BYTES)
    if version == BUCKETS_FORMAT_VERSION or "dynamic_batch" in man:
        if version != BUCKETS_FORMAT_VERSION:
            raise ArtifactError(f"{path}: manifest.json: a dynamic_batch section in a format "
                                f"version {version} artifact; the file was modified")
        validate_dynamic(man, path)
    return man


def _check_declared_sizes(zf: zipfile.ZipFile, listed: Mapping[str, Any], path) -> None:
    """Sizes in the zip must match the manifest, and their sum must be allocatable."""
    total = 0
    for name, meta in listed.items():
        try:
            info = zf.getinfo(name)
        except KeyError:
            raise ArtifactError(f"{path}: member {name} is missing; the file is corrupt") from None
        if info.file_size != meta["size"]:
            raise ArtifactError(f"{path}: member {name}: the zip declares {info.file_size:,} "
                                f"bytes, the manifest {meta['size']:,}; the file is corrupt or "
                                f"was modified")
        if name == GRAPH and info.file_size > MAX_GRAPH_BYTES:
            raise ArtifactError(f"{path}: member {name} declares {info.file_size:,} bytes, more "
                                f"than the {MAX_GRAPH_BYTES:,} allowed")
        total += info.file_size
    limit, source = allocatable_bytes()
    if total > limit:
        raise ArtifactError(f"{path}: members declare {total:,} bytes in all, more than this "
                            f"process may allocate ({limit:,} bytes: {source})")


def _member(zf: zipfile.ZipFile, name: str, meta: Mapping[str, Any], path) -> bytes:
    data = _read(zf, name, meta["size"], path)
    if len(data) != meta["size"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ArtifactError(f"{path}: checksum mismatch for {name}; the file is corrupt or was "
                            f"modified")
    return data


def _check_alloc(shape: tuple, dtype: str, what: str, path) -> None:
    try:
        checked_nbytes(shape, np.dtype(dtype).itemsize if dtype != "bfloat16" else 2, what)
    except MxcError as exc:
        raise ArtifactError(f"{path}: {exc}") from None


def read_npz(data: bytes, path) -> dict[str, np.ndarray]:
    """``params.npz``: stored (uncompressed) arrays only, so nothing inflates beyond the file."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            for info in inner.infolist():
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data) \
                        or info.flag_bits & 0x1:
                    raise ArtifactError(f"{path}: member {PARAMS}: array {info.filename!r} is "
                                        f"compressed, encrypted or larger than the file; mxc "
                                        f"writes stored arrays only")
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return npz_arrays(npz, f"{path}: {PARAMS}")
    except ArtifactError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile raise many kinds on corrupt input
        raise ArtifactError(f"{path}: member {PARAMS} is corrupt ({type(exc).__name__}: "
                            f"{str(exc)[:200]})") from None


def extract_library(data: bytes) -> tuple[str, str]:
    """Write the library into a fresh private directory; returns (dir, file path).

    The directory's name carries this process's id, so one left behind by a
    crash inside ``dlopen`` is removed by the next extraction.
    """
    clean_stale(tempfile.gettempdir(), "mxc-lib-*")
    tmp = tempfile.mkdtemp(prefix=f"mxc-lib-{os.getpid()}-")  # mode 0700
    lib = os.path.join(tmp, LIBRARY)
    fd = os.open(lib, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return tmp, lib


# ---------------------------------------------------------------------------
# can this machine run the target?
# ---------------------------------------------------------------------------
def missing_cpu_features(features: list[str], arch: str) -> list[str]:
    """Features of *features* (LLVM names) this CPU is known to lack, by the kernel's
    report (:func:`~mxc.runtime.cpu_features.host_cpu`, which the compiler asks too);
    [] for another architecture's features or where the kernel reports nothing."""
    host = host_cpu()
    return host.missing(features) if canonical_arch(arch) == host.arch else []


#: per architecture, the ``--cpu`` that builds for its oldest common CPUs: what a refusal
#: for missing features suggests (in the terms of the artifact's architecture)
OLDER_CPU_HINTS = {
    "x86_64": "--cpu x86-64-v2, or --target '{\"kind\": \"llvm\", \"mcpu\": \"x86-64-v2\"}'",
    "aarch64": "--cpu cortex-a72, the Raspberry Pi 4's, or --cpu generic "
               "--triple aarch64-linux-gnu",
    "arm": "--cpu cortex-a7, or --cpu generic --triple armv7l-linux-gnueabihf",
}


def check_target_runnable(target: Mapping[str, Any], path: Any = "artifact") -> None:
    """Raise :class:`ArtifactError` when this machine cannot run *target* (a manifest entry).

    ``target["host"]`` describes the CPU code (kernels of an ``llvm`` target;
    the VM's host side of a ``cuda`` one): its architecture must be this
    machine's and every CPU feature it was compiled for must be present.
    A ``cuda`` target also needs a usable GPU of a compatible architecture.
    The messages speak of the artifact's architecture (an aarch64 artifact is never
    told to use an x86 CPU).
    """
    kind = target.get("kind")
    if kind not in ("llvm", "cuda"):
        raise ArtifactError(f"{path}: the mxc runtime cannot run target kind {kind!r} "
                            f"(supported: llvm, cuda)")
    host = target.get("host") or {}
    arch = canonical_arch(host["arch"]) if host.get("arch") else None
    here = host_cpu().arch   # the one "this CPU" (a test simulating an ARM host sets it)
    if arch and arch != here:
        raise ArtifactError(f"{path}: compiled for {ARCH_NAMES.get(arch, arch)} CPUs "
                            f"({host.get('cpu') or 'generic'}, "
                            f"{host.get('triple') or target.get('string')}), this machine is "
                            f"{ARCH_NAMES.get(here, here)}; recompile the model for this "
                            f"machine (--cpu host)")
    missing = missing_cpu_features(list(host.get("features") or ()), arch or here)
    if missing:
        hint = OLDER_CPU_HINTS.get(arch or here, "--cpu generic")
        raise ArtifactError(
            f"{path}: compiled for {ARCH_NAMES.get(arch or here, arch or here)} CPU "
            f"{host.get('cpu') or '?'!r} using {', '.join(missing)}, which this CPU lacks; "
            f"recompile on this machine or for an older CPU ({hint})")
    if "amx-tile" in (host.get("features") or ()):
        from .amx_permission import request_tiles
        refused = request_tiles()
        if refused:
            raise ArtifactError(f"{path}: its kernels use AMX tiles, but {refused}; recompile "
                                f"for a CPU without AMX (--cpu icelake-server)")
    if kind == "cuda":
        _check_cuda(str(target.get("arch") or ""), path)


def _check_cuda(want: str, path: Any) -> None:
    from . import _tvm
    if not _tvm.has_cuda():
        raise ArtifactError(f"{path}: compiled for CUDA ({want or 'GPU'}), but this machine has "
                            f"no usable CUDA GPU (or TVM's CUDA runtime cannot load); run it on "
                            f"a GPU machine or recompile with --target llvm")
    have = _tvm.cuda_compute_version()
    if want.startswith("sm_") and have:
        # the kernels travel as CUDA source that TVM compiles for the GPU present when the
        # artifact loads, so any GPU at least as new as the one scheduled for runs them
        wmaj, wmin = _sm(want)
        hmaj, hmin = (int(x) for x in have.split(".")[:2])
        if (hmaj, hmin) < (wmaj, wmin):
            raise ArtifactError(f"{path}: compiled for {want}, this GPU is sm_{hmaj}{hmin}, "
                                f"an older architecture: recompile with --target cuda "
                                f"--cuda-arch sm_{hmaj}{hmin}")


def _sm(arch: str) -> tuple[int, int]:
    digits = re.sub(r"\D", "", arch)
    return (int(digits[:-1]), int(digits[-1])) if len(digits) >= 2 else (0, 0)
