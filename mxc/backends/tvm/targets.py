"""Target strings as users write them, and what a CPU target asks of the CPU.

TVM 0.27 accepts only JSON-dict targets; every TVM user still types
``llvm -mcpu=skylake-avx512``.  :func:`parse_target_text` translates that
form (and JSON) into the dict TVM wants, and refuses target kinds the mxc
runtime cannot run (it loads ``llvm`` and ``cuda`` libraries only) before
anything is compiled.

:func:`isa_features` names the instruction-set extensions a CPU target's
code may use (LLVM's feature list without its tuning hints): ``mxc
inspect`` shows them for an artifact, and :func:`missing_on_host` tells
whether this machine can execute code built for a target (``mxc tune``
measures by running candidates, so it needs to know).  "This machine" is
the kernel's report (:mod:`mxc.runtime.cpu_features`, which the artifact
loader asks too), not the features LLVM implies from the CPU's name:
:func:`host_target` names the CPU as LLVM does and adds (or removes) with
``-mattr`` what the kernel says differs.  :func:`check_cpu` refuses a CPU
name LLVM does not know, which LLVM would only warn about.

Other architectures are cross-compiled: :data:`ARM_CPUS` names the ARM CPUs by
the boards and servers users know them from (``--cpu cortex-a72``, the
Raspberry Pi 4), and the target triple follows from the name -- as do the ISA
features (LLVM's model of the CPU: NEON, dotprod, i8mm, bf16, SVE) and, for
32-bit ARM, the hard-float ABI (:func:`complete_spec`; an ``armhf`` library
linked without it fails with "uses VFP register arguments").  Any other CPU
is ``--triple TRIPLE --cpu NAME``.  The linker for a foreign triple is found
by :mod:`.toolchain`.

:func:`resolve_target` turns what the user gave (shorthand, dict or
``tvm.target.Target``) into the Target to build for; it lives here, not in
``build.py``, so tuning and its workers resolve targets without importing the
builder (which imports them).
"""

from __future__ import annotations

import difflib
import functools
import json
from typing import TYPE_CHECKING, Any

from ...errors import BackendError
from ...runtime.cpu_features import HostCpu, canonical_arch, host_cpu, machine_arch

if TYPE_CHECKING:  # annotations only: tvm is imported once the thread pool is sized
    import tvm

#: target kinds the mxc runtime can load, with what they mean
SUPPORTED_KINDS = {"llvm": "CPU", "cuda": "NVIDIA GPU"}
#: shorthands accepted wherever a target is
SHORTHANDS = {"llvm": "llvm", "cpu": "llvm", "host": "llvm", "cuda": "cuda", "gpu": "cuda"}
#: ``--cpu`` values that mean "no particular CPU": the baseline of the architecture
GENERIC_CPUS = ("generic", "portable")

#: ARM CPUs by name -> (the triple they imply, what has them).  One table: ``--cpu``,
#: ``-mcpu`` in a target string or dict, and the refusal of unknown names all read it.
#: ``cortex-a53`` is 64-bit here (Raspberry Pi 3 with a 64-bit OS); a 32-bit OS on it is
#: ``--cpu cortex-a53 --triple armv7l-linux-gnueabihf``, and ``cortex-a7`` is 32-bit ARM.
ARM_CPUS: dict[str, tuple[str, str]] = {
    "cortex-a72": ("aarch64-linux-gnu", "Raspberry Pi 4"),
    "cortex-a76": ("aarch64-linux-gnu", "Raspberry Pi 5"),
    "cortex-a53": ("aarch64-linux-gnu", "Raspberry Pi 3, 64-bit OS"),
    "cortex-a57": ("aarch64-linux-gnu", "Jetson Nano/TX2"),
    "carmel": ("aarch64-linux-gnu", "Jetson Xavier"),
    "cortex-a78ae": ("aarch64-linux-gnu", "Jetson Orin"),
    "neoverse-n1": ("aarch64-linux-gnu", "AWS Graviton2, Ampere Altra"),
    "neoverse-v1": ("aarch64-linux-gnu", "AWS Graviton3"),
    "neoverse-v2": ("aarch64-linux-gnu", "AWS Graviton4, NVIDIA Grace"),
    "cortex-a7": ("armv7l-linux-gnueabihf", "Raspberry Pi 2, 32-bit ARM boards"),
}
#: the architectures mxc can cross-compile for (``--triple``'s first word, canonical)
CROSS_ARCHS = ("x86_64", "aarch64", "arm")

