"""Whole-graph shape and dtype inference, in both directions, as MXNet does.

MXNet's ``InferShape``/``InferType`` passes sweep the graph forward and then
backward, asking each operator to fill in whatever it can from what is known
about its inputs *and* outputs, until a sweep learns nothing new.  That is what
lets ``infer_shape(data=...)`` find weight shapes (a Convolution knows its
weight shape from the data shape and ``num_filter``) and lets a ``_zeros`` with
``shape=(0, 32)`` learn its batch size from the op that consumes it.

Results are keyed by ``Entry.key`` (``(node, output index)``).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterable, Iterator, Mapping

from ..errors import DTypeError, MxcError, ShapeError
from .ir import Entry, Graph, Node
from .ir.types import Key  # (node, output index): Entry.key
from .ops.common import fmt_shape, from_mxnet_shape, merge_shape
from .ops.registry import DTYPE_FROM_FLAG, check_supported



def _hidden_shape(node: Node, np_shape: bool = False):
    """A variable's ``__shape__``: legacy 0 (NumPy mode: -1) marks an unknown extent."""
    text = node.attrs.get("__shape__")
    if text is None:
        return None
    from .ops.registry import to_shape
    try:
        shape = to_shape(text)
        # NumPy shape semantics: 0 is a real extent and -1 means unknown
        shape = tuple(None if d == -1 else int(d) for d in shape) if np_shape \
            else from_mxnet_shape(shape)
    except ValueError:
        raise ShapeError(f"variable {node.ref}: attribute __shape__={text!r} is not a shape")
    return check_declared_shape(shape, f"variable {node.ref}: attribute __shape__={text!r}")


#: no tensor mxc handles has more elements than a signed 64-bit index can count
_MAX_ELEMENTS = (1 << 63) - 1


def check_declared_shape(shape, what: str):
    """Refuse negative dims (-1 is MXNet's "unknown") and element counts beyond int64.

    Declared shapes come from files (``__shape__``) or callers; catching them
    here gives a typed error at ``infer_shape`` instead of a bare ValueError
    or a huge allocation at bind time.
    """
    if shape is None:
        return None
    shape = tuple(None if d == -1 else d for d in shape)
    count = 1
    for d in shape:
        if d is None:
            continue
        if d < 0:
            raise ShapeError(f"{what}: dimension {d} is negative (only -1, unknown, is allowed)")
        count *= d
    if count > _MAX_ELEMENTS:
        raise ShapeError(f"{what}: shape {fmt_shape(shape)} has {count:,} elements, more than "
                         f"a 64-bit index can address")
    return shape


def _hidden_dtype(node: Node):
    text = node.attrs.get("__dtype__")
    if text is None:
        return None
    from .ops.registry import to_dtype
    try:
        return to_dtype(text)
    except ValueError:
        raise DTypeError(f"variable {node.ref}: attribute __dtype__={text!r} is not a dtype "
                         f"(expected an MXNet type flag such as 0 or a dtype name)")


def _merge_shape(a, b):
    return merge_shape(a, b)


