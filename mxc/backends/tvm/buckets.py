"""A batch range compiled as batch buckets inside one artifact.

mxc's converter and CPU schedules are static-shape (Winograd, packed weights,
load-time weight transforms, channel padding), so a dimension range
(``data=1..64,3,224,224``) is compiled once per *bucket* batch size -- by
default the powers of two in the range and its upper end -- and the runtime
runs a batch ``b`` on the smallest bucket ``>= b``, its inputs padded along the
ranged axis by repeating the last row and its outputs sliced back to ``b``.

Padding is exact only when rows of the batch never interact, so before
anything is compiled :func:`check_rows_independent` runs the numpy reference
(:mod:`mxc.compiler.interpret`) on a small random batch and on each of its
rows alone and requires the same results; the same run finds each output's
batch axis (the one axis that scales with the batch).  A model that fails
either check is refused with the reason (:class:`~mxc.errors.BackendError`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...errors import BackendError

log = logging.getLogger(__name__)

#: rows of the batch the row-independence check runs (fewer when the range is smaller)
CHECK_ROWS = 3
#: how close each row's outputs alone must be to the same row inside the batch, relative to
#: the output's largest magnitude: float32 reference kernels (BLAS) may sum a row in another
#: order when the batch differs, and deep models amplify that (the corpus's own tolerances
#: reach 1e-3 for mobilenets); rows that interact differ by the size of the values
ROW_TOL = 1e-3

ADVICE = ("compile one static artifact per batch size you serve instead "
          "(--shape data=1,... and --shape data=8,...)")


@dataclass(frozen=True)
class BatchRange:
    """The ranged dimension of a compile: ``lo..hi`` on axis ``axes[input]`` of each input."""

    lo: int
    hi: int
    axes: dict[str, int]

    def shapes_at(self, shapes: Mapping[str, Sequence], batch: int) -> dict[str, tuple]:
        """*shapes* with every range replaced by *batch*."""
        return {name: tuple(batch if axis == self.axes.get(name) else int(d)
                            for axis, d in enumerate(shape)) for name, shape in shapes.items()}

    def text(self) -> str:
        return f"{self.lo}..{self.hi}"


def _as_range(dim: Any) -> tuple[int, int] | None:
    if isinstance(dim, str) and ".." in dim:
        lo, _, hi = dim.partition("..")
        try:
            return int(lo), int(hi)
        except ValueError:
            raise BackendError(f"a dimension range is LO..HI with integers, got {dim!r}"
                               ) from None
    if isinstance(dim, (tuple, list)):
        if len(dim) != 2 or not all(isinstance(d, (int, np.integer)) for d in dim):
            raise BackendError(f"a dimension range is a (LO, HI) pair of integers, got {dim!r}")
        return int(dim[0]), int(dim[1])
    return None


def find_range(shapes: Mapping[str, Any] | None) -> BatchRange | None:
    """The batch range in *shapes*, None when every dimension is fixed.

    Only one dimension of an input may be a range, and every input that has one
    must have the same range (the batch the runtime picks a bucket for)."""
    found: dict[str, tuple[int, tuple[int, int]]] = {}
    for name, shape in (shapes or {}).items():
        ranged = [(axis, r) for axis, r in ((a, _as_range(d)) for a, d in
                                            enumerate(shape if isinstance(shape, (tuple, list))
                                                      else ())) if r is not None]
        if len(ranged) > 1:
            raise BackendError(f"input {name!r}: dimensions {ranged[0][0]} and {ranged[1][0]} "
                               f"are both ranges; only one dimension (the batch) may be a range")
        if ranged:
            found[name] = ranged[0]
    if not found:
        return None
    ranges = {r for _, r in found.values()}
    if len(ranges) > 1:
        listing = ", ".join(f"{n}: {r[0]}..{r[1]}" for n, (_, r) in found.items())
        raise BackendError(f"inputs have different dimension ranges ({listing}); every input "
                           f"with a range must have the same one (the batch)")
    (lo, hi), = ranges
    if not 1 <= lo < hi:
        raise BackendError(f"dimension range {lo}..{hi}: expected 1 <= LO < HI (a range of "
                           f"batch sizes; give a single number for one batch size)")
    return BatchRange(lo, hi, {n: axis for n, (axis, _) in found.items()})


def default_buckets(lo: int, hi: int) -> list[int]:
    """The powers of two in ``[lo, hi]``, and ``hi`` itself (1..64 -> 1, 2, 4, ..., 64;
    3..12 -> 4, 8, 12): a batch never runs more than twice its rows."""
    out, p = [], 1
    while p < hi:
        if p >= lo:
            out.append(p)
        p *= 2
    return out + [hi]


def check_buckets(buckets: Sequence[int] | None, rng: BatchRange) -> list[int]:
    """*buckets* (None: :func:`default_buckets`) sorted and checked to cover the range."""
    if buckets is None:
        return default_buckets(rng.lo, rng.hi)
    try:
        chosen = sorted({int(b) for b in buckets})
    except (TypeError, ValueError):
        raise BackendError(f"batch buckets must be integers, got {buckets!r}") from None
    outside = [b for b in chosen if not rng.lo <= b <= rng.hi]
    if not chosen or outside:
        raise BackendError(f"batch buckets {chosen} must lie in the range {rng.text()}"
                           + (f" ({', '.join(map(str, outside))} do not)" if outside else ""))
    if chosen[-1] != rng.hi:
        raise BackendError(f"batch buckets {chosen} must include {rng.hi}, the top of the range "
                           f"{rng.text()}, else batches above {chosen[-1]} have no bucket")
    return chosen


def check_rows_independent(graph: Any, params: Mapping[str, np.ndarray], rng: BatchRange,
                           shapes: Mapping[str, Sequence], dtypes: Mapping[str, Any]
                           ) -> list[int]:
    """Run the numpy reference on a random batch and on each of its rows alone; refuse
    the range when they differ (the model mixes rows) and return each output's batch
    axis, the one axis whose size follows the batch."""
    from ...compiler.interpret import run_graph
    n = min(CHECK_ROWS, rng.hi)
    gen = np.random.default_rng(0)
    feeds = {}
    for name, shape in rng.shapes_at(shapes, n).items():
        dt = np.dtype(dtypes.get(name, "float32"))
        feeds[name] = (gen.standard_normal(shape).astype(dt) if dt.kind == "f"
                       else gen.integers(0, 2, size=shape).astype(dt))
    try:
        whole = run_graph(graph, {**params, **feeds})
        rows = [run_graph(graph, {**params, **{k: (np.take(v, [i], axis=rng.axes[k])
                                                   if k in rng.axes else v)
                                               for k, v in feeds.items()}})
                for i in range(n)]
    except Exception as exc:  # noqa: BLE001 - any op the reference cannot run here
        raise BackendError(f"dimension range {rng.text()}: the numpy reference could not run "
                           f"the model on a batch of {n} and of 1 to prove its rows independent "
                           f"({type(exc).__name__}: {str(exc)[:200]}); {ADVICE}") from None
    names = graph.list_outputs()
    axes = []
    for k, (out, one) in enumerate(zip(whole, rows[0])):
        differ = [a for a, (p, q) in enumerate(zip(out.shape, one.shape)) if p != q]
        if len(out.shape) != len(one.shape) or len(differ) != 1 or \
                (out.shape[differ[0]], one.shape[differ[0]]) != (n, 1):
            what = "none" if not differ else f"{out.shape} for {n} rows, {one.shape} for 1"
            raise BackendError(f"dimension range {rng.text()}: output {names[k]!r} has no single "
                               f"axis that follows the batch ({what}), so the model mixes rows of "
                               f"the batch (e.g. a reduction or reshape over the batch axis) and "
                               f"cannot run a batch inside a larger bucket; {ADVICE}")
        axes.append(differ[0])
    for i, row in enumerate(rows):
        for k, (out, alone) in enumerate(zip(whole, row)):
            inside = np.take(out, [i], axis=axes[k])
            if inside.dtype.kind == "f":
                scale = float(np.max(np.abs(out), initial=0.0, where=np.isfinite(out)))
                same = np.allclose(inside, alone, rtol=ROW_TOL, atol=ROW_TOL * scale,
                                   equal_nan=True)
            else:
                same = np.array_equal(inside, alone)
            if not same:
                raise BackendError(
                    f"dimension range {rng.text()}: the model mixes rows of the batch (output "
                    f"{names[k]!r}, row {i} differs when run alone from inside a batch of {n}; "
                    f"e.g. a reduction or reshape over the batch axis, or batch statistics), so a "
                    f"batch cannot run padded inside a larger bucket; {ADVICE}")
    return axes


def compile_buckets(sym: Any, params: Any, shapes: Mapping[str, Any],
                    dtypes: Mapping[str, Any] | None, rng: BatchRange,
                    buckets: Sequence[int] | None,
                    compile_one: Callable[[dict], Any]) -> Any:
    """Check the model, compile it once per bucket with *compile_one(shapes)* and return
    a :class:`~.bucket_model.BucketedModel`."""
    from .bucket_model import BucketedModel
    from .lower import _graph_of, _params_of
    chosen = check_buckets(buckets, rng)
    graph = _graph_of(sym)
    unknown = sorted(set(rng.axes) - set(graph.list_inputs()))
    if unknown:
        raise BackendError(f"shapes name input(s) {', '.join(map(repr, unknown))} the model "
                           f"lacks; its inputs are {', '.join(graph.list_inputs())}")
    axes = check_rows_independent(graph, _params_of(params), rng, shapes, dtypes or {})
    models = {}
    for b in chosen:
        log.info("batch range %s: compiling bucket %d", rng.text(), b)
        models[b] = compile_one(rng.shapes_at(shapes, b))
    outputs = [o["name"] for o in models[chosen[-1]].outputs]
    for b, model in models.items():   # the compiled shapes agree with the reference's axes
        for o, axis in zip(model.outputs, axes):
            if o["shape"][axis] != b:
                raise BackendError(f"dimension range {rng.text()}: output {o['name']!r} of "
                                   f"the bucket of {b} has shape {o['shape']}, not {b} on its "
                                   f"batch axis {axis}; {ADVICE}")
    return BucketedModel(rng, chosen, dict(zip(outputs, axes)), models)
