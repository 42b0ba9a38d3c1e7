"""The x86-64 classes mxc's CPU kernels differ on, and how a test run stands in for one.

mxc picks its kernel families from the target's features (:mod:`mxc.backends.tvm.
schedules.base.microarch`): 8-lane AVX2 tiles over 16 registers, 16-lane AVX-512 tiles
over 32, ``vpdpbusd`` int8 dot products (AVX512-VNNI on zmm, AVX-VNNI on ymm),
``vdpbf16ps`` (AVX512-BF16) and AMX tiles.  A machine is one of these classes,
and the next session's machine may be another, so every class must be testable
from any of them:

* ``MXC_TEST_TARGET="llvm -mcpu=CPU"`` names the class a run tests.  Where this
  machine can execute that CPU's code, the run **stands in for that CPU**
  (:func:`simulate_host`): the default target, "does this CPU have X" and the
  artifact loader's check all answer as that CPU would, so kernel choices,
  fixtures and skips are exactly those of a machine of the class, and the code
  runs here.  Where it cannot, nothing is simulated: the tests that execute code
  skip naming the missing features, and ``tests/backends/test_isa_classes.py``
  compiles for the class and checks the generated assembly.
* ``python tools/isa_matrix.py`` runs the target-dependent tests (``-m isa``) once
  per class of :data:`ISA_CLASSES`.

The simulation is in-process: a test that starts ``mxc`` in a subprocess gets
this machine's CPU there, so the ``isa`` tests compile in-process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: the environment variable naming the CPU a run tests (TVM's target text)
ENV_TEST_TARGET = "MXC_TEST_TARGET"


@dataclass(frozen=True)
class IsaClass:
    """One class of x86-64 CPUs as mxc's kernels see it."""

    name: str
    #: an LLVM CPU of the class (``-mcpu``)
    cpu: str
    #: CPUs users have of the class
    examples: str
    #: instructions its float32 kernels use ("zmm": 512-bit registers)
    vector: str
    #: the instruction of its int8 kernels' dot products, for weights of the full int8
    #: range (AVX2 without VNNI: widened ``vpmaddwd``, which cannot saturate)
    int8_dot: str = "vpmaddwd"
    #: the bfloat16 product instruction of ``--precision bf16`` ("" refused)
    bf16_dot: str = ""

    @property
    def target(self) -> str:
        return f"llvm -mcpu={self.cpu}"


#: every class, in order of the instruction sets they add
ISA_CLASSES: dict[str, IsaClass] = {c.name: c for c in (
    IsaClass("avx2", "znver3", "AMD Zen 2/3, Intel Haswell to Skylake client", "ymm"),
    IsaClass("avx2-vnni", "alderlake", "Intel Alder Lake and later client, AMD Zen 5 client",
             "ymm", int8_dot="vpdpbusd"),
    IsaClass("avx512", "skylake-avx512", "Intel Skylake-SP", "zmm"),
    IsaClass("avx512-vnni", "cascadelake", "Intel Cascade Lake, Ice Lake", "zmm",
             int8_dot="vpdpbusd"),
    IsaClass("avx512-bf16", "cooperlake", "AMD Zen 4, Intel Cooper Lake", "zmm",
             int8_dot="vpdpbusd", bf16_dot="vdpbf16ps"),
    IsaClass("amx", "sapphirerapids", "Intel Sapphire Rapids and later", "zmm",
             int8_dot="tdpbusd", bf16_dot="tdpbf16ps"),
)}


def target_under_test() -> str:
    """The target a run tests: ``$MXC_TEST_TARGET``, else this machine (``llvm``)."""
    return os.environ.get(ENV_TEST_TARGET, "llvm")


def class_of_cpu(cpu: str) -> IsaClass | None:
    """The class of :data:`ISA_CLASSES` whose CPU is *cpu* (None: not one of them)."""
    return next((c for c in ISA_CLASSES.values() if c.cpu == cpu), None)


