"""The runtime asks Linux for AMX tile state before AMX kernels run (``mxc/runtime/amx_permission.py``).

Without ``arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`` a process's first tile
instruction dies of SIGILL on Linux >= 5.16.  Oracles: the kernel's own CPU report
(``/proc/cpuinfo``'s ``amx_tile``) for what the kernel's XSAVE query says, the
permission query after a request, and the loader's typed error when the request is
refused.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from mxc.errors import ArtifactError
from mxc.runtime import amx_permission, artifact, cpu_features


def _cpuinfo_has_amx() -> bool | None:
    text = cpu_features.read_cpuinfo()
    if text is None:
        return None
    flags = next((ln for ln in text.splitlines() if ln.startswith("flags")), None)
    return None if flags is None else "amx_tile" in flags.split(":", 1)[1].split()


def test_the_kernels_xsave_report_agrees_with_its_cpu_flags():
    supported, flags = amx_permission.kernel_supports_tiles(), _cpuinfo_has_amx()
    if supported is None or flags is None:
        pytest.skip("no arch_prctl XSAVE query or no /proc/cpuinfo here (not Linux >= 5.16 "
                    "on x86-64)")
    assert supported == flags


def test_a_request_is_granted_exactly_where_the_kernel_supports_tiles():
    """In a fresh process (the permission is the process's for good once granted)."""
    code = ("from mxc.runtime import amx_permission as a\n"
            "before = a.tiles_permitted()\n"
            "why = a.request_tiles()\n"
            "print(before, why is None, a.tiles_permitted(), why)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    before, granted, after, why = r.stdout.split(" ", 3)
    supported = amx_permission.kernel_supports_tiles()
    if supported is None:
        pytest.skip("no arch_prctl XSAVE query here")
    assert before == "False"
    assert (granted, after) == (("True", "True") if supported else ("False", "False"))
    if not supported:
        assert "XTILEDATA" in why


def test_the_loader_refuses_amx_kernels_the_kernel_will_not_run(monkeypatch):
    monkeypatch.setattr(artifact, "missing_cpu_features", lambda features, arch: [])
    monkeypatch.setattr(amx_permission, "request_tiles",
                        lambda: "the kernel refused AMX tile state: test")
    entry = {"kind": "llvm", "host": {"arch": artifact.machine_arch(), "cpu": "sapphirerapids",
                                      "features": ["amx-bf16", "amx-tile", "avx512f"]}}
    with pytest.raises(ArtifactError, match="m.mxc: its kernels use AMX tiles, but the kernel "
                                            "refused AMX tile state: test"):
        artifact.check_target_runnable(entry, "m.mxc")
    calls = []
    monkeypatch.setattr(amx_permission, "request_tiles", lambda: calls.append(1))
    artifact.check_target_runnable(entry, "m.mxc")            # granted: runs
    entry["host"]["features"] = ["avx512f"]
    artifact.check_target_runnable(entry, "m.mxc")            # no AMX: nothing asked
    assert calls == [1]
