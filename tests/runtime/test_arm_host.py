"""The runtime on an ARM host: its CPU features come from the kernel's HWCAP words.

Original failure (issue 37): under ``qemu-aarch64-static`` mxc read the x86
host's ``flags`` line of ``/proc/cpuinfo`` as the ARM CPU's features, found no
``neon``, refused an aarch64 artifact and suggested ``"mcpu": "x86-64-v2"``.

Nothing here runs ARM code or depends on this machine's CPU: the ARM host is
simulated (:func:`isa_classes.simulate_arm_host`: architecture, HWCAP words
and cpuinfo text injected), as the x86 classes are.
"""

from __future__ import annotations

import pytest

from isa_classes import QEMU_CPUINFO, simulate_arm_host
from mxc.errors import ArtifactError
from mxc.runtime import cpu_features
from mxc.runtime.artifact import check_target_runnable
from mxc.runtime.cpu_features import canonical_arch, hwcap_flags, parse_cpuinfo

#: the manifest entries of artifacts built for a Graviton2, a Pi 4 and a Pi 2 (the
#: features LLVM gives each CPU, abridged to those the kernel's table judges and a few)
N1 = {"kind": "llvm", "string": "llvm -mcpu=neoverse-n1",
      "host": {"arch": "aarch64", "cpu": "neoverse-n1", "triple": "aarch64-linux-gnu",
               "features": ["aes", "crc", "dotprod", "fp-armv8", "fullfp16", "lse", "neon",
                            "rcpc", "rdm", "sha2", "v8.2a"]}}
A72 = {"kind": "llvm", "string": "llvm -mcpu=cortex-a72",
       "host": {"arch": "aarch64", "cpu": "cortex-a72", "triple": "aarch64-linux-gnu",
                "features": ["aes", "crc", "fp-armv8", "neon", "sha2", "v8a"]}}
A7 = {"kind": "llvm", "string": "llvm -mcpu=cortex-a7",
      "host": {"arch": "armv7l", "cpu": "cortex-a7", "triple": "armv7l-linux-gnueabihf",
               "features": ["d32", "hwdiv", "hwdiv-arm", "neon", "vfp3", "vfp4"]}}


def test_hwcap_bits_are_the_kernels_feature_names():
    # bit 1 of HWCAP is asimd, bit 20 asimddp; bits 13 and 14 of HWCAP2 i8mm and bf16
    assert hwcap_flags("aarch64", 1 << 1 | 1 << 20, 1 << 13 | 1 << 14) == {
        "asimd", "asimddp", "i8mm", "bf16"}
    assert hwcap_flags("arm", 1 << 12 | 1 << 16) == {"neon", "vfpv4"}
    host = parse_cpuinfo(None, "aarch64", (1 << 1 | 1 << 22, 1 << 1))
    assert host.features() == {"neon", "sve", "sve2"}


@pytest.mark.parametrize("name, arch", [("aarch64", "aarch64"), ("arm64", "aarch64"),
                                        ("armv7l", "arm"), ("armv7", "arm"), ("armhf", "arm"),
                                        ("thumbv7", "arm"), ("x86_64", "x86_64"),
                                        ("AMD64", "x86_64")])
def test_architecture_spellings(name, arch):
    assert canonical_arch(name) == arch


def test_under_qemu_the_hwcaps_win_over_the_x86_cpuinfo(monkeypatch):
    simulate_arm_host(monkeypatch, "neoverse-n1")
    host = cpu_features.host_cpu()
    assert host.arch == "aarch64"
    assert {"neon", "dotprod", "fullfp16", "lse", "crc"} <= host.features()
    assert not host.features() & {"avx", "avx2", "fma", "sve", "i8mm"}
    assert host.model == ""                  # not the emulating x86 host's model name
    check_target_runnable(N1, "n1.mxc")      # no fake /proc/cpuinfo needed
    check_target_runnable(A72, "a72.mxc")    # an older CPU's artifact runs too


def test_without_auxv_the_features_line_is_read_and_never_x86_flags(monkeypatch):
    pi4 = "processor\t: 0\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU part\t: 0xd08\n"
    simulate_arm_host(monkeypatch, "cortex-a72", cpuinfo=pi4, auxv=False)
    assert cpu_features.host_cpu().features() == {"neon", "fp-armv8", "crc"}
    check_target_runnable(A72, "a72.mxc")
    # qemu without getauxval: an x86 flags line is no report at all (nothing judged)
    simulate_arm_host(monkeypatch, "cortex-a72", cpuinfo=QEMU_CPUINFO, auxv=False)
    assert cpu_features.host_cpu().features() is None


def test_missing_arm_features_are_refused_in_arm_terms(monkeypatch):
    simulate_arm_host(monkeypatch, "cortex-a72")    # a Pi 4: no dotprod, no fp16, no LSE
    # the Pi 4 lacks crypto, which LLVM's cortex-a72 implies: never judged (no kernel uses it)
    check_target_runnable(A72, "a72.mxc")
    with pytest.raises(ArtifactError) as err:
        check_target_runnable(N1, "n1.mxc")
    msg = str(err.value)
    assert "64-bit ARM (aarch64) CPU 'neoverse-n1'" in msg
    assert "dotprod" in msg and "which this CPU lacks" in msg
    assert "--cpu cortex-a72" in msg
    assert "x86" not in msg and "mcpu" not in msg


