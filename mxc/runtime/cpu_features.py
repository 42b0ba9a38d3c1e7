"""This machine's CPU features, as the kernel reports them: the one source for "this CPU".

The compiler's default target (:func:`mxc.backends.tvm.targets.host_target`),
``mxc tune``'s "can this CPU run the candidates" question, the artifact
loader's "can this CPU run the artifact" check and ``mxc inspect`` all ask
:func:`host_cpu`.  It reads the flags the kernel reports (``/proc/cpuinfo``:
``flags`` on x86, ``Features`` on ARM), not the features LLVM implies from
the CPU's *name*: on a virtual machine LLVM may name the CPU ``rocketlake``
while the kernel reports AMX and AVX512-BF16/FP16 (the name loses them), or
name an AVX-512 CPU whose vector state the hypervisor hides (the name claims
what would crash).

Features are spoken of by their LLVM names (``avx512bf16``, ``amx-tile``);
:data:`KERNEL_FLAGS` maps each to the kernel's spelling.  A feature the table
does not know is never judged: neither claimed for the host nor held against
an artifact.  Where no kernel report exists (macOS, Windows, a sandbox
without ``/proc``), :attr:`HostCpu.flags` is None and the callers fall back to
what they did before (LLVM's detection when compiling, no check when loading).

This module sits in the runtime, the lowest layer, so the backends and the
loader share it without an upward import; it imports nothing but the standard
library.
"""

from __future__ import annotations

import functools
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: where Linux reports the CPU's flags
CPUINFO = Path("/proc/cpuinfo")

#: LLVM feature name -> the kernel's flag, per architecture
KERNEL_FLAGS: dict[str, dict[str, str]] = {
    "x86_64": {
        "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1",
        "sse4.2": "sse4_2", "sse4a": "sse4a", "popcnt": "popcnt", "lzcnt": "abm",
        "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi": "bmi1",
        "bmi2": "bmi2", "movbe": "movbe", "aes": "aes", "pclmul": "pclmulqdq", "sha": "sha_ni",
        "adx": "adx", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "gfni": "gfni",
        "clwb": "clwb", "clflushopt": "clflushopt", "rdrnd": "rdrand", "rdseed": "rdseed",
        "fsgsbase": "fsgsbase", "xsave": "xsave", "xsaveopt": "xsaveopt", "xsavec": "xsavec",
        "xsaves": "xsaves", "cx16": "cx16", "movdiri": "movdiri", "movdir64b": "movdir64b",
        "serialize": "serialize", "waitpkg": "waitpkg",
        "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
        "avx512vl": "avx512vl", "avx512cd": "avx512cd", "avx512vnni": "avx512_vnni",
        "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16", "avx512vbmi": "avx512vbmi",
        "avx512vbmi2": "avx512_vbmi2", "avx512bitalg": "avx512_bitalg",
        "avx512vpopcntdq": "avx512_vpopcntdq", "avx512ifma": "avx512ifma",
        "avx512vp2intersect": "avx512_vp2intersect", "avxvnni": "avx_vnni",
        "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
        "amx-fp16": "amx_fp16",
    },
    "aarch64": {"neon": "asimd", "sve": "sve", "sve2": "sve2", "dotprod": "asimddp",
                "fullfp16": "asimdhp", "i8mm": "i8mm", "bf16": "bf16"},
}
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def machine_arch() -> str:
    """This machine's architecture, spelt as LLVM triples spell it (x86_64, aarch64)."""
    m = platform.machine().lower()
    return _ARCH_ALIASES.get(m, m)


@dataclass(frozen=True)
class HostCpu:
    """What the kernel says about this machine's CPU."""

    arch: str
    #: the kernel's flags (its spelling); None: no report (another OS, no /proc)
    flags: frozenset[str] | None
    #: the kernel's name for the CPU ("model name"), "" where it gives none
    model: str = ""

    def knows(self, feature: str) -> bool:
        """Whether *feature* (an LLVM name) is one the kernel reports on or off here."""
        return feature in KERNEL_FLAGS.get(self.arch, {})

    def features(self) -> frozenset[str] | None:
        """The LLVM names of the features the kernel reports (None: no report)."""
        if self.flags is None:
            return None
        table = KERNEL_FLAGS.get(self.arch, {})
        return frozenset(f for f, flag in table.items() if flag in self.flags)

    def missing(self, features: Iterable[str]) -> list[str]:
        """The features of *features* (LLVM names) this CPU is known to lack, in order
        ([] also when there is no report: nothing is known to be missing)."""
        have = self.features()
        if have is None:
            return []
        return [f for f in features if self.knows(f) and f not in have]


def read_cpuinfo() -> str | None:
    """The text of ``/proc/cpuinfo`` (None where there is none); read once per process."""
    return _read_cpuinfo(str(CPUINFO))


@functools.lru_cache(maxsize=4)
def _read_cpuinfo(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def parse_cpuinfo(text: str | None, arch: str | None = None) -> HostCpu:
    """The :class:`HostCpu` a ``/proc/cpuinfo`` text describes (its first processor)."""
    arch = arch or machine_arch()
    if not text:
        return HostCpu(arch, None)
    found = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    model = re.search(r"^(?:model name|Model Name|CPU part)\s*:\s*(.*)$", text, re.M)
    return HostCpu(arch, frozenset(found.group(1).split()) if found else None,
                   model.group(1).strip() if model else "")


def host_cpu() -> HostCpu:
    """This machine's CPU, from the kernel's report."""
    return _parse_cached(read_cpuinfo())


@functools.lru_cache(maxsize=8)
def _parse_cached(text: str | None) -> HostCpu:
    return parse_cpuinfo(text)
