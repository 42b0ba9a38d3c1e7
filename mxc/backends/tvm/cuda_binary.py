"""CUDA device code in an artifact: SASS for the chosen architecture plus PTX.

TVM 0.27's CUDA code generator emits CUDA C source.  Where TVM's CUDA runtime
is loaded (a machine with a GPU driver) it compiles that source at once
through the global ``tvm_callback_cuda_compile``; elsewhere it keeps the
*source* in the device module (format ``"cuda"``), and the deployment machine
would have to compile it when loading -- needing nvcc or NVRTC and the
``tvm`` Python callback there.

mxc compiles the source itself, on the build machine, with nvcc into one
fatbin holding two images: SASS for the target's architecture (``sm_XY``,
loaded directly) and PTX for the same virtual architecture (``compute_XY``),
which the driver JIT-compiles on GPUs newer than ``sm_XY``.  Both paths use
:func:`compile_fatbin`:

* :func:`device_compiler` -- scoped around ``tvm.compile``; checks nvcc is
  there and makes ``tvm_callback_cuda_compile`` produce the fatbin (GPU
  machines);
* :func:`pack_imports` -- an ``export_library(fpack_imports=...)`` hook that
  replaces every CUDA module still holding source with the fatbin (GPU-less
  build machines).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterator

from ...errors import BackendError

log = logging.getLogger(__name__)

_CALLBACK = "tvm_callback_cuda_compile"
#: where the CUDA toolkit installs nvcc when it is on neither PATH nor $CUDA_HOME
STANDARD_NVCC = "/usr/local/cuda/bin/nvcc"
_U64 = struct.Struct("<Q")


def find_nvcc() -> str:
    """nvcc's path ($CUDA_HOME/bin, PATH, /usr/local/cuda/bin), else one clear error."""
    candidates = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "bin", "nvcc"))
    found = shutil.which("nvcc")
    if found:
        candidates.append(found)
    candidates.append(STANDARD_NVCC)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise BackendError("compiling for CUDA needs nvcc (the CUDA toolkit): none on PATH, in "
                       "$CUDA_HOME/bin or /usr/local/cuda/bin")


def _arch_number(arch: str) -> str:
    match = re.fullmatch(r"sm_(\d+[a-z]?)", arch)
    if not match:
        raise BackendError(f"CUDA architecture {arch!r}: expected sm_XY (sm_75, sm_80 ...)")
    return match.group(1)


def gencode_flags(arch: str) -> list[str]:
    """nvcc flags embedding SASS for *arch* and PTX for its virtual architecture."""
    num = _arch_number(arch)
    return ["-gencode", f"arch=compute_{num},code=[sm_{num},compute_{num}]"]