def test_another_architecture_is_refused_naming_both(monkeypatch):
    simulate_arm_host(monkeypatch, "cortex-a7")     # a 32-bit Pi
    check_target_runnable(A7, "a7.mxc")             # armv7l in the manifest is arm
    with pytest.raises(ArtifactError, match=r"compiled for 64-bit ARM \(aarch64\) CPUs.*"
                                            r"this machine is 32-bit ARM \(armv7\)"):
        check_target_runnable(A72, "a72.mxc")
    simulate_arm_host(monkeypatch, "neoverse-n1")
    with pytest.raises(ArtifactError, match=r"compiled for 32-bit ARM \(armv7\) CPUs.*"
                                            r"this machine is 64-bit ARM"):
        check_target_runnable(A7, "a7.mxc")


def test_an_armv7_feature_the_cpu_lacks_is_refused(monkeypatch):
    simulate_arm_host(monkeypatch, "cortex-a7")
    no_neon = {**A7, "host": {**A7["host"], "cpu": "cortex-a9"}}
    vfp_only = 1 << 6 | 1 << 13                      # vfp, vfpv3: a NEON-less armv7
    monkeypatch.setattr(cpu_features, "read_auxv", lambda arch=None: (vfp_only, 0))
    with pytest.raises(ArtifactError, match=r"32-bit ARM \(armv7\) CPU 'cortex-a9' using "
                                            r".*neon.*--cpu cortex-a7"):
        check_target_runnable(no_neon, "a9.mxc")


def test_x86_refusals_still_speak_x86(monkeypatch):
    monkeypatch.setattr(cpu_features, "machine_arch", lambda: "x86_64")
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: QEMU_CPUINFO)
    entry = {"kind": "llvm", "string": "llvm -mcpu=skylake-avx512",
             "host": {"arch": "x86_64", "cpu": "skylake-avx512", "features": ["avx512f"]}}
    with pytest.raises(ArtifactError, match=r"x86-64 CPU 'skylake-avx512' using avx512f.*"
                                            r"--cpu x86-64-v2"):
        check_target_runnable(entry, "x.mxc")
    with pytest.raises(ArtifactError, match=r"compiled for 64-bit ARM \(aarch64\) CPUs.*"
                                            r"this machine is x86-64"):
        check_target_runnable(N1, "n1.mxc")


#: (HWCAP, HWCAP2) as ``qemu-aarch64-static -cpu X`` / ``qemu-arm-static`` (QEMU 7.2)
#: report them to a static program printing ``getauxval`` (recorded; the live check is
#: :func:`test_qemu_user_reports_hwcaps_live`)
QEMU_HWCAPS = {"max": ("aarch64", 3976200187, 2139586559), "cortex-a72": ("aarch64", 2299, 0),
               "neoverse-n1": ("aarch64", 1155067, 0), "cortex-a7": ("arm", 2078935, 0)}


@pytest.mark.parametrize("cpu, entry", [("cortex-a72", A72), ("neoverse-n1", N1),
                                        ("max", N1), ("cortex-a7", A7)])
def test_qemu_users_hwcaps_run_the_cpus_artifacts(cpu, entry, monkeypatch):
    arch, hwcap, hwcap2 = QEMU_HWCAPS[cpu]
    monkeypatch.setattr(cpu_features, "machine_arch", lambda: arch)
    monkeypatch.setattr(cpu_features, "read_auxv", lambda arch=None: (hwcap, hwcap2))
    monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: QEMU_CPUINFO)
    check_target_runnable(entry, f"{cpu}.mxc")
    if cpu == "max":   # qemu's -cpu max: the INT8/bf16 paths of issue 37 can be run there
        assert {"dotprod", "i8mm", "bf16", "sve", "sve2"} <= cpu_features.host_cpu().features()


def test_read_auxv_calls_getauxval():
    """The ctypes call itself works on this machine (any Linux libc has getauxval); its
    bits mean ARM features only on ARM, so elsewhere :func:`host_cpu` does not ask."""
    got = cpu_features.read_auxv("aarch64")
    assert got is None or (isinstance(got[0], int) and isinstance(got[1], int))
    assert cpu_features.read_auxv("x86_64") is None


def test_qemu_user_reports_hwcaps_live(tmp_path):
    """A static aarch64 program under qemu-aarch64-static sees the HWCAPs the table reads."""
    import shutil
    import subprocess
    if not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64-static")):
        pytest.skip("needs aarch64-linux-gnu-gcc and qemu-aarch64-static (apt-get install "
                    "g++-aarch64-linux-gnu qemu-user-static; no cross compiler)")
    src = tmp_path / "hw.c"
    src.write_text('#include <stdio.h>\n#include <sys/auxv.h>\nint main(void) {\n'
                   '  printf("%lu %lu\\n", getauxval(AT_HWCAP), getauxval(AT_HWCAP2));\n'
                   '  return 0;\n}\n')
    exe = tmp_path / "hw"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-O", str(src), "-o", str(exe)],
                   check=True, timeout=120)
    out = subprocess.run(["qemu-aarch64-static", "-cpu", "neoverse-n1", str(exe)], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    host = parse_cpuinfo(QEMU_CPUINFO, "aarch64", tuple(int(w) for w in out.split()))
    assert {"neon", "dotprod", "fullfp16", "lse"} <= host.features()
    assert not host.missing(N1["host"]["features"])
