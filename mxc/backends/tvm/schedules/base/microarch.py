"""The CPU facts the default schedules' cost model uses, per microarchitecture.

One table, :data:`MICROARCHS`: float32 lanes of the widest vector the
schedules use, vector registers, vector FMA and load issue ports (full-width
operations per cycle), FMA latency and the data caches.  The register-tile
model (:func:`.register_tile.tile_shape`) sizes a micro-kernel from these, so a
convolution compiled for a Xeon gets 16-lane tiles over 32 registers and one
compiled for a Zen 3 8-lane tiles over 16 -- whatever machine compiles it.

The row is chosen from the target: its ``mcpu`` when the table names it
(:data:`ALIASES` maps LLVM's CPU names onto rows), otherwise from the ISA
features the target enables (AVX-512F, AVX2, SSE2, NEON; NEON on 32-bit ARM has
half of AArch64's 32 vector registers, so the register tiles are sized for 16).

Port counts are in *full-width* operations: Zen 4 executes a 512-bit FMA or
load as two 256-bit halves, so it issues one zmm FMA and one zmm load per
cycle (``fma_ports=1, load_ports=1``) where a Xeon with two 512-bit FMA units
issues two.  The ``narrow_*`` columns are the same rates for operations on at
most half a register (an 8-lane piece of a 16-lane row): Zen 4 and Ice Lake
client issue two ymm FMAs a cycle, twice their zmm rate, so narrow pieces cost
them nothing, while a Xeon issues two either way and computes half the lanes.
Sources: the vendors' optimisation manuals (Intel 248966, AMD software
optimisation guides for families 17h/19h) and uops.info latencies.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, replace
from typing import NamedTuple

from tvm.target import Target

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CpuInfo:
    """What the schedules need to know about the CPU (a :data:`MICROARCHS` row)."""

    lanes: int = 8          # float32 lanes per vector register
    registers: int = 16     # vector registers
    threads: int = 1
    fma_ports: int = 2      # full-width vector FMAs issued per cycle
    load_ports: int = 2     # full-width vector loads (or broadcasts) per cycle
    fma_latency: int = 4    # cycles from an FMA to a dependent one
    l1d_kib: int = 32       # per core
    l2_kib: int = 512       # per core
    name: str = "generic-avx2"
    #: vector FMAs and loads of at most half a register issued per cycle
    narrow_fma_ports: int = 2
    narrow_load_ports: int = 2
    #: int8 dot-product instructions the target enables (:mod:`..families.int8`): "avx512vnni",
    #: "avxvnni", "avx2" (``vpmaddubsw``/``vpmaddwd``, :mod:`.int8_avx2`) or "" (none:
    #: int8 kernels use plain int32 arithmetic)
    int8_dot: str = ""
    #: bfloat16 dot products the target enables (:mod:`..families.bf16`): "avx512bf16" or "" (none)
    bf16_dot: str = ""
    #: whether the target has AMX-BF16 tiles (:mod:`..families.bf16_amx`: ``tdpbf16ps``)
    bf16_tiles: bool = False
    #: whether the target has AMX-INT8 tiles (:mod:`..families.int8_amx`: ``tdpbusd``)
    int8_tiles: bool = False

    def ports(self, lanes: int) -> tuple[int, int]:
        """(FMA, load) operations issued per cycle on vectors of *lanes* floats."""
        if 2 * lanes <= self.lanes:
            return self.narrow_fma_ports, self.narrow_load_ports
        return self.fma_ports, self.load_ports

    @property
    def accumulators(self) -> int:
        """Vector accumulators a micro-kernel may keep (the rest: operands)."""
        return max(4, self.registers - 4)


def _row(name, lanes, registers, fma_ports, load_ports, narrow_fma, narrow_load,
         fma_latency, l1d_kib, l2_kib):
    return CpuInfo(lanes=lanes, registers=registers, fma_ports=fma_ports,
                   load_ports=load_ports, narrow_fma_ports=narrow_fma,
                   narrow_load_ports=narrow_load, fma_latency=fma_latency,
                   l1d_kib=l1d_kib, l2_kib=l2_kib, name=name)


#: the cost model's constants, one row per microarchitecture (threads: filled per target)
MICROARCHS: dict[str, CpuInfo] = {r.name: r for r in (
    #                                full     narrow
    #    name             lanes regs fma load fma load lat  L1    L2
    _row("generic-sse",       4,  16,   2,   2,   2,   2,   4,  32,   256),
    _row("generic-avx2",      8,  16,   2,   2,   2,   2,   4,  32,   512),
    _row("generic-avx512",   16,  32,   2,   2,   2,   2,   4,  32,  1024),
    _row("haswell",           8,  16,   2,   2,   2,   2,   5,  32,   256),
    _row("skylake",           8,  16,   2,   2,   2,   2,   4,  32,   256),
    _row("skylake-avx512",   16,  32,   2,   2,   2,   2,   4,  32,  1024),
    _row("icelake-server",   16,  32,   2,   2,   2,   2,   4,  48,  1280),
    _row("icelake-client",   16,  32,   1,   2,   2,   2,   4,  48,   512),
    _row("sapphirerapids",   16,  32,   2,   2,   2,   2,   4,  48,  2048),
    _row("znver2",            8,  16,   2,   2,   2,   2,   5,  32,   512),
    _row("znver3",            8,  16,   2,   2,   2,   2,   4,  32,   512),
    _row("znver4",           16,  32,   1,   1,   2,   2,   4,  32,  1024),
    _row("znver5",           16,  32,   2,   2,   2,   2,   4,  48,  1024),
    _row("neon",              4,  32,   2,   2,   2,   2,   4,  64,  1024),
    # 32-bit ARM (armv7, AArch32): 16 quad registers, one 128-bit FMA a cycle at best
    _row("neon-armv7",        4,  16,   1,   1,   1,   1,   4,  32,   512),
)}

#: LLVM CPU names -> the :data:`MICROARCHS` row that describes them
ALIASES: dict[str, str] = {
    "broadwell": "haswell",
    "skylake": "skylake", "kabylake": "skylake", "coffeelake": "skylake",
    "cometlake": "skylake", "alderlake": "skylake", "raptorlake": "skylake",
    "skylake-avx512": "skylake-avx512", "cascadelake": "skylake-avx512",
    "cooperlake": "skylake-avx512",
    "icelake-server": "icelake-server",
    "icelake-client": "icelake-client", "tigerlake": "icelake-client",
    "rocketlake": "icelake-client",
    "sapphirerapids": "sapphirerapids", "emeraldrapids": "sapphirerapids",
    "graniterapids": "sapphirerapids", "graniterapids-d": "sapphirerapids",
    "znver1": "znver2",
}


def _has(target: Target, feature: str) -> bool:
    from tvm.target import codegen
    try:
        return bool(codegen.llvm_cpu_has_features(feature, target))
    except Exception:  # noqa: BLE001 - non-x86 or old LLVM
        return False


def microarch(target: Target) -> CpuInfo:
    """The :data:`MICROARCHS` row for *target* (threads not filled in)."""
    mcpu = str(target.attrs.get("mcpu", "") or "") if hasattr(target, "attrs") else ""
    name = ALIASES.get(mcpu, mcpu)
    row = MICROARCHS.get(name)
    # a row's vector width only where the target really enables it (-mattr=-avx512f ...)
    if row is not None and row.lanes == 16 and not _has(target, "avx512f"):
        row = None
    if row is None:
        if _has(target, "avx512f"):
            row = MICROARCHS["generic-avx512"]
        elif _has(target, "avx2"):
            row = MICROARCHS["generic-avx2"]
        elif _has(target, "neon"):
            triple = str(target.attrs.get("mtriple", "") or "")
            row = MICROARCHS["neon-armv7" if triple.startswith(("arm", "thumb"))
                             and not triple.startswith("arm64") else "neon"]
        else:
            row = MICROARCHS["generic-sse"]
    log.debug("cost model for %s: %s", mcpu or "the target", row)
    return row


def cpu_info(target: Target) -> CpuInfo:
    """The cost-model row of *target* with its thread count (``num-cores`` or this host's)
    and its dot-product families (:func:`cpu_features`)."""
    threads = int(target.attrs.get("num-cores", 0) or 0) if hasattr(target, "attrs") else 0
    return replace(microarch(target), threads=threads or host_threads(),
                   **cpu_features(target)._asdict())


class Features(NamedTuple):
    """The dot-product families a target's CPU computes (the :class:`CpuInfo` fields of
    the same names)."""
    int8_dot: str
    bf16_dot: str
    bf16_tiles: bool
    int8_tiles: bool


def cpu_features(target: Target) -> Features:
    """What *target*'s CPU computes -- among it "can this CPU do bfloat16?"
    (``bf16_dot``, ``bf16_tiles``) -- decided once per target (a target is immutable, and
    the question is LLVM's feature table's): the build context's :func:`cpu_info` and the
    ``--precision bf16`` refusal before it (:func:`...precision.check_request`) read the
    same decision, and everything later reads ``ctx.cpu``."""
    key = str(target)          # the target's every attribute (kind, mcpu, mattr ...)
    with _FEATURES_LOCK:
        found = _FEATURES.get(key)
    if found is None:
        int8, bf16 = int8_dot(target), bf16_dot(target)
        found = Features(int8, bf16, bool(bf16) and tiles(target, "amx-bf16"),
                         int8 == "avx512vnni" and tiles(target, "amx-int8"))
        with _FEATURES_LOCK:
            _FEATURES[key] = found
    return found


#: :func:`cpu_features`' decisions, by target
_FEATURES: dict[str, Features] = {}
_FEATURES_LOCK = threading.Lock()


def kernel_class(info: CpuInfo) -> str:
    """The x86 class whose kernel families *info* (a :func:`cpu_info`) selects, as the
    benchmark reports and the tests name them: ``avx2``, ``avx2-vnni`` (AVX-VNNI),
    ``avx512``, ``avx512-vnni``, ``avx512-bf16``, ``amx``; ``neon`` or ``sse`` elsewhere."""
    if info.bf16_tiles or info.int8_tiles:
        return "amx"
    if info.lanes == 16:
        if info.bf16_dot:
            return "avx512-bf16"
        return "avx512-vnni" if info.int8_dot == "avx512vnni" else "avx512"
    if info.lanes == 8:
        return "avx2-vnni" if info.int8_dot == "avxvnni" else "avx2"
    return "neon" if info.name.startswith("neon") else "sse"


def int8_dot(target: Target) -> str:
    """The widest int8 dot-product family of *target*, "" when none: ``vpdpbusd`` on
    zmm or ymm, else AVX2's ``vpmaddubsw``/``vpmaddwd`` sequences (:mod:`.int8_avx2`;
    each layer may still take the exact one, :func:`.int8_avx2.layer_family`); on
    AArch64 ``usdot`` with i8mm, ``sdot`` with dotprod (:mod:`.arm_dot_steps`)."""
    if _has(target, "avx512vnni") and _has(target, "avx512bw"):
        return "avx512vnni"
    if _has(target, "avxvnni"):
        return "avxvnni"
    if _has(target, "avx2"):
        return "avx2"
    if _has(target, "neon") and _aarch64(target):     # AArch64 sdot/usdot (.arm_dot_steps)
        if _has(target, "i8mm") and _has(target, "dotprod"):
            return "neon-i8mm"
        if _has(target, "dotprod"):
            return "neon-dotprod"
    return ""


def _aarch64(target: Target) -> bool:
    """Whether *target* is 64-bit ARM (the dot-product steps are AArch64 intrinsics)."""
    triple = str(target.attrs.get("mtriple", "") or "") if hasattr(target, "attrs") else ""
    return triple.startswith(("aarch64", "arm64"))


def bf16_dot(target: Target) -> str:
    """The bfloat16 dot-product family of *target* (``vdpbf16ps``; AArch64's ``bfdot``,
    :mod:`.arm_bf16_step`), "" when none."""
    if _has(target, "avx512bf16") and _has(target, "avx512bw"):
        return "avx512bf16"
    if _aarch64(target) and _has(target, "neon") and _has(target, "bf16"):
        return "neon-bf16"
    return ""


def tiles(target: Target, feature: str) -> bool:
    """Whether *target* enables AMX tiles with the products of *feature* (``amx-bf16``:
    ``tdpbf16ps``, ``amx-int8``: ``tdpbusd``)."""
    return _has(target, "amx-tile") and _has(target, feature)


def host_threads() -> int:
    """Cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except Exception:  # pragma: no cover
        return os.cpu_count() or 1
