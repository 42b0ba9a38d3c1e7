"""An artifact's ``manifest.json``: what was compiled, for what, and how.

The manifest is what ``mxc inspect`` shows and what the runtime checks
before loading (target, inputs/outputs); it also records what shaped the
build -- the pass pipeline, the tuning database and the kernels taken from
it, the Winograd choice and the environment variables the options were
read from -- so an artifact can be explained without its compile command.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ...runtime.plan import Plan
from .lower import LoweredModel
from .options import CompileOptions


class ManifestTensors:
    """A compiled model's inputs and outputs as its manifest lists them (optional inputs
    left out), shared by ``CompiledModel`` and the bucketed model (each has ``manifest``)."""

    manifest: dict

    @property
    def inputs(self) -> list[dict]:
        return [i for i in self.manifest["inputs"] if not i.get("optional")]

    @property
    def outputs(self) -> list[dict]:
        return list(self.manifest["outputs"])


@dataclass
class BuildRecord:
    """What the build stage produced besides the executable.

    Attributes
    ----------
    tuning:
        the tuning database's record (:meth:`TunedKernels.as_manifest`), None
        when no database was used.
    winograd:
        the Winograd mode and weight sizes (CPU builds with regions), else None.
    precision:
        ``{"mode": "fp32" | "bf16", "kernels": bfloat16 kernels}`` (``--precision``), and
        ``"tile_kernels"``: how many of them run on AMX tiles, where any do.
    lifted:
        ``{region function: its load-time weight transforms}``
        (:attr:`~mxc.backends.tvm.build_context.BuildRecords.lifted`) for the runtime plan's
        load steps.
    """

    tuning: dict | None = None
    winograd: dict | None = None
    precision: dict = field(default_factory=lambda: {"mode": "fp32", "kernels": 0})
    lifted: dict = field(default_factory=dict)


def build_manifest(plan: Plan, lowered: LoweredModel, options: CompileOptions,
                   build: BuildRecord) -> dict:
    """The manifest of a compile (``members`` and ``format`` are added when saved)."""
    import tvm

    from ... import __version__
    from ...runtime.libraries import manifest_entries
    by_name = {s.name: s for s in plan.steps}
    host_steps = plan.host_steps
    manifest = {
        "name": options.name,
        "mxc_version": __version__,
        "tvm_version": str(tvm.__version__),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "target": target_info(lowered.target, options.emulate_amx),
        "pipeline": lowered.pipeline,
        "bind_params": bool(options.bind_params),
        "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype,
                    "optional": i.optional} for i in plan.inputs],
        # a None extent: the output's shape depends on the input values (boolean_mask)
        "outputs": [{"name": o.name, "shape": list(o.shape), "dtype": o.dtype,
                     "data_dependent_shape": None in o.shape} for o in plan.outputs],
        "regions": [{"name": n.name, "function": lowered.functions[n.name][0].name,
                     "num_nodes": by_name[n.name].num_nodes, "ops": by_name[n.name].ops,
                     "num_inputs": len(by_name[n.name].inputs),
                     "num_outputs": len(by_name[n.name].outputs)} for n in lowered.regions],
        "host_nodes": [{"name": s.name, "op": s.op, "reason": s.reason,
                        **({"compiled_bodies": [b and b.function for b in s.bodies]}
                           if s.bodies else {})}
                       for s in host_steps],
        "num_params_stored": len(plan.params),
        "libraries": manifest_entries(s.op for s in host_steps),
        # None: default schedules only; else the database and the kernels taken from it
        "tuning_db": build.tuning,
    }
    if build.winograd is not None:
        manifest["winograd"] = dict(build.winograd)
    manifest["precision"] = dict(build.precision)
    manifest["weights_as_inputs"] = list(lowered.fed_weights)
    # the environment variables that supplied an option (CompileOptions.from_env)
    manifest["environment"] = dict(options.environment)
    return manifest


def target_info(tgt, emulate_amx: bool = False) -> dict:
    """The manifest's ``target``: kind, string, CUDA arch, and the host CPU of LLVM code
    (*emulate_amx*: the options' setting the build used, not the environment now)."""
    from tvm.target import codegen
    kind = tgt.kind.name
    info: dict[str, Any] = {"kind": kind, "string": str(tgt),
                            "device": "cuda" if kind == "cuda" else "cpu"}
    host = tgt if kind == "llvm" else tgt.host
    if kind == "cuda":
        info["arch"] = str(tgt.attrs.get("arch", ""))
    if host is not None and host.kind.name == "llvm":
        triple = str(host.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
        try:
            features = sorted(str(f) for f in codegen.llvm_get_cpu_features(host))
        except Exception:  # noqa: BLE001 - an LLVM without the query
            features = []
        info["host"] = {"cpu": str(host.attrs.get("mcpu", "") or "generic"), "triple": triple,
                        "arch": _arch_of(triple), "features": features}
        if emulate_amx:
            # the tile steps were built as scalar loops (a test of the AMX kernels on a
            # CPU without AMX): the code needs no AMX, and the manifest says which it emulates
            info["host"]["features"] = [f for f in features if not f.startswith("amx")]
            info["host"]["emulated"] = [f for f in features if f.startswith("amx")]
    return info


def _arch_of(triple: str) -> str:
    """The architecture as the runtime's :func:`~mxc.runtime.cpu_features.machine_arch`
    names it (armv7l-... -> arm), so the loader compares like with like."""
    from ...runtime.cpu_features import canonical_arch
    return canonical_arch(triple.split("-", 1)[0])