def simulated_cpuinfo(target_text: str) -> tuple[str, str] | None:
    """(LLVM CPU name, a ``/proc/cpuinfo`` text) of the CPU *target_text* names, when this
    machine can run its code; None when it cannot (or the target names no CPU).

    The flags are the kernel's spelling of the features LLVM gives that CPU, limited
    to those the kernel's table knows (:data:`mxc.runtime.cpu_features.KERNEL_FLAGS`),
    as a kernel on such a machine would report them."""
    from mxc.backends.tvm.targets import isa_features, missing_on_host, resolve_target
    from mxc.runtime.cpu_features import KERNEL_FLAGS, machine_arch

    target = resolve_target(target_text)
    cpu = str(target.attrs.get("mcpu", "") or "")
    if not cpu or target.kind.name != "llvm" or missing_on_host(target):
        return None
    table = KERNEL_FLAGS.get(machine_arch(), {})
    flags = sorted({table[f] for f in isa_features(target) if f in table})
    text = (f"processor\t: 0\nmodel name\t: {cpu} (simulated by {ENV_TEST_TARGET})\n"
            f"flags\t\t: {' '.join(flags)}\n")
    return cpu, text


def simulate_host(monkeypatch, target_text: str) -> str | None:
    """Make this process see the CPU *target_text* names as its own (see the module's
    docstring); returns that CPU's name, or None when this machine cannot run its code
    (nothing is changed then)."""
    from mxc.backends.tvm import targets
    from mxc.runtime import cpu_features

    simulated = simulated_cpuinfo(target_text)
    if simulated is None:
        return None
    cpu, text = simulated
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: text)
    monkeypatch.setattr(targets, "_host_cpu", lambda: cpu)
    return cpu


# ---------------------------------------------------------------------------
# ARM hosts: the kernel's HWCAP words (what getauxval returns there, and under qemu-user)
# ---------------------------------------------------------------------------
#: HWCAP/HWCAP2 values of ARM CPUs as their kernels report them (bit names:
#: :data:`mxc.runtime.cpu_features.HWCAP_NAMES`)
ARM_HWCAPS = {
    # Raspberry Pi 4 (cortex-a72): fp asimd evtstrm crc32 cpuid -- no crypto, no dotprod
    "cortex-a72": ("aarch64", 0b1000_1000_0111, 0),
    # Graviton2 (neoverse-n1): fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp
    # asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
    "neoverse-n1": ("aarch64", (1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 5 | 1 << 6
                                | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12
                                | 1 << 15 | 1 << 16 | 1 << 20 | 1 << 28), 0),
    # Raspberry Pi 2 (cortex-a7, 32-bit): half thumb fastmult vfp edsp neon vfpv3 tls vfpv4
    # idiva idivt vfpd32 lpae evtstrm
    "cortex-a7": ("arm", (1 << 1 | 1 << 2 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 12 | 1 << 13
                         | 1 << 15 | 1 << 16 | 1 << 17 | 1 << 18 | 1 << 19 | 1 << 20
                         | 1 << 21), 0),
}

#: what ``/proc/cpuinfo`` says under qemu-user on an x86 machine: the x86 host's CPU
QEMU_CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763\n"
                "flags\t\t: fpu sse sse2 avx avx2 fma\n")


def simulate_arm_host(monkeypatch, cpu: str, cpuinfo: str | None = QEMU_CPUINFO,
                      auxv: bool = True) -> None:
    """Make this process see an ARM CPU of :data:`ARM_HWCAPS` as its own: the kernel's
    architecture, its HWCAP words (*auxv* False: none, as where libc lacks
    ``getauxval``) and a ``/proc/cpuinfo`` text (default: qemu-user's, the x86 host's).
    Nothing runs ARM code: the tests that use it ask what the loader, the compiler's
    default target and ``mxc inspect --host`` make of such a host."""
    from mxc.backends.tvm import targets
    from mxc.runtime import cpu_features

    arch, hwcap, hwcap2 = ARM_HWCAPS[cpu]
    monkeypatch.setattr(cpu_features, "machine_arch", lambda: arch)
    monkeypatch.setattr(cpu_features, "read_auxv",
                        lambda arch=None: (hwcap, hwcap2) if auxv else None)
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: cpuinfo)
    monkeypatch.setattr(targets, "_host_cpu", lambda: cpu)