#: LLVM feature-name prefixes that are scheduling hints, not instructions
_TUNING_PREFIXES = ("tuning-", "fast-", "slow-", "no-bypass", "false-deps", "prefer-",
                    "allow-light", "faster-", "idivq", "macrofusion", "branch-", "lea-",
                    "pad-short", "sbb-dep", "use-", "fuse-", "vzeroupper", "ermsb",
                    "64bit-mode", "x87", "cx8", "nopl", "retpoline", "harden-", "lvi-")
#: dict keys whose CLI value is a comma-separated list
_LIST_KEYS = {"mattr", "keys", "libs", "cl-opt"}


def supported_kinds_text() -> str:
    return ", ".join(f"{k} ({v})" for k, v in SUPPORTED_KINDS.items())


def check_kind(kind: str) -> None:
    """Refuse a target kind the runtime cannot run, listing the ones it can."""
    if kind not in SUPPORTED_KINDS:
        raise BackendError(f"target kind {kind!r} cannot be run by the mxc runtime; "
                           f"supported kinds: {supported_kinds_text()}")


def _value(key: str, text: str) -> Any:
    if key in _LIST_KEYS:
        return [v for v in text.split(",") if v]
    if text.lstrip("-").isdigit():
        return int(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def parse_target_text(text: str) -> Any:
    """A shorthand (``llvm``, ``cuda``), a JSON dict, or TVM's CLI form
    (``llvm -mcpu=skylake-avx512 -mattr=+avx512f -num-cores=4``) -> what
    :func:`resolve_target` takes (shorthand or dict)."""
    text = text.strip()
    if not text:
        raise BackendError("empty target; supported kinds: " + supported_kinds_text())
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise BackendError(f"invalid JSON target {text!r}: {exc}") from None
        if not isinstance(spec, dict) or "kind" not in spec:
            raise BackendError(f"JSON target {text!r} needs a \"kind\" key")
        check_kind(spec["kind"])
        spec = complete_spec(spec)
        _check_spec_cpu(spec)
        return spec
    words = text.split()
    kind = SHORTHANDS.get(words[0], words[0])
    check_kind(kind)
    if len(words) == 1:
        return SHORTHANDS.get(words[0], kind)
    spec: dict[str, Any] = {"kind": kind}
    for word in words[1:]:
        if not word.startswith("-") or word == "-":
            raise BackendError(f"target {text!r}: expected -KEY=VALUE options after the kind, "
                               f"got {word!r}")
        key, sep, value = word.lstrip("-").partition("=")
        spec[key] = _value(key, value) if sep else True
    spec = complete_spec(spec)
    _check_spec_cpu(spec)
    return spec


def triple_arch(triple: str | None) -> str:
    """The architecture of *triple* (None: this machine's) as the runtime names it."""
    return canonical_arch(triple.split("-", 1)[0]) if triple else machine_arch()


def complete_spec(spec: dict) -> dict:
    """A CPU target dict completed from what its names imply: the triple of an
    :data:`ARM_CPUS` CPU given without one, and the hard-float ABI of a 32-bit ARM
    ``...hf`` triple (``mfloat-abi=hard``, without which LLVM emits soft-float calls the
    ``armhf`` linker refuses).  A CUDA target's host is completed the same way."""
    spec = dict(spec)
    if spec.get("kind") == "cuda" and isinstance(spec.get("host"), dict):
        spec["host"] = complete_spec({"kind": "llvm", **spec["host"]})
    if spec.get("kind", "llvm") != "llvm":
        return spec
    cpu = str(spec.get("mcpu") or "")
    if cpu in ARM_CPUS and not spec.get("mtriple"):
        spec["mtriple"] = ARM_CPUS[cpu][0]
    triple = str(spec.get("mtriple") or "")
    if triple_arch(triple) == "arm" and triple.endswith("hf") and "mfloat-abi" not in spec:
        spec["mfloat-abi"] = "hard"
    return spec


def with_cpu(target: Any, cpu: str | None, triple: str | None = None) -> Any:
    """*target* with its host CPU set by ``--cpu`` (``host``: this CPU; ``generic``:
    the architecture's baseline, runs on any CPU of it; else an LLVM CPU name, an
    :data:`ARM_CPUS` one implying its triple) and ``--triple`` (another architecture;
    the CPU then defaults to its baseline)."""
    if triple is None and cpu in (None, "host", "native"):
        return target
    if triple is not None:
        if triple_arch(triple) not in CROSS_ARCHS:
            raise BackendError(f"--triple {triple!r}: expected a triple of "
                               f"{', '.join(CROSS_ARCHS)} (aarch64-linux-gnu, "
                               f"armv7l-linux-gnueabihf, x86_64-linux-gnu)")
        if cpu in ("host", "native") and triple_arch(triple) != machine_arch():
            raise BackendError(f"--cpu {cpu} with --triple {triple}: this machine is "
                               f"{machine_arch()}; name the {triple_arch(triple)} CPU "
                               f"(--cpu generic for its baseline)")
        if cpu in (None, "host", "native"):
            cpu = "generic"
    check_cpu(cpu, "--cpu", triple or (ARM_CPUS[cpu][0] if cpu in ARM_CPUS else None))
    spec = dict(target) if isinstance(target, dict) else {"kind": SHORTHANDS.get(target, target)}
    cpu_spec: dict[str, Any] = {"kind": "llvm"}
    if cpu not in GENERIC_CPUS:
        cpu_spec["mcpu"] = cpu
    if triple:
        cpu_spec["mtriple"] = triple
    cpu_spec = complete_spec(cpu_spec)
    if spec["kind"] == "cuda":
        spec["host"] = cpu_spec
        return spec
    for key in ("mcpu", "mtriple", "mfloat-abi"):
        spec.pop(key, None)
    spec.update(cpu_spec)
    return spec


def known_cpus(triple: str | None = None) -> list[str]:
    """The CPU names LLVM knows for *triple* (None: this machine's), one spelling each."""
    tvm = _tvm()
    from tvm.target import codegen
    spec = {"kind": "llvm", **({"mtriple": triple} if triple else {})}
    names = {str(n) for n in codegen.llvm_get_cpu_archlist(tvm.target.Target(spec))}
    # the underscored names ("skylake_avx512", "core_4th_gen_avx") are aliases
    return sorted(n for n in names if "_" not in n)


def arm_cpus_text() -> str:
    """:data:`ARM_CPUS` as the refusals list it."""
    return ", ".join(f"{name} ({what})" for name, (_, what) in ARM_CPUS.items())


def check_cpu(cpu: str, option: str = "-mcpu", triple: str | None = None) -> None:
    """Refuse a CPU name LLVM does not know (LLVM itself would only warn and build
    generic code), naming the closest known ones and listing them all, and the ARM
    CPUs mxc cross-compiles for by name."""
    _tvm()
    from tvm.target import codegen
    if triple is None and cpu in ARM_CPUS:
        triple = ARM_CPUS[cpu][0]
    triple = triple or str(codegen.llvm_get_system_triple())
    if cpu in GENERIC_CPUS or codegen.llvm_is_valid_cpu(cpu, triple):
        return
    known = known_cpus(triple)
    arm = [] if triple_arch(triple) in ("aarch64", "arm") else list(ARM_CPUS)
    close = difflib.get_close_matches(cpu, known + arm, n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise BackendError(f"{option} {cpu!r} is not a CPU LLVM knows for {triple.split('-')[0]}"
                       f"{hint}; known CPUs: "
                       f"{', '.join(dict.fromkeys([*GENERIC_CPUS, 'host', *known]))}; "
                       f"ARM, cross-compiled: {arm_cpus_text()}; any other: --triple TRIPLE "
                       f"--cpu NAME")


def _check_spec_cpu(spec: dict) -> None:
    """A dict target's ``mcpu`` (and its CUDA host's) must be a CPU LLVM knows."""
    for cpu_spec in (spec, spec.get("host")):
        if isinstance(cpu_spec, dict) and cpu_spec.get("kind", "llvm") == "llvm" \
                and cpu_spec.get("mcpu"):
            check_cpu(str(cpu_spec["mcpu"]), "target -mcpu", cpu_spec.get("mtriple"))


def _is_isa(feature: str) -> bool:
    return not feature.startswith(_TUNING_PREFIXES)


def isa_features(target) -> list[str]:
    """The instruction-set extensions code built for CPU *target* may use, sorted."""
    from tvm.target import codegen
    return sorted(f for f in codegen.llvm_get_cpu_features(target) if _is_isa(str(f)))


def _cpu_name_features(cpu: str | None) -> frozenset[str]:
    """The ISA features LLVM implies from CPU name *cpu* (None: the baseline) on the
    kernel's architecture."""
    tvm = _tvm()
    spec = complete_spec({"kind": "llvm", **({"mcpu": cpu} if cpu else {}),
                          **({"mtriple": _host_triple()} if _host_triple() else {})})
    return frozenset(isa_features(tvm.target.Target(spec)))


def missing_on_host(target) -> list[str]:
    """The ISA features CPU *target* needs that this machine's CPU lacks ([]: it runs here).

    "Lacks" is the kernel's word (:func:`mxc.runtime.cpu_features.host_cpu`, which the
    artifact loader asks too); where the kernel reports nothing, LLVM's view of the host.
    Code for another architecture lacks everything: ``["aarch64 instructions"]``."""
    host = host_cpu()
    triple = str(target.attrs.get("mtriple", "") or "")
    if triple and triple_arch(triple) != host.arch:   # another architecture: nothing runs here
        return [f"{triple_arch(triple)} instructions"]
    needed = isa_features(target)
    if host.features() is None:
        return sorted(set(needed) - _cpu_name_features(_host_cpu()))
    return sorted(host.missing(needed))


def host_mattr(cpu: str | None = None, host: HostCpu | None = None) -> list[str]:
    """``-mattr`` entries that make LLVM CPU *cpu*'s features those the kernel reports.

    ``+f`` for a feature the kernel reports that the CPU name does not imply (AMX,
    AVX512-BF16/FP16 on a VM whose CPU LLVM names ``rocketlake``), ``-f`` for one the
    name implies that the kernel does not report (AVX-512 a hypervisor hides).  Features
    the kernel's table does not cover keep what the name implies.  []: no report."""
    host = host or host_cpu()
    have = host.features()
    if have is None:
        return []
    implied = _cpu_name_features(cpu)
    return ([f"+{f}" for f in sorted(have - implied)]
            + [f"-{f}" for f in sorted(implied) if host.knows(f) and f not in have])


def host_cpu_name() -> str:
    from tvm.target import codegen
    return str(codegen.llvm_get_system_cpu())


def with_cuda_arch(target: Any, arch: str | None) -> Any:
    """*target* with the GPU architecture ``--cuda-arch`` names (``sm_80``, ``80``, ``8.0``).

    Without it a CUDA target takes ``$MXC_CUDA_ARCH`` (read by
    :meth:`~mxc.backends.tvm.options.CompileOptions.from_env`), else the GPU present,
    else :data:`~mxc.backends.tvm.build.DEFAULT_CUDA_ARCH`; PTX is always embedded too,
    so newer GPUs run the artifact."""
    if arch is None:
        return target
    spec = dict(target) if isinstance(target, dict) else {"kind": SHORTHANDS.get(target, target)}
    if spec.get("kind") != "cuda":
        raise BackendError(f"--cuda-arch {arch} applies to --target cuda, not "
                           f"{spec.get('kind')!r}")
    digits = arch.lower().removeprefix("sm_").replace(".", "")
    if not digits.isdigit() or len(digits) < 2:
        raise BackendError(f"--cuda-arch {arch!r}: expected sm_XY (sm_75, sm_80, sm_90 ...)")
    spec["arch"] = f"sm_{digits}"
    return spec


# ---------------------------------------------------------------------------
# resolving a target (shorthand, dict or Target) into a tvm.target.Target
# ---------------------------------------------------------------------------
def _tvm():
    """TVM, imported only once the runtime has sized its thread pool (as build.py does)."""
    from ...runtime.threads import configure_pool
    configure_pool()
    import tvm
    return tvm


#: architecture used for "cuda" when no GPU can be queried
DEFAULT_CUDA_ARCH = "sm_75"


@functools.lru_cache(maxsize=1)
def _host_cpu() -> str | None:
    try:
        from tvm.target import codegen
        name = str(codegen.llvm_get_system_cpu())
        if name and name != "generic":
            return name
    except Exception:  # pragma: no cover - LLVM without host detection
        pass
    return None


#: a triple per architecture, for a host whose kernel's architecture is not LLVM's default
#: triple's (a 32-bit ARM userland on a 64-bit kernel; a test simulating an ARM host)
ARCH_TRIPLES = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
                "arm": "armv7l-linux-gnueabihf"}


def _host_triple() -> str | None:
    """None where LLVM's default triple is the kernel's architecture (the usual case),
    else a triple of :data:`ARCH_TRIPLES` for the kernel's architecture."""
    from tvm.target import codegen
    arch = host_cpu().arch
    if triple_arch(str(codegen.llvm_get_system_triple())) == arch:
        return None
    return ARCH_TRIPLES.get(arch)


def host_target() -> dict[str, Any]:
    """The host CPU as a TVM target dict: LLVM's name for it, with the features the
    kernel reports (:func:`host_mattr`) where the name implies others."""
    target: dict[str, Any] = {"kind": "llvm"}
    if _host_triple():
        target = complete_spec({**target, "mtriple": _host_triple()})
    cpu = _host_cpu()
    if cpu:
        target["mcpu"] = cpu
    mattr = host_mattr(cpu)
    if mattr:
        target["mattr"] = mattr
    return target


def _cuda_arch(default: str | None = None) -> str:
    """*default* (``sm_XY``; the options layer takes it from ``$MXC_CUDA_ARCH``), else the
    visible GPU's architecture, else :data:`DEFAULT_CUDA_ARCH`."""
    tvm = _tvm()
    if default:
        return default if default.startswith("sm_") else f"sm_{default}"
    try:
        dev = tvm.cuda(0)
        if dev.exist:
            return "sm_" + str(dev.compute_version).replace(".", "")
    except Exception:  # pragma: no cover - CUDA runtime missing
        pass
    return DEFAULT_CUDA_ARCH


def resolve_target(target: Any = "llvm", *, cuda_arch: str | None = None) -> "tvm.target.Target":
    """A ``tvm.target.Target`` from a shorthand string, a dict or a Target.

    *cuda_arch* is the architecture of a CUDA target that names none (None: the
    visible GPU's, else :data:`DEFAULT_CUDA_ARCH`)."""
    tvm = _tvm()
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, str):
        target = parse_target_text(target)   # TVM's "llvm -mcpu=..." form; kind checked
    elif isinstance(target, dict):
        check_kind(target.get("kind", ""))
    if target in (None, "llvm", "cpu", "host"):
        return tvm.target.Target(host_target())
    if target in ("cuda", "gpu"):
        return tvm.target.Target({"kind": "cuda", "arch": _cuda_arch(cuda_arch)},
                                 host=host_target())
    if isinstance(target, dict):
        spec = complete_spec(target)
        _check_spec_cpu(spec)
        if spec.get("kind") == "cuda":
            spec.setdefault("arch", _cuda_arch(cuda_arch))
            host = spec.pop("host", None) or host_target()
            return tvm.target.Target(spec, host=host)
        return tvm.target.Target(spec)
    try:
        return tvm.target.Target(target)
    except Exception as exc:
        raise BackendError(f"invalid TVM target {target!r}: {exc}") from None


def is_gpu_target(target: "tvm.target.Target") -> bool:
    return "gpu" in list(target.keys)
