"""``mxc tune --check-model``: the tuned model against the untuned one, end to end.

Each kernel's tuned schedule is verified on its own (:mod:`mxc.backends.tvm.tune.verify`),
but kernels interact in a model (caches, the layouts between them), so the
check compiles the whole model twice -- without the database and with it --
runs both on the same random inputs, alternately, for a bounded time, and
reports the medians.  Their outputs must agree.  Unless the tuned model is the
faster one (:attr:`ModelCheck.keeps_tuned`), the tuned schedules of its kernels
are reverted to the default schedules (their verdicts say so), so that
``mxc compile --db`` builds this model as the untuned compile does.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import numpy as np

from ..errors import BackendError
from .common import shapes_of

log = logging.getLogger(__name__)


def _compile(args, loaded, db):
    """``mxc compile``'s build of the model with the tuning database *db* (None: none,
    whatever ``$MXC_TUNING_DB`` says: the untuned side of the comparison)."""
    import dataclasses
    from ..backends.tvm.compile import compile_with
    from .compile_cmd import options_of
    sym, arg, aux = loaded
    options = dataclasses.replace(options_of(args), db=db)
    return compile_with(sym, (arg, aux), shapes_of(args), dict(args.dtype), options)


def _feeds(args) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(0)
    dtypes = dict(args.dtype)
    feeds = {}
    for name, shape in shapes_of(args).items():
        dtype = np.dtype(dtypes.get(name, "float32"))
        feeds[name] = (rng.uniform(-1, 1, shape).astype(dtype) if dtype.kind == "f"
                       else np.zeros(shape, dtype))
    return feeds


def _outputs(result) -> list[np.ndarray]:
    if isinstance(result, dict):
        return [np.asarray(v) for v in result.values()]
    if isinstance(result, (list, tuple)):
        return [np.asarray(v) for v in result]
    return [np.asarray(result)]


def check_model(args, loaded, report, budget_s: float):
    """Compile untuned and tuned, compare outputs, time them interleaved for about
    *budget_s* seconds; revert the model's tuned kernels unless the tuned build is faster.
    Sets ``report.model_check`` and returns it."""
    from ..backends.tvm.tune.verify import compare_models, revert_to_default
    untuned = _compile(args, loaded, None)
    tuned = _compile(args, loaded, args.db)
    feeds = _feeds(args)
    want, got = _outputs(untuned.run(feeds)), _outputs(tuned.run(feeds))
    for i, (w, g) in enumerate(zip(want, got)):
        if w.dtype.kind == "f" and not np.allclose(g, w, rtol=1e-3, atol=1e-3, equal_nan=True):
            raise BackendError(f"the tuned build's output {i} differs from the untuned build's "
                               f"(max abs diff {float(np.nanmax(np.abs(g - w))):.3g}): "
                               f"database {args.db} holds a wrong schedule")
    check = compare_models(lambda: untuned.run(feeds), lambda: tuned.run(feeds),
                           budget_s=budget_s)
    report.model_check = check
    if not check.keeps_tuned:
        verdicts = [t.verdict for t in report.tasks if t.verdict is not None]
        reverted = revert_to_default(args.db, verdicts)
        for t in report.tasks:
            for v in reverted:
                if t.verdict is not None and t.verdict.key == v.key:
                    t.verdict = v
        log.warning("the tuned model was not faster than the untuned one: %d kernel(s) of "
                    "it back to their default schedules", len(reverted))
    return check
