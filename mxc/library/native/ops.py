"""Operators of a compiled library as mxc custom operators.

Each operator ``_opRegGet`` lists becomes a :class:`~mxc.CustomOp` whose
hooks call the library (:mod:`.calls`), registered like any custom operator:
it is in ``mxc.sym``, takes part in shape/dtype inference, runs in the
reference executor and, compiled, as a host node.  Only the hooks the library
set are defined, so mxc's defaults apply to the rest exactly as for a Python
extension (a subgraph operator without ``inferShape`` infers through its
nested graph).

What the library sees matches MXNet: the node's attributes including the
hidden ones (``__ext_shape__``, ``__ext_extra_inputs__``, ...), for a subgraph
operator also ``subgraph_sym_json``; backward gets the output gradients, the
forward inputs and the forward outputs as its inputs and writes one gradient
per input; a stateful operator's state is created on its node's first run
(v10+ ``createOpState`` wants the input shapes) and destroyed when mxc drops
it (v11).

:func:`invoke` runs an operator once on host values, dense or sparse
(:mod:`.sparse`), with MXNet's storage-type dispatch: what ``mxc.mxnet``
uses for ``mx.nd.<op>``.
"""

from __future__ import annotations

import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import ExtensionError
from . import calls
from .calls import OpEntry
from .graph_json import SUBGRAPH_SYM_JSON, subgraph_attr_json
from .marshal import SparseOut, as_contiguous
from .sparse import SparseArray, stype_of

__all__ = ["make_custom_op", "NativeState", "invoke", "invoke_backward", "library_attrs"]


def library_attrs(attrs: Mapping[str, str], p: Any = None, subgraph: Any = None) -> dict:
    """The attributes MXNet hands a library hook: the node's own (hidden ones included)
    and, for a subgraph operator, its nested graph as ``subgraph_sym_json``."""
    node = getattr(p, "node", None)
    full = {k: str(v) for k, v in (node.attrs if node is not None else attrs).items()}
    if subgraph is not None:
        full = {SUBGRAPH_SYM_JSON: _subgraph_json(subgraph), **full}
    return full


_SG_JSON: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _subgraph_json(graph) -> str:
    try:
        hit = _SG_JSON.get(graph)
    except TypeError:
        hit = None
    if hit is None:
        hit = subgraph_attr_json(graph)
        try:
            _SG_JSON[graph] = hit
        except TypeError:
            pass
    return hit


def _split(entry: OpEntry, attrs, extra) -> tuple[dict, Any]:
    """(library attrs, node) from a hook's trailing ``[subgraph,] p`` arguments."""
    p = extra[-1] if extra else None
    subgraph = extra[0] if entry.is_subgraph_op and len(extra) >= 2 else None
    return library_attrs(attrs, p, subgraph), getattr(p, "node", None)


def _host_values(inputs: Sequence) -> list:
    """Inputs as the library reads them: sparse arrays as they are, dense ones contiguous."""
    return [x if isinstance(x, SparseArray) else as_contiguous(np.asarray(x)) for x in inputs]


def with_storage(entry: OpEntry, attrs: Mapping[str, str], inputs: Sequence, outputs: list,
                 node=None) -> list:
    """*outputs* with a :class:`SparseOut` wherever the library's ``inferSType`` wants sparse
    storage for the actual input storage types (MXNet's dispatch, done at call time because
    mxc's shape inference does not know storage types).  An operator without
    ``inferSType`` takes dense inputs only."""
    in_stypes = [stype_of(x) for x in inputs]
    if not entry.infer_stype:
        if any(st != "default" for st in in_stypes):
            raise ExtensionError(f"extension library {entry.lib.name!r}: operator "
                                 f"{entry.name!r} has no inferSType, so it takes dense inputs "
                                 f"only; got {', '.join(in_stypes)}")
        return outputs
    _, out_stypes = calls.infer_storage_type(entry, attrs, in_stypes, len(outputs), node)
    return [o if st == "default" or o is None else SparseOut(st, o.shape, o.dtype)
            for o, st in zip(outputs, out_stypes)]


