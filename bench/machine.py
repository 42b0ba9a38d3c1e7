"""What machine a benchmark ran on, and the thread settings every engine uses.

:func:`configure_threads` must run before numpy, TVM or any engine starts its
thread pools (the harness calls it first thing); the peers' subprocesses
inherit the same environment.  :func:`machine_info` describes the CPU (model,
cores, ISA flags such as ``avx512f``), memory, OS, Python and the versions of
numpy, TVM and mxc, plus the load average at the time.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the thread-count variables set to the same value for every engine
THREAD_VARS = (
    "OMP_NUM_THREADS",        # OpenMP (MXNet's operators, oneDNN, ONNX Runtime's MLAS is not OpenMP)
    "MXNET_OMP_MAX_THREADS",  # MXNet's cap on its OpenMP threads
    "TVM_NUM_THREADS",        # TVM's runtime thread pool (else it uses half the logical CPUs on x86)
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",   # numpy's BLAS (the sgemm ceiling) and MXNet's BLAS
)

#: CPU flags worth reporting (those that change which kernels are fast)
#: the kernel's flags for bfloat16 dot products and AMX tiles (named in the report)
BF16_AMX_FLAGS = ("avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
             "amx_int8", "amx_bf16", "asimd", "sve", "sve2")


def available_cores() -> int:
    """CPUs this process may run on (affinity mask), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: variables an engine needs no help from: mxc's runtime sizes TVM's pool to every allowed
#: core itself (``mxc.runtime.threads``), so a user sets none -- nor does the benchmark,
#: unless a thread count is asked for explicitly
SELF_SIZED = ("TVM_NUM_THREADS",)


def configure_threads(n: int | None = None, *, explicit: bool = True) -> dict[str, str]:
    """Set every engine's thread count to *n* (default: all cores) in ``os.environ``.

    With ``explicit=False`` (no ``--threads``) the variables of :data:`SELF_SIZED`
    are left as the user's environment has them: the engines run as a user runs
    them, with the thread count their own docs ask for and no more."""
    n = n or available_cores()
    for var in THREAD_VARS:
        if explicit or var not in SELF_SIZED:
            os.environ[var] = str(n)
    return {var: os.environ.get(var, "unset (the engine's default)") for var in THREAD_VARS}


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    info = {}
    for line in first.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def _lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}


def cpu_info() -> dict:
    ci = _cpuinfo()
    ls = _lscpu()
    flags = set((ci.get("flags") or ci.get("Features") or "").split())
    model = ci.get("model name") or ls.get("Model name") or platform.processor() or "?"
    family, mod = ci.get("cpu family"), ci.get("model")
    if family and mod:
        model = f"{model} (family {family}, model {mod})"
    try:
        sockets = int(ls.get("Socket(s)", "1"))
        physical = int(ls["Core(s) per socket"]) * sockets
    except (KeyError, ValueError):
        physical = None
    caches = {k: ls[k] for k in ("L1d cache", "L2 cache", "L3 cache") if k in ls}
    return {
        "model": model,
        "vendor": ci.get("vendor_id") or ls.get("Vendor ID"),
        "logical_cpus": os.cpu_count(),
        "available_cores": available_cores(),
        "physical_cores": physical,
        "threads_per_core": ls.get("Thread(s) per core"),
        "mhz": ci.get("cpu MHz"),
        "hypervisor": ls.get("Hypervisor vendor"),
        "caches": caches,
        "isa": [f for f in ISA_FLAGS if f in flags],
        "avx512f": "avx512f" in flags,
        # what --precision bf16 and INT8 can use: AVX512-BF16 (vdpbf16ps), AMX tiles
        "bf16_amx": {f: f in flags for f in BF16_AMX_FLAGS},
    }


def memory_gib() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return round(int(m.group(1)) / 2 ** 20, 1) if m else None


def os_name() -> str:
    try:
        rel = Path("/etc/os-release").read_text()
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', rel, re.M)
        distro = m.group(1) if m else ""
    except OSError:
        distro = ""
    return f"{distro or platform.system()} (kernel {platform.release()}, {platform.machine()})"


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:  # noqa: BLE001 - not installed
        return None


