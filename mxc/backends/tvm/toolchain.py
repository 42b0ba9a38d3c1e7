"""The C++ compiler that links a CPU target's library, found for the target's architecture.

TVM links the kernels' object file with the host's ``g++`` unless told
otherwise; for an aarch64 or armv7 target that fails deep in the export with
the host linker's raw error ("Relocations in generic ELF (EM: 183)").  mxc
instead picks the linker when the compile starts (:func:`linker_for`): this
machine's compiler for its own architecture, and for another one ``$CXX``
(read by :meth:`~.options.CompileOptions.from_env` into ``options.cxx``) or
the cross compiler Debian and Ubuntu install as ``<triple>-g++``.  Where there
is none, the compile stops before any work with one line naming the package
to install; a link that fails anyway (``$CXX`` for the wrong architecture) is
reported in one line by :func:`link_error`, not as a compiler transcript.
"""

from __future__ import annotations

import shutil
from typing import Any, Callable

from ...errors import BackendError
from ...runtime.cpu_features import ARCH_NAMES, machine_arch
from .targets import triple_arch

#: the GNU triple Debian/Ubuntu name each architecture's cross compiler by
#: (``g++-<triple>`` package, ``<triple>-g++`` command); 32-bit ARM per float ABI
DEBIAN_TRIPLES = {"aarch64": "aarch64-linux-gnu", "arm": "arm-linux-gnueabihf",
                  "arm-soft": "arm-linux-gnueabi", "x86_64": "x86-64-linux-gnu"}


def _debian_triple(triple: str) -> str:
    arch = triple_arch(triple)
    if arch == "arm" and not triple.endswith("hf"):
        return DEBIAN_TRIPLES["arm-soft"]
    return DEBIAN_TRIPLES.get(arch, triple)


def candidates(triple: str) -> list[str]:
    """The compiler commands looked for, in order, for *triple*."""
    debian = _debian_triple(triple)
    commands = [f"{triple}-g++", f"{debian.replace('x86-64', 'x86_64')}-g++"]
    return list(dict.fromkeys(commands))


def package(triple: str) -> str:
    """The Debian/Ubuntu package with the cross compiler for *triple*."""
    return f"g++-{_debian_triple(triple)}"


def target_triple(target: Any) -> str | None:
    """The triple of the CPU code of TVM *target* (its host's for CUDA); None: this
    machine's."""
    host = target if target.kind.name == "llvm" else target.host
    if host is None or host.kind.name != "llvm":
        return None
    return str(host.attrs.get("mtriple", "") or "") or None


def linker_for(triple: str | None, cxx: str | None = None,
               which: Callable[[str], str | None] | None = None) -> str | None:
    """The compiler that links a library for *triple*; None: TVM's default (this machine's).

    *cxx* (``$CXX``) overrides.  For another architecture without *cxx*, the first of
    :func:`candidates` on ``PATH``; none: :class:`BackendError` naming the package."""
    if cxx:
        return cxx
    if triple is None or triple_arch(triple) == machine_arch():
        return None
    which = which or shutil.which
    for command in candidates(triple):
        found = which(command)
        if found:
            return found
    arch = triple_arch(triple)
    raise BackendError(f"no C++ cross compiler for {ARCH_NAMES.get(arch, arch)} ({triple}): "
                       f"none of {', '.join(candidates(triple))} is on PATH; install it with "
                       f"`apt-get install {package(triple)}` (Debian/Ubuntu), or set $CXX to "
                       f"a compiler for {triple}")


def link_error(exc: BaseException, triple: str | None, linker: str | None) -> BackendError:
    """One line for a failed link: the linker's first error line, and, for another
    architecture, which compiler was used for it."""
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln.startswith(("Compilation error", "Command line"))]
    first = next((ln for ln in lines if "error" in ln.lower() or "wrong format" in ln
                  or "not found" in ln), lines[0] if lines else type(exc).__name__)
    if triple is None or triple_arch(triple) == machine_arch():
        return BackendError(f"linking the compiled library failed: {first[:300]}")
    return BackendError(f"linking the {triple} library with {linker or 'the default compiler'} "
                        f"failed ({first[:300]}); is it a compiler for {triple}? "
                        f"(`apt-get install {package(triple)}` provides "
                        f"{candidates(triple)[-1]})")