class NativeState:
    """The host handle of one ``CustomStatefulOp`` inside the library.

    Created empty by ``create_op_state``; the library object is made on the
    first :meth:`forward` (v10+ ``createOpState`` needs the input shapes and
    types) and deleted when this handle is garbage-collected (v11's
    ``_opCallDestroyOpState``; older libraries offer no destructor).
    """

    def __init__(self, entry: OpEntry, attrs: dict, node=None):
        self.entry = entry
        self.attrs = attrs
        # the name only: mxc keeps states in a WeakKeyDictionary keyed by the node
        self.node = node if node is None or isinstance(node, str) else node.name
        self.ptr = 0
        self._finalizer = None

    def _ensure(self, inputs: Sequence) -> int:
        if not self.ptr:
            self.ptr = calls.create_state(self.entry, self.attrs,
                                          [tuple(x.shape) for x in inputs],
                                          [np.dtype(x.dtype).name for x in inputs], self.node)
            if self.ptr:
                fin = weakref.finalize(self, calls.destroy_state, self.entry.lib, self.ptr)
                fin.atexit = False  # the library may be gone at interpreter exit
                self._finalizer = fin
        return self.ptr

    def forward(self, inputs: Sequence, outputs: Sequence) -> list:
        ins = _host_values(inputs)
        outs = with_storage(self.entry, self.attrs, ins, list(outputs), self.node)
        ptr = self._ensure(ins)
        return calls.stateful_compute(self.entry, ptr, True, ins, outs, self.node)

    def backward(self, out_grads: Sequence, inputs: Sequence, outputs: Sequence) -> list:
        ptr = self._ensure(inputs)
        grads = [np.zeros(x.shape, x.dtype) for x in inputs]
        ins = [as_contiguous(np.asarray(x)) for x in list(out_grads) + list(inputs) + list(outputs)]
        return calls.stateful_compute(self.entry, ptr, False, ins, grads, self.node)

    def close(self) -> None:
        """Destroy the library object now (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()


def make_custom_op(entry: OpEntry):
    """A :class:`~mxc.CustomOp` instance whose hooks call *entry*'s library functions."""
    from ...compiler.custom_op import CustomOp

    body: dict[str, Any] = {
        "__doc__": f"Operator {entry.name!r} of compiled extension library {entry.lib.name}.",
        "__module__": __name__, "is_subgraph_op": entry.is_subgraph_op, "wants_params": True,
        "native": entry}
    if entry.parse and not entry.is_subgraph_op:
        def parse_attrs(self, attrs):
            return calls.parse_attrs(entry, attrs)
        body["parse_attrs"] = parse_attrs
    if entry.mutate and not entry.is_subgraph_op:
        def mutate_inputs(self, attrs):
            return calls.mutate_inputs(entry, attrs)
        body["mutate_inputs"] = mutate_inputs
    if entry.infer_shape:
        def infer_shape(self, attrs, in_shapes, *extra):
            full, node = _split(entry, attrs, extra)
            n_out = _num_outputs(self, attrs, extra)
            return calls.infer_shape(entry, full, in_shapes, n_out, node)
        body["infer_shape"] = infer_shape
    if entry.infer_type:
        def infer_type(self, attrs, in_types, *extra):
            full, node = _split(entry, attrs, extra)
            return calls.infer_type(entry, full, in_types, _num_outputs(self, attrs, extra), node)
        body["infer_type"] = infer_type
    # inferSType is not a graph-time hook here: mxc's inference does not know storage
    # types, so it runs when the operator is called (with_storage)
    if entry.create_op:
        def create_op_state(self, attrs, *extra):
            full, node = _split(entry, attrs, extra)
            return NativeState(entry, full, node)
        body["create_op_state"] = create_op_state
    elif entry.forward:
        def forward(self, attrs, inputs, outputs, *extra):
            full, node = _split(entry, attrs, extra)
            _require_outputs(entry, outputs, node)
            ins = _host_values(inputs)
            outs = with_storage(entry, full, ins, list(outputs), node)
            return calls.compute(entry, entry.forward, full, ins, outs, node)
        body["forward"] = forward
        if entry.backward:
            def backward(self, attrs, out_grads, inputs, outputs, *extra):
                full, node = _split(entry, attrs, extra)
                grads = [np.zeros(np.shape(x), np.asarray(x).dtype) for x in inputs]
                ins = [as_contiguous(np.asarray(x))
                       for x in list(out_grads) + list(inputs) + list(outputs)]
                return calls.compute(entry, entry.backward, full, ins, grads, node,
                                     backward=True)
            body["backward"] = backward
    elif not entry.is_subgraph_op:  # e.g. a GPU-only operator: loadable, not runnable
        def forward(self, attrs, inputs, outputs, *extra):
            raise ExtensionError(f"extension library {entry.lib.name!r}: operator "
                                 f"{entry.name!r} has no CPU implementation (its forward is "
                                 f"registered for {entry.contexts.get('forward') or 'no device'})"
                                 f"; mxc runs library operators on the host")
        body["forward"] = forward
    cls = type(f"NativeOp_{entry.name}", (CustomOp,), body)
    return cls()


