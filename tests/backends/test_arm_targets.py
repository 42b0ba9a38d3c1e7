"""ARM targets by name, cross-compiled on this machine: triple, features, float ABI, linker.

Original failure (issue 37): ``--target "llvm -mtriple=aarch64-linux-gnu"``
ended in the host linker's raw "Relocations in generic ELF (EM: 183)" error
and a g++ command line; an armhf target failed to link ("uses VFP register
arguments") without ``-mfloat-abi=hard``, and no CPU could be named as users
know their boards (``--cpu cortex-a72`` for a Raspberry Pi 4).

Oracles: the ELF header of each library (read with ``struct``: ``e_machine``
183 AArch64 / 40 ARM, ``EF_ARM_ABI_FLOAT_HARD`` 0x400 in ``e_flags`` for armhf)
and the assembly of a float32 dense (NEON ``fmla`` on aarch64).  Nothing runs
ARM code here (the emulated runtime is issue 37's item 5) and nothing depends
on this machine's CPU.  Tests that link skip, naming the package, where the
cross compiler is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from conftest import require_corpus  # noqa: E402
from isa_classes import simulate_arm_host  # noqa: E402
from mxc.backends.tvm import toolchain  # noqa: E402
from mxc.backends.tvm.targets import (ARM_CPUS, parse_target_text, resolve_target,  # noqa: E402
                                      with_cpu)
from mxc.cli import main  # noqa: E402
from mxc.errors import BackendError  # noqa: E402

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp"
SYMBOL, PARAMS = str(MLP / "mlp-symbol.json"), str(MLP / "mlp-0000.params")

EM_ARM, EM_AARCH64 = 40, 183
EF_ARM_ABI_FLOAT_HARD = 0x400
#: how each architecture's library is checked: (ELF class, e_machine, the cross compiler)
ARCHS = {"aarch64": (2, EM_AARCH64, "aarch64-linux-gnu-g++"),
         "arm": (1, EM_ARM, "arm-linux-gnueabihf-g++")}
#: the CPUs cross-compiled, as the CLI is given them -> their architecture
CPUS = {"neoverse-n1": (["--cpu", "neoverse-n1"], "aarch64"),
        "cortex-a72": (["--cpu", "cortex-a72"], "aarch64"),
        "cortex-a7": (["--cpu", "cortex-a7"], "arm"),
        "cortex-a53-32": (["--cpu", "cortex-a53", "--triple", "armv7l-linux-gnueabihf"], "arm")}


def require_cross(arch: str) -> None:
    compiler = ARCHS[arch][2]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C++ cross compiler {compiler} (apt-get install "
                    f"g++-{compiler.removesuffix('-g++')})")


def elf_header(lib: bytes) -> tuple[int, int, int]:
    """(ELF class: 1 32-bit / 2 64-bit, e_machine, e_flags) of a little-endian ELF file."""
    assert lib[:4] == b"\x7fELF" and lib[5] == 1, "not a little-endian ELF file"
    (machine,) = struct.unpack_from("<H", lib, 18)
    (flags,) = struct.unpack_from("<I", lib, 0x24 if lib[4] == 1 else 0x30)
    return lib[4], machine, flags


def check_library(artifact: Path, arch: str) -> dict:
    """The artifact's library is an ELF shared object for *arch* (hard-float on arm);
    returns its manifest."""
    with zipfile.ZipFile(artifact) as z:
        lib, manifest = z.read("lib.so"), json.loads(z.read("manifest.json"))
    elf_class, machine, flags = elf_header(lib)
    assert (elf_class, machine) == ARCHS[arch][:2]
    assert struct.unpack_from("<H", lib, 16)[0] == 3          # ET_DYN: a shared library
    if arch == "arm":
        assert flags & EF_ARM_ABI_FLOAT_HARD, f"e_flags {flags:#x}: not hard-float"
    assert manifest["target"]["host"]["arch"] == arch
    return manifest


def compile_cli(tmp_path: Path, how: list[str], *extra: str, model=None) -> Path:
    symbol, params, shapes = model or (SYMBOL, PARAMS, ["data=4,784"])
    out = tmp_path / f"{'_'.join(how).replace('-', '')}.mxc"
    argv = ["compile", symbol, "--params", params, "-q", "-o", str(out), *how, *extra]
    for shape in shapes:
        argv += ["--shape", shape]
    assert main(argv) == 0
    return out


# ---------------------------------------------------------------------------
# names -> triple, features, float ABI (no linking)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cpu, triple, has, lacks", [
    ("cortex-a72", "aarch64-linux-gnu", {"neon"}, {"dotprod", "sve"}),
    ("cortex-a76", "aarch64-linux-gnu", {"neon", "dotprod", "fullfp16"}, {"sve"}),
    ("neoverse-n1", "aarch64-linux-gnu", {"neon", "dotprod"}, {"i8mm", "sve"}),
    ("neoverse-v1", "aarch64-linux-gnu", {"neon", "dotprod", "i8mm", "bf16", "sve"}, set()),
    ("neoverse-v2", "aarch64-linux-gnu", {"i8mm", "bf16", "sve", "sve2"}, set()),
    ("cortex-a78ae", "aarch64-linux-gnu", {"neon", "dotprod"}, {"sve"}),
    ("cortex-a7", "armv7l-linux-gnueabihf", {"neon", "vfp4"}, set()),
])
def test_a_cpu_name_implies_triple_features_and_abi(cpu, triple, has, lacks):
    from tvm.target import codegen
    spec = with_cpu("llvm", cpu)
    assert spec["mtriple"] == triple and spec["mcpu"] == cpu
    assert spec.get("mfloat-abi") == ("hard" if triple.endswith("hf") else None)
    features = {str(f) for f in codegen.llvm_get_cpu_features(resolve_target(spec))}
    assert has <= features and not lacks & features


def test_the_same_names_in_a_target_string_and_the_armhf_abi_from_any_triple():
    assert parse_target_text("llvm -mcpu=neoverse-n1")["mtriple"] == "aarch64-linux-gnu"
    spec = parse_target_text("llvm -mtriple=armv7l-linux-gnueabihf -mattr=+neon")
    assert spec["mfloat-abi"] == "hard"
    assert "mfloat-abi" not in parse_target_text("llvm -mtriple=armv7l-linux-gnueabi")
    spec = with_cpu("llvm", "cortex-a53", "armv7l-linux-gnueabihf")   # a Pi 3, 32-bit OS
    assert spec == {"kind": "llvm", "mcpu": "cortex-a53", "mtriple": "armv7l-linux-gnueabihf",
                    "mfloat-abi": "hard"}
    assert with_cpu("llvm", None, "aarch64-linux-gnu") == {"kind": "llvm",
                                                           "mtriple": "aarch64-linux-gnu"}


def test_unknown_names_are_refused_listing_the_arm_ones(capsys):
    with pytest.raises(BackendError, match=r"did you mean 'cortex-a7.*known CPUs: .*"
                                           r"cortex-a72 \(Raspberry Pi 4\).*--triple TRIPLE"):
        with_cpu("llvm", "cortex-a77x")
    with pytest.raises(BackendError, match="expected a triple of x86_64, aarch64, arm"):
        with_cpu("llvm", None, "riscv64-linux-gnu")
    with pytest.raises(BackendError, match="'znver3' is not a CPU LLVM knows for aarch64"):
        with_cpu("llvm", "znver3", "aarch64-linux-gnu")
    assert set(ARM_CPUS) >= {"cortex-a72", "cortex-a76", "neoverse-n1", "neoverse-v1",
                             "neoverse-v2", "cortex-a78ae", "cortex-a7"}


# ---------------------------------------------------------------------------
# the cross linker
# ---------------------------------------------------------------------------
def test_the_cross_linker_is_found_by_triple_and_cxx_overrides():
    found = {"aarch64-linux-gnu-g++": "/usr/bin/aarch64-linux-gnu-g++",
             "arm-linux-gnueabihf-g++": "/usr/bin/arm-linux-gnueabihf-g++"}
    assert toolchain.linker_for("aarch64-linux-gnu", which=found.get) == found[
        "aarch64-linux-gnu-g++"]
    # the triple as LLVM spells it, the compiler as Debian names it
    assert toolchain.linker_for("armv7l-linux-gnueabihf", which=found.get) == found[
        "arm-linux-gnueabihf-g++"]
    assert toolchain.linker_for("aarch64-linux-gnu", "my-g++", which=found.get) == "my-g++"
    assert toolchain.linker_for(None, which=found.get) is None    # this machine's: TVM's


@pytest.mark.parametrize("triple, package", [("aarch64-linux-gnu", "g++-aarch64-linux-gnu"),
                                             ("armv7l-linux-gnueabihf",
                                              "g++-arm-linux-gnueabihf")])
def test_no_cross_linker_is_one_line_naming_the_package(triple, package):
    with pytest.raises(BackendError) as err:
        toolchain.linker_for(triple, which=lambda command: None)
    msg = str(err.value)
    assert "\n" not in msg and f"apt-get install {package}" in msg and triple in msg


def test_the_cli_stops_before_compiling_without_the_cross_linker(tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(toolchain.shutil, "which", lambda command: None)
    out = tmp_path / "m.mxc"
    argv = ["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "--cpu",
            "neoverse-n1", "-o", str(out)]
    assert main(argv) == BackendError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mxc compile: error: no C++ cross compiler for 64-bit ARM")
    assert "apt-get install g++-aarch64-linux-gnu" in err[-1]
    assert not any("[1/5]" in line for line in err)     # refused before the first stage
    assert not out.exists()


def test_a_cxx_for_the_wrong_architecture_is_one_line_not_a_transcript(tmp_path, monkeypatch,
                                                                       capsys):
    if shutil.which("g++") is None:
        pytest.skip("no g++ (apt-get install g++)")
    monkeypatch.setenv("CXX", "g++")   # this machine's compiler, asked to link aarch64 code
    out = tmp_path / "m.mxc"
    argv = ["compile", SYMBOL, "--params", PARAMS, "--shape", "data=4,784", "-q", "--cpu",
            "cortex-a72", "-o", str(out)]
    assert main(argv) == BackendError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "linking the aarch64-linux-gnu library with g++ failed" in err[0]
    assert "Command line" not in err[0] and "g++-aarch64-linux-gnu" in err[0]
    assert not out.exists()


# ---------------------------------------------------------------------------
# cross-compiled libraries: ELF header and assembly
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cpu", list(CPUS))
def test_mlp_cross_compiles_to_an_elf_library_of_the_architecture(cpu, tmp_path):
    how, arch = CPUS[cpu]
    require_cross(arch)
    artifact = compile_cli(tmp_path, how, "--dump-code", "asm")
    manifest = check_library(artifact, arch)
    assert manifest["target"]["host"]["cpu"] == how[1]
    assem = Path(f"{artifact}.asm").read_text()
    if arch == "aarch64":   # float32 dense: NEON fused multiply-add on 4 lanes
        assert re.search(r"^\s+fmla\s+v\d+\.4s", assem, re.M), "no NEON fmla"
    else:                   # NEON on q registers (LLVM splits fmuladd into vmul + vadd here)
        assert re.search(r"^\s+v(mul|fma|mla)\.f32\s+q\d+", assem, re.M), "no NEON f32 ops"


#: small corpus models (wave 1), compiled for each architecture's reference CPUs
CORPUS_MODELS = ("lenet", "mobilenet0.25")


@pytest.mark.parametrize("cpu", ["neoverse-n1", "cortex-a72", "cortex-a7"])
@pytest.mark.parametrize("name", CORPUS_MODELS)
def test_corpus_models_cross_compile_with_no_flag_beyond_cpu(name, cpu, tmp_path):
    how, arch = CPUS[cpu]
    require_cross(arch)
    root = require_corpus("models") / name
    meta = json.loads((root / "meta.json").read_text())
    shapes = [f"{k}={','.join(map(str, v['shape']))}" for k, v in meta["inputs"].items()]
    artifact = compile_cli(tmp_path, how,
                           model=(str(root / "symbol.json"), str(root / "model.params"), shapes))
    check_library(artifact, arch)


# ---------------------------------------------------------------------------
# mxc inspect --host on an ARM host
# ---------------------------------------------------------------------------
def test_inspect_host_on_an_arm_host(monkeypatch, capsys):
    from mxc.cli.inspect_cmd import host_report
    simulate_arm_host(monkeypatch, "neoverse-n1")   # under qemu: x86 cpuinfo, ARM HWCAPs
    report = host_report()
    assert report["arch"] == "aarch64"
    assert {"neon", "dotprod", "fullfp16"} <= set(report["features"])
    assert not {"avx2", "fma"} & set(report["features"])
    target = report["default_target"]
    assert target["mcpu"] == "neoverse-n1" and target["mtriple"] == "aarch64-linux-gnu"
    assert not [a for a in target.get("mattr", []) if a.lstrip("+-") in ("avx2", "fma")]
    assert main(["inspect", "--host"]) == 0
    out = capsys.readouterr().out
    assert "aarch64" in out and "neon" in out



def test_precision_bf16_for_arm_is_refused_in_arm_terms():
    """Neoverse V1 has BF16 (BFDOT kernels, test_arm_kernels.py); a Neoverse N1 has not:
    say so in ARM terms, not that the CPU lacks AVX512-BF16 (nor suggest an x86 CPU)."""
    from mxc.backends.tvm.precision import refusal
    assert refusal(resolve_target(with_cpu("llvm", "neoverse-v1"))) is None
    msg = refusal(resolve_target(with_cpu("llvm", "neoverse-n1")))
    assert "BFDOT" in msg and "neoverse-n1" in msg
    assert "AVX" not in msg and "sapphirerapids" not in msg


def test_arm_code_is_never_taken_for_code_this_machine_runs():
    """``mxc tune`` measures locally only what this CPU runs (else it builds a proxy)."""
    from mxc.backends.tvm.targets import missing_on_host
    from mxc.runtime.cpu_features import machine_arch
    if machine_arch() == "aarch64":
        pytest.skip("an aarch64 machine runs aarch64 code")
    assert missing_on_host(resolve_target(with_cpu("llvm", "neoverse-n1"))) == [
        "aarch64 instructions"]


def test_register_tiles_are_sized_for_each_arm_architecture():
    """AArch64 has 32 NEON registers, AArch32 (armv7) 16: a tile sized for 32 would spill."""
    from mxc.backends.tvm.schedules.base.microarch import cpu_info, kernel_class
    a64 = cpu_info(resolve_target(with_cpu("llvm", "neoverse-n1")))
    a32 = cpu_info(resolve_target(with_cpu("llvm", "cortex-a7")))
    assert (a64.lanes, a64.registers, a32.lanes, a32.registers) == (4, 32, 4, 16)
    assert kernel_class(a64) == kernel_class(a32) == "neon"