def git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return f"{rev}{'+dirty' if dirty else ''}" if rev else None


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info() -> dict:
    """Everything the report's machine section shows (imports numpy, not TVM)."""
    import numpy as np

    info = {
        "cpu": cpu_info(),
        "memory_gib": memory_gib(),
        "os": os_name(),
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "numpy": np.__version__,
        "apache-tvm": _version("apache-tvm"),
        "apache-tvm-ffi": _version("apache-tvm-ffi"),
        "mxc": None,
        "mxc_git": git_revision(),
        "threads": {var: os.environ.get(var, "unset") for var in THREAD_VARS},
        "load_average": load_average(),
    }
    try:
        import mxc
        info["mxc"] = mxc.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        from mxc.backends.tvm.build import _host_cpu
        info["llvm_mcpu"] = _host_cpu()
    except Exception:  # noqa: BLE001 - TVM missing
        info["llvm_mcpu"] = None
    return info


def kernel_classes(target: str = "llvm") -> dict[str, str]:
    """The x86 class (``avx2``, ``avx512-vnni``, ``amx`` ...) of this CPU, whose kernels
    the peers pick by CPUID, and of mxc's *target* (``--target``, which may name another
    CPU: ``llvm -mcpu=znver3`` times AVX2 kernels on any x86 CPU).  Imports TVM."""
    from mxc.backends.tvm.schedules.base.microarch import cpu_info, kernel_class
    from mxc.backends.tvm.targets import resolve_target
    return {"host": kernel_class(cpu_info(resolve_target("llvm"))),
            "mxc": kernel_class(cpu_info(resolve_target(target)))}


def format_classes(classes: dict[str, str] | None, target: str) -> list[str]:
    """The report's line naming the classes of :func:`kernel_classes`."""
    if not classes:
        return []
    line = f"- x86 class: this CPU {classes['host']} (the peers choose their kernels by CPUID)"
    if classes["mxc"] == classes["host"]:
        return [line + f"; mxc's kernels the same ({target})"]
    return [line + f"; mxc's kernels {classes['mxc']} ({target}): ratios against the "
            f"peers compare different classes"]


def format_machine(info: dict, peers: dict | None = None) -> list[str]:
    """Markdown bullet lines for the report."""
    cpu = info["cpu"]
    isa = ", ".join(cpu["isa"]) or "?"
    lines = [
        f"- CPU: {cpu['model']}, {cpu['available_cores']} core(s) available "
        f"({cpu['physical_cores']} physical, {cpu['threads_per_core']} thread(s)/core"
        f"{', ' + cpu['hypervisor'] + ' guest' if cpu.get('hypervisor') else ''}); "
        f"LLVM mcpu {info.get('llvm_mcpu')}",
        *format_classes(info.get("kernel_classes"), info.get("mxc_target", "llvm")),
        f"- ISA: {isa}; avx512f: {'yes' if cpu['avx512f'] else 'no'}"
        + (f"; caches: {', '.join(f'{k} {v}' for k, v in cpu['caches'].items())}"
           if cpu.get("caches") else ""),
        "- BF16/AMX: " + (", ".join(f"{k} {'yes' if v else 'no'}"
                                    for k, v in cpu.get("bf16_amx", {}).items()) or "?"),
        f"- memory: {info['memory_gib']} GiB; OS: {info['os']}",
        f"- Python {info['python']}, numpy {info['numpy']}, apache-tvm {info['apache-tvm']} "
        f"(tvm-ffi {info['apache-tvm-ffi']}), mxc {info['mxc']} ({info['mxc_git']})",
        "- threads: " + ", ".join(f"{k}={v}" for k, v in info["threads"].items()),
    ]
    if peers:
        lines.append("- peers: " + ", ".join(f"{k} {v}" for k, v in peers.items()))
    return lines


if __name__ == "__main__":
    import json
    print(json.dumps(machine_info(), indent=1))