def _num_outputs(op, attrs, extra) -> int:
    if op.is_subgraph_op:
        subgraph = extra[0]
        return len(subgraph.outputs)
    return op.parse_attrs(attrs)[1]


def _require_outputs(entry: OpEntry, outputs, node) -> None:
    missing = [i for i, o in enumerate(outputs) if o is None]
    if missing:
        raise ExtensionError(f"extension library {entry.lib.name!r}: operator {entry.name!r} "
                             f"output {missing[0]} has no inferred shape, so it cannot be "
                             f"allocated for the library")


# ---------------------------------------------------------------------------
# one imperative call (mx.nd.<op>), dense or sparse
# ---------------------------------------------------------------------------
def _prepare(entry: OpEntry, inputs: Sequence, attrs: Mapping[str, Any]):
    if entry.is_subgraph_op:
        raise ExtensionError(f"operator {entry.name!r} of {entry.lib.name!r} is a subgraph "
                             f"operator; it runs as part of a partitioned graph")
    attrs = {str(k): str(v) for k, v in attrs.items()}
    values = _host_values(inputs)
    n_in, n_out = calls.parse_attrs(entry, attrs) if entry.parse else (len(values), 1)
    if len(values) != n_in:
        raise ExtensionError(f"Operator {entry.name} expects {n_in} inputs, but got "
                             f"{len(values)} instead.")
    return attrs, values, n_out


def _allocate(entry, attrs, values, n_out):
    in_shapes = [tuple(v.shape) for v in values]
    _, out_shapes = calls.infer_shape(entry, attrs, in_shapes, n_out)
    in_types = [np.dtype(v.dtype).name for v in values]
    if entry.infer_type:
        _, out_types = calls.infer_type(entry, attrs, in_types, n_out)
    else:
        out_types = [in_types[0] if in_types else "float32"] * n_out
    return [np.zeros(shape, t or "float32") for shape, t in zip(out_shapes, out_types)]


def invoke(entry: OpEntry, inputs: Sequence, attrs: Mapping[str, Any] | None = None, *,
           state: NativeState | None = None) -> list:
    """Run *entry* once on host values; returns its outputs (numpy or sparse arrays).

    Shapes, dtypes and storage types are inferred with the library's hooks
    first (MXNet's imperative path).  A stateful operator uses *state* or a
    fresh one (destroyed when the caller drops it).
    """
    attrs, values, n_out = _prepare(entry, inputs, attrs or {})
    outs = _allocate(entry, attrs, values, n_out)
    if entry.create_op:
        st = state if state is not None else NativeState(entry, attrs)
        return st.forward(values, outs)
    if not entry.forward:
        raise ExtensionError(f"operator {entry.name!r} of {entry.lib.name!r} has no CPU "
                             f"forward")
    outs = with_storage(entry, attrs, values, outs)
    return calls.compute(entry, entry.forward, attrs, values, outs)


def invoke_backward(entry: OpEntry, out_grads: Sequence, inputs: Sequence, outputs: Sequence,
                    attrs: Mapping[str, Any] | None = None, *,
                    state: NativeState | None = None) -> list:
    """Input gradients of one call (the library's backward; dense)."""
    attrs = {str(k): str(v) for k, v in (attrs or {}).items()}
    if entry.create_op:
        if state is None:
            raise ExtensionError(f"stateful operator {entry.name!r}: backward needs the state "
                                 f"its forward ran with")
        return state.backward(out_grads, inputs, outputs)
    if not entry.backward:
        raise ExtensionError(f"operator {entry.name!r} of {entry.lib.name!r} has no backward")
    grads = [np.zeros(np.shape(x), np.asarray(x).dtype) for x in inputs]
    ins = [as_contiguous(np.asarray(x)) for x in list(out_grads) + list(inputs) + list(outputs)]
    return calls.compute(entry, entry.backward, attrs, ins, grads, backward=True)