def compile_fatbin(source: str, arch: str) -> bytes:
    """Compile CUDA C *source* into a fatbin with ``sm_XY`` SASS and ``compute_XY`` PTX."""
    nvcc = find_nvcc()
    with tempfile.TemporaryDirectory(prefix="mxc-nvcc-") as tmp:
        src = os.path.join(tmp, "kernels.cu")
        out = os.path.join(tmp, "kernels.fatbin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        # the half/bfloat16 operator switches TVM's generated code relies on
        cmd = [nvcc, "--fatbin", "-O3", *gencode_flags(arch),
               "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
               "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
               "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
               "--expt-relaxed-constexpr", "--use_fast_math", "-o", out, src]
        log.debug("compiling CUDA kernels: %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise BackendError(f"nvcc failed compiling the CUDA kernels for {arch}: "
                               + (detail[0] if detail else f"exit status {proc.returncode}"))
        with open(out, "rb") as f:
            return f.read()


@contextlib.contextmanager
def device_compiler(arch: str) -> Iterator[None]:
    """Within the block, TVM compiles CUDA source with :func:`compile_fatbin` for *arch*.

    The global callback is replaced for the block only and restored after
    (where TVM's CUDA runtime is not loaded it is never called: the source
    stays in the module and :func:`pack_imports` compiles it at export).
    """
    import tvm_ffi

    find_nvcc()  # a missing nvcc is one clear error before any work
    _arch_number(arch)
    previous = tvm_ffi.get_global_func(_CALLBACK, allow_missing=True)

    def _compile(code, *_ignored):
        return bytearray(compile_fatbin(str(code), arch))

    tvm_ffi.register_global_func(_CALLBACK, _compile, override=True)
    try:
        yield
    finally:
        if previous is not None:
            tvm_ffi.register_global_func(_CALLBACK, previous, override=True)


def _embed_fatbins(blob: bytes, sources: list[str], arch: str) -> bytes:
    """*blob* (a packed import tree) with each CUDA module holding *sources* compiled.

    A CUDA module's payload is serialised as ``[u64 size][fmt][fmap][code]``
    (fmt a length-prefixed string, code length-prefixed bytes); one holding
    source has fmt ``"cuda"``.  It is rebuilt with fmt ``"fatbin"`` and the
    compiled code, and the blob's total size (its first u64) updated.
    """
    fmt_src = _U64.pack(4) + b"cuda"
    body, compiled = blob[8:], 0
    for source in sources:
        code = source.encode("utf-8")
        code_at = body.find(_U64.pack(len(code)) + code)
        if code_at < 0:  # compiled already (TVM's CUDA runtime ran device_compiler's callback)
            continue
        end = code_at + 8 + len(code)
        at = body.rfind(fmt_src, 0, code_at)
        while at >= 8 and _U64.unpack_from(body, at - 8)[0] != end - at:
            at = body.rfind(fmt_src, 0, at)
        if at < 8:
            raise BackendError("exporting CUDA kernels: no CUDA module header before the "
                               "kernel source in TVM's packed imports")
        fatbin = compile_fatbin(source, arch)
        payload = (_U64.pack(6) + b"fatbin" + body[at + len(fmt_src):code_at]
                   + _U64.pack(len(fatbin)) + fatbin)
        body = body[:at - 8] + _U64.pack(len(payload)) + payload + body[end:]
        compiled += 1
    log.info("embedded %d CUDA module(s) as fatbin (SASS sm_%s, PTX compute_%s)",
             compiled, _arch_number(arch), _arch_number(arch))
    return _U64.pack(len(body)) + body


_ASSEMBLY = """\
    .section .rodata
    .globl {symbol}
    .type {symbol}, @object
    .balign 16
{symbol}:
    .incbin "{blob}"
    .size {symbol}, . - {symbol}
    .section .note.GNU-stack,"",@progbits
"""


def pack_imports(arch: str) -> Callable:
    """An ``export_library(fpack_imports=...)`` hook embedding compiled CUDA modules.

    The packed import tree (TVM's bytes, CUDA sources replaced by fatbins) is
    linked in as the data symbol TVM's loader reads, through an assembler
    ``.incbin`` -- no source text of the (possibly weight-sized) blob.
    """

    def _pack(module, is_system_lib, prefix, workspace_dir):
        from tvm.runtime import _ffi_api

        if is_system_lib:
            raise BackendError("exporting CUDA kernels into a system library is not supported")
        blob = _ffi_api.ModulePackImportsToTensor(module).numpy().tobytes()
        sources = [str(m.inspect_source("cuda")) for m in _cuda_source_modules(module)]
        if sources:
            blob = _embed_fatbins(blob, sources, arch)
        blob_path = os.path.join(workspace_dir, f"{prefix}devc.bin")
        with open(blob_path, "wb") as f:
            f.write(blob)
        path = os.path.join(workspace_dir, f"{prefix}devc.S")
        with open(path, "w", encoding="utf-8") as f:
            f.write(_ASSEMBLY.format(symbol=f"{prefix}__tvm_ffi__library_bin", blob=blob_path))
        return path

    return _pack


def _cuda_source_modules(module) -> list:
    """The CUDA modules under *module* that hold source (TVM's CUDA runtime not loaded)."""
    found, stack = [], list(module.imports)
    while stack:
        mod = stack.pop()
        stack.extend(mod.imports)
        if mod.kind == "cuda":
            try:
                if str(mod.inspect_source("cuda")).strip():
                    found.append(mod)
            except Exception:  # noqa: BLE001 - a compiled module has no source to give
                pass
    return found
