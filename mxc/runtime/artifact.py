"""The ``.mxc`` artifact: one zip file holding everything a deployment needs.

Layout (every member is listed with its size and sha256 in the manifest)::

    model.mxc  (zip, comment "mxc-artifact 1")
    ├── manifest.json   format version, mxc/TVM versions, target, inputs/outputs,
    │                   regions, host nodes, pass pipeline, member checksums
    ├── graph.json      the runtime graph: value slots, steps (compiled regions and
    │                   host nodes), graph inputs/outputs
    ├── params.npz      parameters that are not compiled into the library
    │                   (host-node weights; every weight with bind_params=False)
    └── lib.so          the compiled library (``export_library``): Relax VM bytecode,
                        kernels and compiled-in constants; absent when nothing compiled

``manifest.json`` is always the first member, so a file is recognised by its
first bytes (:func:`is_artifact`).  Writing goes through
:func:`mxc.utils.atomic_open`: readers never see a partial file, even after
Ctrl-C.  Reading checks, in order, that the file is a complete zip, the
format and version, every member's checksum and that this machine can run
the target -- all before any library is loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import ArtifactError
from ..utils import atomic_open

FORMAT = "mxc-artifact"
FORMAT_VERSION = 1
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


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def write_artifact(path: str | os.PathLike, manifest: Mapping[str, Any], graph: Mapping,
                   params: Mapping[str, np.ndarray], library: bytes | None) -> None:
    """Write an artifact atomically: *path* is either the complete file or untouched.

    *manifest* gets its ``format``, ``format_version`` and ``members`` entries
    filled in here.
    """
    members: dict[str, bytes] = {GRAPH: json.dumps(graph, indent=1).encode()}
    if params:
        members[PARAMS] = _npz_bytes(params)
    if library is not None:
        members[LIBRARY] = library
    man = {"format": FORMAT, "format_version": FORMAT_VERSION, **dict(manifest)}
    man["members"] = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for name, data in members.items()}
    with atomic_open(path) as fh:
        with zipfile.ZipFile(fh, "w") as zf:
            zf.comment = ZIP_COMMENT
            _write_member(zf, MANIFEST, json.dumps(man, indent=1).encode())
            for name, data in members.items():
                _write_member(zf, name, data)


def _write_member(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    # the library and npz hardly compress; JSON does
    method = zipfile.ZIP_DEFLATED if name.endswith(".json") else zipfile.ZIP_STORED
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = method
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
def is_artifact(path: str | os.PathLike) -> bool:
    """True when *path* starts like an mxc artifact (a zip whose first member is the manifest)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(30 + len(MANIFEST))
    except OSError:
        return False
    return head[:4] == _MAGIC and head[30:] == MANIFEST.encode()


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest alone (format and version checked; members not verified)."""
    with _open_zip(path) as zf:
        return _manifest(zf, path)


def read_artifact(path: str | os.PathLike, *, check_target: bool = True) -> Artifact:
    """Read and verify an artifact; raises :class:`~mxc.errors.ArtifactError`.

    Checks the zip structure, the format and version, the checksum of every
    member and (*check_target*) that this machine can run the target.
    """
    with _open_zip(path) as zf:
        man = _manifest(zf, path)
        listed = man.get("members")
        if not isinstance(listed, dict):
            raise ArtifactError(f"{path}: manifest has no member list; the file is corrupt")
        extra = sorted(set(zf.namelist()) - set(listed) - {MANIFEST})
        if extra:
            raise ArtifactError(f"{path}: unexpected member(s) {', '.join(extra)} not listed in "
                                f"the manifest; the file was modified")
        data: dict[str, bytes] = {}
        for name, meta in listed.items():
            data[name] = _member(zf, name, meta, path)
    if check_target:
        check_target_runnable(man.get("target") or {}, path)
    try:
        graph = json.loads(data[GRAPH])
    except (KeyError, ValueError) as exc:
        raise ArtifactError(f"{path}: cannot read {GRAPH}: {exc}") from None
    params: dict[str, np.ndarray] = {}
    if PARAMS in data:
        try:
            with np.load(io.BytesIO(data[PARAMS]), allow_pickle=False) as npz:
                params = {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{path}: cannot read {PARAMS}: {exc}") from None
    return Artifact(man, graph, params, data.get(LIBRARY), str(path))


def _open_zip(path) -> zipfile.ZipFile:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot open artifact: {exc.strerror or exc}") from None
    if not is_artifact(path):
        if size == 0:
            raise ArtifactError(f"{path}: empty file, not an mxc artifact")
        raise ArtifactError(f"{path}: not an mxc artifact (expected a zip file whose first "
                            f"member is {MANIFEST})")
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"{path}: truncated or corrupt artifact ({exc}); write it again "
                            f"with `mxc compile`") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read artifact: {exc}") from None


def _read(zf: zipfile.ZipFile, name: str, path) -> bytes:
    try:
        return zf.read(name)
    except KeyError:
        raise ArtifactError(f"{path}: member {name} is missing; the file is corrupt") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as exc:
        raise ArtifactError(f"{path}: member {name} is corrupt ({exc})") from None


def _manifest(zf: zipfile.ZipFile, path) -> dict:
    try:
        man = json.loads(_read(zf, MANIFEST, path))
    except ValueError as exc:
        raise ArtifactError(f"{path}: manifest is not valid JSON ({exc})") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not an mxc artifact (manifest format "
                            f"{man.get('format') if isinstance(man, dict) else None!r})")
    version = man.get("format_version")
    if version != FORMAT_VERSION:
        hint = ("written by a newer mxc; upgrade mxc" if isinstance(version, int)
                and version > FORMAT_VERSION else "recompile the model with this mxc")
        raise ArtifactError(f"{path}: artifact format version {version!r}, this mxc reads "
                            f"version {FORMAT_VERSION} ({hint})")
    return man


def _member(zf: zipfile.ZipFile, name: str, meta: Any, path) -> bytes:
    if not isinstance(meta, dict) or "sha256" not in meta:
        raise ArtifactError(f"{path}: manifest entry of {name} has no checksum")
    data = _read(zf, name, path)
    if len(data) != meta.get("size") or hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ArtifactError(f"{path}: checksum mismatch for {name}; the file is corrupt or was "
                            f"modified")
    return data


def extract_library(data: bytes) -> tuple[str, str]:
    """Write the library into a fresh private directory; returns (dir, file path)."""
    tmp = tempfile.mkdtemp(prefix="mxc-lib-")  # mode 0700
    lib = os.path.join(tmp, LIBRARY)
    fd = os.open(lib, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return tmp, lib


# ---------------------------------------------------------------------------
# can this machine run the target?
# ---------------------------------------------------------------------------
#: LLVM feature name -> /proc/cpuinfo flag (x86_64)
_X86_FLAGS = {
    "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse4a": "sse4a",
    "popcnt": "popcnt", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
    "bmi": "bmi1", "bmi2": "bmi2", "movbe": "movbe", "aes": "aes", "pclmul": "pclmulqdq",
    "sha": "sha_ni", "adx": "adx", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "gfni": "gfni",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512cd": "avx512cd", "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16", "avx512vbmi": "avx512vbmi",
    "avx512ifma": "avx512ifma", "avxvnni": "avx_vnni", "amx-tile": "amx_tile",
    "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
}
#: LLVM feature name -> /proc/cpuinfo "Features" entry (aarch64)
_ARM_FLAGS = {"neon": "asimd", "sve": "sve", "sve2": "sve2", "dotprod": "asimddp",
              "fullfp16": "asimdhp", "i8mm": "i8mm", "bf16": "bf16"}
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def machine_arch() -> str:
    m = platform.machine().lower()
    return _ARCH_ALIASES.get(m, m)


def _cpu_flags() -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (None where unavailable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    found = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    return set(found.group(1).split()) if found else None


def missing_cpu_features(features: list[str], arch: str) -> list[str]:
    """Features of *features* (LLVM names) this CPU is known to lack."""
    table = _X86_FLAGS if arch == "x86_64" else _ARM_FLAGS if arch == "aarch64" else {}
    flags = _cpu_flags()
    if flags is None or not table:
        return []
    return [f for f in features if f in table and table[f] not in flags]


def check_target_runnable(target: Mapping[str, Any], path: Any = "artifact") -> None:
    """Raise :class:`ArtifactError` when this machine cannot run *target* (a manifest entry).

    ``target["host"]`` describes the CPU code (kernels of an ``llvm`` target;
    the VM's host side of a ``cuda`` one): its architecture must be this
    machine's and every CPU feature it was compiled for must be present.
    A ``cuda`` target also needs a usable GPU of a compatible architecture.
    """
    kind = target.get("kind")
    if kind not in ("llvm", "cuda"):
        raise ArtifactError(f"{path}: the mxc runtime cannot run target kind {kind!r} "
                            f"(supported: llvm, cuda)")
    host = target.get("host") or {}
    arch = host.get("arch")
    if arch and arch != machine_arch():
        raise ArtifactError(f"{path}: compiled for {arch} CPUs ({target.get('string')}), this "
                            f"machine is {machine_arch()}; recompile the model on this machine")
    missing = missing_cpu_features(list(host.get("features") or ()), arch or machine_arch())
    if missing:
        raise ArtifactError(
            f"{path}: compiled for CPU {host.get('cpu') or '?'!r} using "
            f"{', '.join(missing)}, which this CPU lacks; recompile on this machine or for an "
            f"older CPU (--target '{{\"kind\": \"llvm\", \"mcpu\": \"x86-64-v2\"}}')")
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
