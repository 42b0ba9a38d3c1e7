"""CUDA artifacts carry compiled device code: SASS for the chosen architecture and PTX.

Original failure: a ``--target cuda`` artifact's library held the kernels'
CUDA C *source* (TVM 0.27 without its CUDA runtime keeps source), so the
deployment machine needed a CUDA compiler and nothing was compiled for the
architecture chosen.  The checks read the NVIDIA fatbin container inside the
exported library: its entry headers name the image kind (1 PTX, 2 ELF/SASS)
and the architecture; the PTX text itself is checked for ``.target sm_XY``
(zstd-decompressed with the ``zstd`` tool when nvcc compressed it).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

import mxc
from mxc.errors import BackendError

pytest.importorskip("tvm")

REPO = Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp" / "mlp"
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
PTX, ELF = 1, 2

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="nvcc (the CUDA toolkit) is not installed: CUDA compilation needs it")


def _library(model, tmp_path) -> bytes:
    path = model.save(tmp_path / "m.mxc")
    with zipfile.ZipFile(path) as z:
        return z.read("lib.so")


def _fatbin_entries(lib: bytes) -> list[tuple[int, int, bytes]]:
    """(kind, sm number, image bytes) of every entry of the library's fatbins."""
    entries, at = [], lib.find(FATBIN_MAGIC)
    while at >= 0:
        _magic, _version, header, size = struct.unpack_from("<IHHQ", lib, at)
        pos = at + header
        while pos < at + header + size:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", lib, pos)
            compressed = struct.unpack_from("<I", lib, pos + 16)[0]
            arch = struct.unpack_from("<I", lib, pos + 28)[0]
            flags = struct.unpack_from("<Q", lib, pos + 40)[0]
            image = lib[pos + entry_header:pos + entry_header + payload]
            if flags & 0x8000 and compressed:   # zstd-compressed image
                image = image[:compressed]
            entries.append((kind, arch, image))
            pos += entry_header + payload
        at = lib.find(FATBIN_MAGIC, at + header + size)
    return entries


def _ptx_text(image: bytes) -> str | None:
    if image.lstrip().startswith(b"//") or b".target" in image:
        return image.decode("utf-8", "replace")
    if shutil.which("zstd") is None:
        return None
    r = subprocess.run(["zstd", "-d", "-c", "-q"], input=image, capture_output=True)
    return r.stdout.decode("utf-8", "replace") or None


def _compile(target):
    sym, args, aux = mxc.load_checkpoint(str(MLP), 0)
    return mxc.compile(sym, (args, aux), {"data": (4, 784)}, target=target)


@pytest.mark.parametrize("arch", ["sm_80", None])
def test_cuda_library_holds_sass_and_ptx_for_the_architecture(tmp_path, arch):
    from mxc.backends.tvm.targets import with_cuda_arch
    model = _compile(with_cuda_arch("cuda", arch) if arch else "cuda")
    chosen = model.manifest["target"]["arch"]
    assert chosen == (arch or chosen) and chosen.startswith("sm_")
    number = int(chosen[3:])
    lib = _library(model, tmp_path)
    assert b"__global__" not in lib and b"extern \"C\"" not in lib   # no CUDA source left
    entries = _fatbin_entries(lib)
    assert {(kind, sm) for kind, sm, _ in entries} == {(ELF, number), (PTX, number)}
    sass = next(image for kind, _, image in entries if kind == ELF)
    assert sass.startswith(b"\x7fELF")
    ptx = _ptx_text(next(image for kind, _, image in entries if kind == PTX))
    if ptx is not None:     # without the zstd tool the entry header is the evidence
        assert f".target {chosen}" in ptx and ".entry" in ptx


def test_missing_nvcc_is_one_clear_error(monkeypatch, tmp_path):
    from mxc.backends.tvm import cuda_binary
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cuda_binary, "STANDARD_NVCC", str(tmp_path / "nvcc"))
    with pytest.raises(BackendError) as err:
        _compile("cuda")
    message = str(err.value)
    assert "\n" not in message and "needs nvcc" in message


def test_tvm_compile_callback_gives_the_same_fatbin_within_the_build_only():
    """Where TVM's CUDA runtime is loaded (a GPU machine) TVM compiles through the
    global ``tvm_callback_cuda_compile``: within the build it returns mxc's fatbin,
    after it TVM's own callback is back."""
    import tvm_ffi

    from mxc.backends.tvm.cuda_binary import device_compiler
    source = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    before = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    with device_compiler("sm_80"):
        image = bytes(tvm_ffi.get_global_func("tvm_callback_cuda_compile")(source))
    assert image.startswith(FATBIN_MAGIC)
    assert {(kind, sm) for kind, sm, _ in _fatbin_entries(image)} == {(ELF, 80), (PTX, 80)}
    assert tvm_ffi.get_global_func("tvm_callback_cuda_compile").same_as(before)
