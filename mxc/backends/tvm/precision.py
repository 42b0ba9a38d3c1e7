"""``--precision``: float32, bfloat16, or bfloat16 where it checks out (``auto``).

``bf16`` (:mod:`.schedules.families.bf16`) computes convolutions and dense layers in
bfloat16 with float32 accumulation; it is refused (a
:class:`~mxc.errors.BackendError`, before anything is compiled) for a CPU
target without bfloat16 dot products.  ``auto`` compiles the model both
ways, runs both on the model's own inputs (the ``check_inputs`` given, else
deterministic standard-normal data of the input shapes) and keeps bfloat16
only where every output is within :data:`BF16_TOLERANCE` of the float32
build's; the manifest's ``precision`` records the choice and the measured
error, ``mxc inspect`` shows it.

The tolerance class "bf16": bfloat16 keeps 8 significant bits, so each
rounded operand carries a relative error up to 2^-9; a dot product of n
such terms, accumulated in float32, errs by about ``2^-9 * sqrt(n)`` of the
sum of the magnitudes of its terms, and a deep network compounds that layer
by layer.  Rather than a per-element rtol (meaningless for outputs near
zero) the class bounds the error relative to each output's range:
``max|y - y_fp32| <= BF16_TOLERANCE * max|y_fp32|``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import numpy as np

from ...errors import BackendError

log = logging.getLogger(__name__)

#: the "bf16" tolerance class: max |bf16 - fp32| over max |fp32|, per output
BF16_TOLERANCE = 0.02


def range_error(got: np.ndarray, ref: np.ndarray) -> float:
    """``max|got - ref| / max|ref|`` (the "bf16" tolerance class's measure)."""
    ref = np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(np.asarray(got, np.float64) - ref))) if ref.size else 0.0
    return err / scale if scale > 0 else err


def example_inputs(inputs: list[dict], seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic feeds for manifest *inputs*: standard normal floats, zeros otherwise."""
    rng = np.random.RandomState(seed)
    feeds = {}
    for spec in inputs:
        if spec.get("optional"):
            continue
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        if dtype.kind == "f":
            feeds[spec["name"]] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[spec["name"]] = np.zeros(shape, dtype)
    return feeds


def compare(bf16_model, fp32_model, feeds: Mapping[str, Any]) -> dict:
    """Run both compiled models on *feeds*: ``{"max_error", "tolerance", "passed"}``."""
    got = bf16_model.run(dict(feeds))
    ref = fp32_model.run(dict(feeds))
    got = got if isinstance(got, (list, tuple)) else [got]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    errors = [range_error(np.asarray(g), np.asarray(r)) for g, r in zip(got, ref)
              if np.asarray(r).dtype.kind == "f"]
    worst = max(errors, default=0.0)
    return {"max_error": worst, "tolerance": BF16_TOLERANCE,
            "passed": bool(np.isfinite(worst) and worst <= BF16_TOLERANCE)}


def compile_auto(compile_one, options, check_inputs: Mapping[str, Any] | None):
    """``--precision auto``: *compile_one(options)* -> CompiledModel, tried as bf16 (where
    the target computes it) and fp32; the bf16 one is kept when :func:`compare` passes."""
    from .targets import resolve_target
    target = resolve_target(options.target, cuda_arch=options.cuda_arch)
    fp32 = compile_one(options.with_(precision="fp32"))
    if refusal(target) is not None:
        fp32.manifest["precision"] = {**fp32.manifest.get("precision", {}), "requested": "auto",
                                      "reason": "the target has no bfloat16 dot products"}
        return fp32
    bf16 = compile_one(options.with_(precision="bf16"))
    feeds = check_inputs if check_inputs is not None else example_inputs(fp32.inputs)
    check = compare(bf16, fp32, feeds)
    chosen = bf16 if check["passed"] else fp32
    log.info("--precision auto: bf16 error %.4g of the output range (tolerance %g): %s",
             check["max_error"], check["tolerance"], chosen.manifest["precision"]["mode"])
    chosen.manifest["precision"] = {**chosen.manifest["precision"], "requested": "auto",
                                    "check": {**check, "inputs": "given" if check_inputs
                                              is not None else "example (standard normal)"}}
    return chosen


def refusal(target) -> str | None:
    """Why *target* cannot compute bfloat16 (None: it can), from the one decision of what
    its CPU computes (:func:`.schedules.base.microarch.cpu_features`, which the build
    context's CPU reads too)."""
    from .schedules.families.bf16 import bf16_refusal
    cpu = None
    if target.kind.name == "llvm":
        from .schedules.base.microarch import cpu_info
        cpu = cpu_info(target)
    return bf16_refusal(target, cpu)


def check_request(precision: str | None, target) -> None:
    """Refuse ``bf16`` where *target* cannot compute it (before anything is compiled).

    Called once per compile, as it starts (:func:`.compile.compile_with`); the value
    itself was checked when the options were made (:func:`.options.check_precision`)."""
    if precision == "bf16":
        why = refusal(target)
        if why is not None:
            raise BackendError(why)


__all__ = ["BF16_TOLERANCE", "BackendError", "compare", "compile_auto", "example_inputs",
           "range_error"]
