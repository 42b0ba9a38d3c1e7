"""One notion of "this CPU": the flags the kernel reports, for compile, tune and load alike.

Original failure: ``backends/tvm/targets.py`` took the host's features from
LLVM's *name* for the CPU.  On a VM whose Sapphire Rapids LLVM names
``rocketlake``, the default target lost AMX, AVX512-BF16/FP16 and clwb, while
the artifact loader (reading ``/proc/cpuinfo``) knew the CPU had them; an
artifact built for the real CPU was "runnable" by one check and not the other.

The cpuinfo texts below are injected (``read_cpuinfo`` patched), so every test
runs on any x86-64 machine whatever its own CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_where_simulated  # noqa: E402

pytest.importorskip("tvm")

from mxc.backends.tvm.targets import (host_mattr, host_target, missing_on_host,  # noqa: E402
                                      resolve_target, with_cpu)
from mxc.errors import ArtifactError  # noqa: E402
from mxc.runtime import cpu_features  # noqa: E402
from mxc.runtime.artifact import check_target_runnable, missing_cpu_features  # noqa: E402

pytestmark = [pytest.mark.skipif(cpu_features.machine_arch() != "x86_64",
                                 reason="x86-64 cpuinfo texts and CPU names"),
              pytest.mark.isa]   # the host's features: MXC_TEST_TARGET's (tools/isa_matrix.py)
REPO = Path(__file__).resolve().parents[2]

_COMMON = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush "
           "mmx fxsr sse sse2 ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl "
           "xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 "
           "sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor "
           "lahf_lm abm 3dnowprefetch fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid "
           "rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves arat umip "
           "vaes vpclmulqdq rdpid fsrm")
#: a Sapphire Rapids guest (Xeon Platinum 8480+)
SAPPHIRE_RAPIDS = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    f"flags\t\t: {_COMMON} avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx_vnni "
    "avx512_bf16 wbnoinvd avx512vbmi pku ospke waitpkg avx512_vbmi2 gfni avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq la57 cldemote movdiri movdir64b md_clear serialize "
    "tsxldtrk amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities\n")
#: a Zen 3 guest (EPYC 7763): AVX2, no AVX-512
ZEN3 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\n"
        f"flags\t\t: {_COMMON} cmp_legacy cr8_legacy sse4a misalignsse osvw topoext clzero "
        "xsaveerptr rdpru pku ospke\n")
#: a Zen 4 guest (EPYC 9654): AVX-512 with BF16, no FP16, no AMX
ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
        f"flags\t\t: {_COMMON} sse4a avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl "
        "avx512_bf16 clzero avx512vbmi pku avx512_vbmi2 gfni avx512_vnni avx512_bitalg "
        "avx512_vpopcntdq\n")

AMX_BF16_FP16 = {"amx-tile", "amx-bf16", "amx-int8", "avx512bf16", "avx512fp16"}


def _features(target) -> set[str]:
    from tvm.target import codegen
    return {str(f) for f in codegen.llvm_get_cpu_features(resolve_target(target))}


@pytest.fixture
def cpuinfo(monkeypatch):
    """Make the kernel report a given cpuinfo text (for compile, tune and load alike)."""
    def use(text):
        monkeypatch.setattr(cpu_features, "read_cpuinfo", lambda: text)
        return cpu_features.host_cpu()
    return use


def test_the_kernels_flags_in_llvm_names():
    spr, zen3, zen4 = (cpu_features.parse_cpuinfo(t, "x86_64")
                       for t in (SAPPHIRE_RAPIDS, ZEN3, ZEN4))
    assert AMX_BF16_FP16 | {"avxvnni", "avx512vnni", "clwb"} <= spr.features()
    assert "avx2" in zen3.features() and not {"avx512f", "avx512bf16"} & zen3.features()
    assert {"avx512f", "avx512bf16", "avx512vnni"} <= zen4.features()
    assert not {"avx512fp16", "amx-tile"} & zen4.features()
    assert spr.model == "Intel(R) Xeon(R) Platinum 8480+"
    # no report: nothing claimed, nothing held against an artifact
    none = cpu_features.parse_cpuinfo(None, "x86_64")
    assert none.features() is None and none.missing(["avx512f"]) == []


def test_default_target_enables_what_the_kernel_reports_that_the_cpu_name_loses(
        cpuinfo, monkeypatch):
    import mxc.backends.tvm.targets as targets
    cpuinfo(SAPPHIRE_RAPIDS)
    monkeypatch.setattr(targets, "_host_cpu", lambda: "rocketlake")   # the VM's LLVM name
    spec = host_target()
    assert spec["mcpu"] == "rocketlake"
    assert {f"+{f}" for f in AMX_BF16_FP16 | {"avxvnni"}} <= set(spec["mattr"])
    assert AMX_BF16_FP16 <= _features(spec)
    assert missing_on_host(resolve_target("llvm")) == []
    assert missing_on_host(resolve_target({"kind": "llvm", "mcpu": "sapphirerapids"})) == []


def test_default_target_drops_what_the_name_implies_and_the_kernel_hides(cpuinfo, monkeypatch):
    """AVX-512 hidden by a hypervisor: the name says skylake-avx512, the kernel says AVX2."""
    import mxc.backends.tvm.targets as targets
    from mxc.backends.tvm.schedules.base.microarch import cpu_info
    cpuinfo(ZEN3)
    monkeypatch.setattr(targets, "_host_cpu", lambda: "skylake-avx512")
    spec = host_target()
    assert "-avx512f" in spec["mattr"]
    assert "avx512f" not in _features(spec) and "avx2" in _features(spec)
    assert cpu_info(resolve_target("llvm")).lanes == 8     # the schedules follow: AVX2 vectors


def test_a_name_that_agrees_with_the_kernel_gets_no_mattr(cpuinfo):
    for text, name in ((ZEN3, "znver3"), (ZEN4, "znver4")):
        assert host_mattr(name, cpu_features.parse_cpuinfo(text, "x86_64")) == []


@pytest.mark.parametrize("text, lacks", [
    (ZEN3, {"avx512f", "amx-tile", "avx512bf16"}),
    (ZEN4, {"amx-tile", "amx-bf16", "amx-int8", "avx512fp16"}),
    (SAPPHIRE_RAPIDS, set())])
def test_tune_and_the_loader_agree_on_what_this_cpu_lacks(cpuinfo, text, lacks, monkeypatch):
    cpuinfo(text)
    from mxc.runtime import amx_permission     # the simulated CPU's kernel grants AMX state
    monkeypatch.setattr(amx_permission, "request_tiles", lambda: None)
    spr = resolve_target(with_cpu("llvm", "sapphirerapids"))
    from mxc.backends.tvm.targets import isa_features
    features = isa_features(spr)
    by_compiler = set(missing_on_host(spr))
    assert by_compiler == set(missing_cpu_features(features, "x86_64"))
    assert lacks <= by_compiler and (lacks or not by_compiler)
    entry = {"kind": "llvm", "host": {"arch": "x86_64", "cpu": "sapphirerapids",
                                      "features": features}}
    if by_compiler:
        with pytest.raises(ArtifactError, match="which this CPU lacks"):
            check_target_runnable(entry, "spr.mxc")
    else:
        check_target_runnable(entry, "spr.mxc")


@pytest.mark.parametrize("cpu", ["sapphirerapids", "graniterapids"])
def test_cpu_option_builds_for_amx_and_bf16_anywhere(cpu):
    assert AMX_BF16_FP16 <= _features(with_cpu("llvm", cpu))


def test_inspect_host_shows_the_kernels_report_and_the_default_target(simulated_host):
    skip_where_simulated(simulated_host, "`mxc inspect --host`")
    r = subprocess.run([sys.executable, "-m", "mxc.cli", "inspect", "--host", "--json"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    text = cpu_features.read_cpuinfo()
    if text is None:
        assert report["features"] is None
        return
    flags = set(next(line for line in text.splitlines()
                     if line.startswith("flags")).split(":", 1)[1].split())
    for feature, flag in (("avx2", "avx2"), ("avx512f", "avx512f"), ("amx-tile", "amx_tile"),
                          ("avx512bf16", "avx512_bf16"), ("sse3", "pni")):
        assert (feature in report["features"]) == (flag in flags), feature
    assert report["default_target"] == host_target()
    r = subprocess.run([sys.executable, "-m", "mxc.cli", "inspect", "--host"],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert "default target (--cpu host)" in r.stdout and "as the kernel reports" in r.stdout
