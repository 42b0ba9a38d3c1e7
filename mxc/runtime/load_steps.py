"""``load`` steps of a runtime graph: compiled functions run once, when a session is made.

A region whose kernels want their weights in a larger form than the weights
themselves (Winograd's transformed 3x3 weights are 1.8-4x the size) reads
them as trailing inputs; a ``load`` step before it -- a function of the
library, ``regionK_transform_params``, computing them from the weights as
given, which the artifact stores as parameters -- produces them (see
:mod:`mxc.backends.tvm.load_time`).  The session runs every load step once,
keeps the results on the device like stored parameters and lets go of the
weights only load steps read, so the artifact holds the weights once, memory
holds them once, and a call costs nothing more.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from ..errors import ArtifactError
from .plan import LoadStep, Plan

log = logging.getLogger(__name__)

#: the step kind
LOAD = LoadStep.kind


def run_load_steps(plan: Plan, function: Callable[[str], Any],
                   argument: Callable[[int], Any], source: str) -> dict[int, Any]:
    """``{slot: device tensor}`` of every load step of *plan*; *function(name)* gives
    the library's function *name* (a Relax VM function), *argument(slot)* a stored
    parameter on the device.  Raises :class:`~mxc.errors.ArtifactError` when one
    fails or returns the wrong count."""
    values: dict[int, Any] = {}
    for step in plan.load_steps:
        name, slots = step.function, step.outputs
        t0 = time.perf_counter()
        try:
            result = function(name)(*[argument(s) for s in step.inputs])
            got = len(result)
        except Exception as exc:  # noqa: BLE001 - TVM errors
            raise ArtifactError(f"{source}: the load-time function {name!r} failed: "
                                f"{type(exc).__name__}: {exc}") from None
        if got != len(slots):
            raise ArtifactError(f"{source}: the load-time function {name!r} returned {got} "
                                f"value(s), graph.json expects {len(slots)}")
        for s, value in zip(slots, result):
            values[s] = value
        log.debug("%s: %s ran in %.1f ms", source, name, (time.perf_counter() - t0) * 1e3)
    return values


def load_only_slots(plan: Plan) -> set[int]:
    """The slots only load steps read (their weights: not needed once they ran)."""
    by_load, by_others = set(), set()
    for step in plan.steps:
        (by_load if isinstance(step, LoadStep) else by_others).update(step.inputs)
    by_others.update(o.slot for o in plan.outputs)
    return by_load - by_others
