"""This machine's CPU features, as the kernel reports them: the one source for "this CPU".

The compiler's default target (:func:`mxc.backends.tvm.targets.host_target`),
``mxc tune``'s "can this CPU run the candidates" question, the artifact
loader's "can this CPU run the artifact" check and ``mxc inspect`` all ask
:func:`host_cpu`.  It reads the flags the kernel reports -- on x86 the
``flags`` of ``/proc/cpuinfo``; on ARM the HWCAP/HWCAP2 words of the process's
auxiliary vector (``getauxval``), turned into the kernel's names, else the
``Features`` of ``/proc/cpuinfo`` -- not the features LLVM implies from the
CPU's *name*.  ARM reads the auxiliary vector first because qemu-user emulates
it for the ARM CPU it runs, whereas ``/proc/cpuinfo`` under qemu is the x86
host's (its x86 ``flags`` would be taken for ARM features and the artifact
refused).  Why not the name: on a virtual machine LLVM may name the CPU ``rocketlake``
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
import struct
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
    # judged: what compiled kernels can use.  Not judged: aes/sha2, which LLVM implies
    # from cortex-a72/-a53 but the Raspberry Pi's SoCs lack (no kernel uses them)
    "aarch64": {"neon": "asimd", "fp-armv8": "fp", "fullfp16": "asimdhp",
                "fp16fml": "asimdfhm", "rdm": "asimdrdm", "dotprod": "asimddp",
                "i8mm": "i8mm", "bf16": "bf16", "sve": "sve", "sve2": "sve2",
                "crc": "crc32", "lse": "atomics", "complxnum": "fcma", "jsconv": "jscvt"},
    "arm": {"neon": "neon", "vfp3": "vfpv3", "vfp4": "vfpv4", "d32": "vfpd32",
            "hwdiv-arm": "idiva", "hwdiv": "idivt", "crc": "crc32"},
}
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
#: how messages name each architecture
ARCH_NAMES = {"x86_64": "x86-64", "aarch64": "64-bit ARM (aarch64)", "arm": "32-bit ARM (armv7)"}

#: ``getauxval`` keys of the kernel's hardware-capability words
AT_HWCAP, AT_HWCAP2 = 16, 26
#: the kernel's names of the HWCAP and HWCAP2 bits, per architecture, bit 0 first (as in
#: ``/proc/cpuinfo``'s ``Features``; Linux ``arch/*/kernel/cpuinfo.c``)
HWCAP_NAMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "aarch64": (
        ("fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp",
         "asimdhp", "cpuid", "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3",
         "sm4", "asimddp", "sha512", "sve", "asimdfhm", "dit", "uscat", "ilrcpc", "flagm",
         "ssbs", "sb", "paca", "pacg"),
        ("dcpodp", "sve2", "sveaes", "svepmull", "svebitperm", "svesha3", "svesm4", "flagm2",
         "frint", "svei8mm", "svef32mm", "svef64mm", "svebf16", "i8mm", "bf16", "dgh", "rng",
         "bti", "mte")),
    "arm": (
        ("swp", "half", "thumb", "26bit", "fastmult", "fpa", "vfp", "edsp", "java", "iwmmxt",
         "crunch", "thumbee", "neon", "vfpv3", "vfpv3d16", "tls", "vfpv4", "idiva", "idivt",
         "vfpd32", "lpae", "evtstrm"),
        ("aes", "pmull", "sha1", "sha2", "crc32")),
}


def canonical_arch(name: str) -> str:
    """An architecture as a triple or ``uname`` spells it -> mxc's name: x86_64, aarch64,
    arm (every 32-bit ARM: armv7l, armv7, armhf, thumbv7 ...), else *name* lowered."""
    name = name.lower()
    name = _ARCH_ALIASES.get(name, name)
    if name.startswith(("arm", "thumb")) and name not in ("arm64", "aarch64"):
        return "arm"
    return name


def machine_arch() -> str:
    """This process's architecture (:func:`canonical_arch`): a 32-bit Python on a 64-bit
    ARM kernel (Raspberry Pi OS 32-bit on a Pi 4) runs 32-bit code, so it is ``arm``."""
    arch = canonical_arch(platform.machine())
    if arch == "aarch64" and struct.calcsize("P") == 4:
        return "arm"
    return arch


def read_auxv(arch: str | None = None) -> tuple[int, int] | None:
    """(HWCAP, HWCAP2) from the process's auxiliary vector on ARM (None elsewhere, or
    where libc has no ``getauxval``).  Under qemu-user these are the emulated CPU's."""
    if (arch or machine_arch()) not in HWCAP_NAMES:
        return None
    try:
        import ctypes
        getauxval = ctypes.CDLL(None).getauxval
    except (OSError, AttributeError):
        return None
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    hwcap = int(getauxval(AT_HWCAP))
    return (hwcap, int(getauxval(AT_HWCAP2))) if hwcap else None


def hwcap_flags(arch: str, hwcap: int, hwcap2: int = 0) -> frozenset[str]:
    """The kernel's names (``/proc/cpuinfo``'s spelling) of the bits set in *hwcap* and
    *hwcap2* on *arch*."""
    names1, names2 = HWCAP_NAMES.get(arch, ((), ()))
    return frozenset([n for i, n in enumerate(names1) if hwcap >> i & 1]
                     + [n for i, n in enumerate(names2) if hwcap2 >> i & 1])


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


def parse_cpuinfo(text: str | None, arch: str | None = None,
                  auxv: tuple[int, int] | None = None) -> HostCpu:
    """The :class:`HostCpu` a ``/proc/cpuinfo`` text describes (its first processor).

    On x86 the features are the ``flags`` line; on ARM the bits of *auxv* (HWCAP,
    HWCAP2) where given, else the ``Features`` line -- never an x86 ``flags`` line,
    which under qemu-user is the emulating host's."""
    arch = arch or machine_arch()
    model = re.search(r"^(?:model name|Model Name|CPU part)\s*:\s*(.*)$", text or "", re.M)
    model_name = model.group(1).strip() if model else ""
    if arch in HWCAP_NAMES and re.search(r"^flags\s*:", text or "", re.M):
        model_name = ""   # qemu-user: the cpuinfo (and its model name) is the x86 host's
    if arch in HWCAP_NAMES:
        if auxv is not None:
            return HostCpu(arch, hwcap_flags(arch, *auxv), model_name)
        found = re.search(r"^Features\s*:\s*(.*)$", text or "", re.M)
    else:
        found = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text or "", re.M)
    return HostCpu(arch, frozenset(found.group(1).split()) if found else None, model_name)


def host_cpu() -> HostCpu:
    """This machine's CPU, from the kernel's report (ARM: its HWCAPs first)."""
    arch = machine_arch()
    return _parse_cached(read_cpuinfo(), arch, read_auxv(arch))


@functools.lru_cache(maxsize=8)
def _parse_cached(text: str | None, arch: str, auxv: tuple[int, int] | None) -> HostCpu:
    return parse_cpuinfo(text, arch, auxv)
