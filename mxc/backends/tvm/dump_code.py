"""The code a compile generated, written out for reading (``mxc compile --dump-code``).

tvmc's ``--dump-code tir,ll,asm`` writes the compiled module's sources beside
its output; mxc does the same for an artifact:

* ``tir`` -- each kernel's TIR as scheduled (the PrimFuncs of the module at
  the end of the Relax pipeline, before TVM's lowering to the packed calling
  convention makes them unreadable), taken by a pass instrument during the
  compile (:func:`capture_tir`);
* ``ll`` / ``asm`` -- the LLVM IR and the assembly of the CPU library (one
  module holding every kernel), from the built executable.

:func:`write_code` writes either ``OUT.tir`` / ``OUT.ll`` / ``OUT.asm`` beside
the artifact ``OUT`` (tvmc's naming) or, given a directory, one ``KERNEL.tir``
per kernel there with ``NAME.ll`` and ``NAME.asm``.  For a CUDA artifact ``ll``
and ``asm`` are the host code's (the kernels' PTX is in the artifact).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

#: the formats, in tvmc's spelling (also the suffixes of the files)
FORMATS = ("tir", "ll", "asm")


class TIRCapture:
    """The kernels (name -> TIR text) of the last module a pass left holding both Relax
    functions and PrimFuncs: the scheduled kernels, before lowering to machine calls."""

    def __init__(self) -> None:
        self._funcs: dict = {}

    @property
    def kernels(self) -> dict[str, str]:
        return {name: f.script() for name, f in sorted(self._funcs.items())}

    def instrument(self):
        from tvm.ir.instrument import pass_instrument
        from .build_stage import _prim_funcs
        owner = self

        @pass_instrument
        class _LastScheduledTIR:
            def run_after_pass(self, mod, info):
                funcs = _prim_funcs(mod)
                if funcs and len(funcs) < len(list(mod.functions_items())):
                    owner._funcs = funcs

        return _LastScheduledTIR()


@contextlib.contextmanager
def capture_tir() -> Iterator[TIRCapture]:
    """Within the block, compiles record their scheduled TIR in the capture yielded (the
    build keeps the instruments of the enclosing ``PassContext``)."""
    import tvm
    capture = TIRCapture()
    cur = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(opt_level=cur.opt_level, required_pass=cur.required_pass,
                                   disabled_pass=cur.disabled_pass, config=cur.config,
                                   instruments=list(cur.instruments) + [capture.instrument()]):
        yield capture


def library_source(executable, fmt: str) -> str:
    """The LLVM IR (``ll``) or assembly (``asm``) of the executable's CPU library."""
    if executable is None:
        return ""
    return "\n".join(m.inspect_source(fmt) for m in executable.mod.imports if m.kind == "llvm")


#: longest kernel file name written (bytes): file systems allow 255, and the atomic
#: write's temporary name beside it adds about 30
MAX_FILE_NAME = 200


def kernel_file_name(name: str) -> str:
    """``NAME.tir``, or for a kernel name too long to be a file name (fused kernels of
    deep graphs reach thousands of characters) its start and a hash of the whole name,
    so that names stay distinct and the TIR inside still says the full name."""
    file_name = f"{name}.tir"
    if len(file_name.encode()) <= MAX_FILE_NAME:
        return file_name
    import hashlib
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    head = name.encode()[:MAX_FILE_NAME - len(digest) - len("-.tir")].decode(errors="ignore")
    return f"{head}-{digest}.tir"


def write_code(formats: list[str], out: Path, directory: Path | None, *,
               kernels: dict[str, str], executable) -> list[Path]:
    """Write *formats* as tvmc does, beside the artifact *out* (``OUT.tir``, ``OUT.ll``,
    ``OUT.asm``), or into *directory*: one ``KERNEL.tir`` per kernel, ``STEM.ll`` and
    ``STEM.asm`` (*out*'s stem).  Returns the files written."""
    from ...atomic_files import atomic_write_bytes
    texts: dict[Path, str] = {}
    for fmt in formats:
        if fmt == "tir" and directory is not None:
            texts.update({directory / kernel_file_name(name): text
                          for name, text in kernels.items()})
            continue
        text = "\n\n".join(kernels.values()) if fmt == "tir" else library_source(executable, fmt)
        path = (out.with_name(f"{out.name}.{fmt}") if directory is None
                else directory / f"{out.stem}.{fmt}")
        texts[path] = text
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        atomic_write_bytes(path, (text.rstrip("\n") + "\n").encode())
    return list(texts)