def _merge_dtype(a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ValueError(f"{a} vs {b}")


def _known_count_shape(v) -> int:
    if v is None:
        return 0
    return 1 + sum(d is not None for d in v)


def _known_count_dtype(v) -> int:
    return 0 if v is None else 1


def _normalize(kind: str, v):
    if kind == "shape" and v is not None:
        return tuple(int(d) if d is not None else None for d in v)
    return v


def _run(graph: Graph, given: Mapping[str, object], *, kind: str,
         seeds: Iterable[tuple[Key, object, str]] | None = None) -> dict[Key, object]:
    """Bidirectional inference of *kind* ("shape"/"dtype") over *graph*.

    *given*: values of variables by name (else their ``__shape__``/``__dtype__``
    attributes).  *seeds*: ``(entry key, value, description)`` merged in
    first, for any entry, outputs included -- how a nested graph is inferred
    from its outer node's inputs *and* outputs; a conflict names the description.
    """
    with inference_memo():
        return _sweep(graph, given, kind=kind, seeds=seeds)


def _sweep(graph: Graph, given: Mapping[str, object], *, kind: str,
           seeds: Iterable[tuple[Key, object, str]] | None) -> dict[Key, object]:
    check_supported(graph)
    if kind == "shape":
        hidden, merge, count = _hidden_shape, _merge_shape, _known_count_shape
        hook_name, err, fmt = "infer_shape", ShapeError, fmt_shape
    else:
        hidden, merge, count = _hidden_dtype, _merge_dtype, _known_count_dtype
        hook_name, err, fmt = "infer_type", DTypeError, str
    order = graph.topo_order()
    values: dict[Key, object] = {}
    for node in order:
        if node.op is None:
            v = _normalize(kind, given.get(node.name))
            if kind == "shape" and v is not None:
                v = check_declared_shape(v, f"shape given for {node.ref}")
            if v is None and seeds is None:   # (seeded: the seeds decide)
                v = hidden(node, graph.is_np_shape) if kind == "shape" else hidden(node)
            values[(node, 0)] = v
    for key, v, what in seeds or ():
        try:
            values[key] = merge(values.get(key), _normalize(kind, v))
        except ValueError as exc:
            raise err(f"inconsistent {kind} of {what}: {exc}") from None
    op_nodes = [n for n in order if n.op is not None]

    def visit(node: Node) -> bool:
        p = node.params
        ins_keys = [e.key for e in node.inputs]
        nout = node.num_outputs()
        out_keys = [(node, i) for i in range(nout)]
        ins = [values.get(k) for k in ins_keys]
        outs = [values.get(k) for k in out_keys]
        hook: Callable = getattr(node.opdef, hook_name)
        try:
            new_ins, new_outs = hook(p, list(ins), list(outs))
        except MxcError:
            raise
        except NotImplementedError as exc:
            raise err(f"node {node.ref} ({node.op}): {exc}") from None
        except (ValueError, IndexError, TypeError, ZeroDivisionError) as exc:
            raise err(f"operator {node.op} (node {node.ref}): cannot infer {kind}s from "
                      f"inputs {[fmt(s) for s in ins]}: {exc}") from None
        changed = False
        for keys, old, new, side in ((ins_keys, ins, new_ins, "input"),
                                     (out_keys, outs, new_outs, "output")):
            for i, (k, o, nv) in enumerate(zip(keys, old, new)):
                try:
                    m = merge(values.get(k), nv)
                except ValueError as exc:
                    what = node.inputs[i].node.name if side == "input" else node.name
                    raise err(f"operator {node.op} (node {node.ref}): inconsistent {kind} of "
                              f"{side} {i} ({what!r}): {exc}") from None
                if count(m) != count(values.get(k)):
                    values[k] = m
                    changed = True
        return changed

    for _ in range(len(op_nodes) + 2):
        changed = False
        for node in op_nodes:
            changed |= visit(node)
        for node in reversed(op_nodes):
            changed |= visit(node)
        if not changed:
            break
    return values


_MEMO = threading.local()


@contextlib.contextmanager
def inference_memo() -> Iterator[None]:
    """Within this block, seeded inference of a nested graph is computed once per seeds.

    The sweeps of :func:`_run` visit a subgraph node several times (forward,
    backward, and again until nothing changes), and each visit infers its
    nested graph, whose own subgraph nodes do the same: without a memo, 16
    levels of nesting cost 4**16 inferences.  With it, each (graph, seeds)
    pair is inferred once, so nesting costs linear time.  The memo lives as
    long as the outermost block (graphs are not modified meanwhile).
    """
    if getattr(_MEMO, "table", None) is not None:
        yield
        return
    _MEMO.table = {}
    try:
        yield
    finally:
        _MEMO.table = None


def infer_seeded(graph: Graph, kind: str, seeds: Iterable[tuple[Key, object, str]]
                 ) -> dict[Key, object]:
    """Inference of *kind* from values seeded on any entries (see :func:`_run`);
    variables' own attributes are not read.  Used for nested subgraphs (memoised
    inside :func:`inference_memo`; the result must not be modified)."""
    seeds = [(key, _normalize(kind, v), what) for key, v, what in seeds]
    table = getattr(_MEMO, "table", None)
    if table is None:
        with inference_memo():
            return infer_seeded(graph, kind, seeds)
    memo_key = (id(graph), kind, tuple((key, v) for key, v, _ in seeds))
    found = table.get(memo_key)
    if found is None:
        # the graph is kept alive with its result, so its id cannot be reused in the block
        found = table[memo_key] = (graph, _run(graph, {}, kind=kind, seeds=seeds))
    return found[1]


def infer_shapes(graph: Graph, given: Mapping[str, tuple] | None = None) -> Mapping[Key, object]:
    """Shapes of every entry reachable from the outputs (None when unknown).

    The graph's cached answer (:meth:`Graph.inferred_shapes`): read-only,
    inferred again only after the graph changed.
    """
    return graph.inferred_shapes(given)


def infer_types(graph: Graph, given: Mapping[str, str] | None = None) -> Mapping[Key, object]:
    """Dtypes (numpy names) of every entry reachable from the outputs (cached as above)."""
    return graph.inferred_dtypes(given)


def question(kind: str, given: Mapping[str, object] | None) -> tuple:
    """*given* in the one form the graph's type cache keys on: ``(kind, sorted pairs)``.

    Shapes become tuples of ints (None: unknown extent); dtypes numpy names
    (an MXNet type flag is translated); inputs given as None are left out,
    as inference treats them as not given.
    """
    pairs = []
    for name, v in (given or {}).items():
        if v is None:
            continue
        if kind == "shape":
            v = _normalize(kind, v)
        elif isinstance(v, int) and not isinstance(v, bool) and v in DTYPE_FROM_FLAG:
            v = DTYPE_FROM_FLAG[v]
        else:
            import numpy as np
            v = np.dtype(v).name
        pairs.append((name, v))
    return (kind, tuple(sorted(pairs)))


#: whole-graph inferences run so far, by kind ("shape"/"dtype"); nested graphs seeded
#: from their outer node (:func:`infer_seeded`) are not counted.  Read by tests and benches.
RUNS: dict[str, int] = {"shape": 0, "dtype": 0}


def infer_fresh(graph: Graph, kind: str, given: Mapping[str, object]) -> dict[Key, object]:
    """One whole-graph inference of *kind* from normalised *given* (see :func:`question`),
    bypassing the graph's cache: what the cache and ``verify()`` call."""
    RUNS[kind] += 1
    return _run(graph, given, kind=kind)


def entry_value(values: Mapping[Key, object], entry: Entry):
    return values.get(entry.key)
