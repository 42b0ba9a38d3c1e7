"""Custom operators written in Python: MXNet's ``lib_custom_op``, the mxc way.

MXNet lets a compiled extension library add operators (``REGISTER_OP(name)
.setParseAttrs(...).setInferShape(...).setForward(...)``).  In mxc a custom
operator is a Python class whose methods are those same hooks, working on
plain Python values and numpy arrays::

    import mxc

    @mxc.register_custom_op("my_gemm")
    class MyGemm(mxc.CustomOp):
        "C = A @ B for two 2-D matrices."

        def parse_attrs(self, attrs):
            return 2, 1                                  # inputs, outputs

        def infer_shape(self, attrs, in_shapes):
            (n, k), (k2, m) = in_shapes
            if k != k2:
                raise ValueError(f"inner dimensions differ: {k} vs {k2}")
            return in_shapes, [(n, m)]

        def forward(self, attrs, inputs, outputs):
            a, b = inputs
            return [a @ b]

        def backward(self, attrs, out_grads, inputs, outputs):
            (dc,), (a, b) = out_grads, inputs
            return [dc @ b.T, a.T @ dc]

    c = mxc.sym.my_gemm(mxc.sym.var("a"), mxc.sym.var("b"))

Registration produces an ordinary :class:`~mxc.compiler.ops.registry.OpDef`
(an adapter around the class), so the operator is in ``mxc.sym`` like a
built-in, takes part in shape/dtype inference, appears in symbol JSON, and
runs in the reference backend.  Custom operators have no attribute schema:
every attribute is accepted and handed to the hooks as a string, as MXNet
passes them to ``parseAttrs``.

Hooks (see :class:`CustomOp` for their exact contracts):

========================  ========  ======================================
hook                      required  MXNet
========================  ========  ======================================
``parse_attrs``           yes       ``parseAttrs``
``infer_shape``           yes       ``inferShape``
``forward``               yes [1]_  ``forward``
``infer_type``            no        ``inferType`` (default: all dtypes equal)
``infer_storage_type``    no        ``inferSType`` (dense only in mxc)
``mutate_inputs``         no        ``mutateInputs`` (inputs become aux states)
``backward``              no        ``backward`` (see :func:`run_backward`)
``create_op_state``       no        ``createOpState`` (stateful operators)
``input_names``           no        (mxc: names of the inputs)
========================  ========  ======================================

.. [1] or ``create_op_state``; subgraph operators need neither (they run
   their nested graph by default).

A hook signals failure by raising; the exception reaches the user as an
:class:`~mxc.errors.ExtensionError` naming the extension, the hook and the
node, with the hook's own message (``mxc.library.guard``).

mxc compiles and runs inference only, so ``backward`` is never called by an
executor; :func:`run_backward` calls it for a test or a training loop of
your own, on numpy arrays.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ExtensionError, UnsupportedOpError
from ..frontend.attrs import format_attr_value
from ..library import _drop_sym_builder, _node_label, current_library, guard
from .ir.node import is_hidden_attr as _is_hidden
from .ops.common import fmt_shape, is_known
from .ops.registry import (DTYPE_FROM_FLAG, ForwardContext, OpDef, Params, get_op, has_op,
                           register_op, registered_ops, unregister_op)
from .ops.subgraph import SubgraphOp, run_nested

__all__ = ["CustomOp", "register_custom_op", "unregister_custom_op", "get_custom_op",
           "list_custom_ops", "is_custom_op", "run_forward", "run_backward", "create_state",
           "HOOKS"]

#: Every hook a :class:`CustomOp` may override (and ``register_custom_op`` accepts).
HOOKS = ("parse_attrs", "input_names", "infer_shape", "infer_type", "infer_storage_type",
         "mutate_inputs", "forward", "backward", "create_op_state")

_STYPE_FLAGS = {-1: "default", 0: "default", 1: "row_sparse", 2: "csr"}


# ---------------------------------------------------------------------------
# the user-facing base class
# ---------------------------------------------------------------------------
class CustomOp:
    """Base class of a custom operator; override the hooks your operator needs.

    Every hook receives ``attrs``, the node's attributes as a fresh
    ``dict[str, str]`` (custom operators have no schema: a builder keyword
    ``scale=2.5`` arrives as ``"2.5"``).  Shapes are tuples of ints, dtypes
    numpy dtype names (``"float32"``), arrays numpy arrays.

    *Subgraph operators* (``is_subgraph_op = True``, the operators custom
    partitioners turn regions into) get the node's nested
    :class:`~mxc.compiler.ir.Graph` as one more, last, argument of every hook
    (``forward(attrs, inputs, outputs, subgraph)``); their inputs, outputs
    and auxiliary states follow from the nested graph, so they need no
    ``parse_attrs``/``infer_shape``, and without ``forward`` or
    ``create_op_state`` they run the nested graph.

    Attributes
    ----------
    name:
        The registered operator name (set by :func:`register_custom_op`).
    extension:
        Who registered it: the extension library's name or the Python module
        of the class; error messages use it.
    is_subgraph_op:
        True for an operator whose nodes carry a nested graph.
    """

    name: str = ""
    extension: str = ""
    is_subgraph_op: bool = False
    #: True: every hook with a node (all but parse_attrs/mutate_inputs/input_names) also
    #: gets the node's parsed Params, last (``p.node.attrs`` has the hidden attributes).
    wants_params: bool = False

    # -- arity ---------------------------------------------------------------------
    def parse_attrs(self, attrs: dict[str, str]) -> tuple[int, int]:
        """Validate the attributes; return ``(num_inputs, num_outputs)``.

        Raise (``ValueError`` with a short reason) to reject an attribute
        value.  The counts may depend on attributes (``num_args``).
        """
        raise NotImplementedError

    def input_names(self, attrs: dict[str, str], num_inputs: int) -> list[str]:
        """Names of the inputs, used for auto-created variables (``<node>_<name>``).

        Default: ``["data"]`` for one input, ``data0, data1, ...`` otherwise.
        """
        return ["data"] if num_inputs == 1 else [f"data{i}" for i in range(num_inputs)]

    def mutate_inputs(self, attrs: dict[str, str]) -> list[int]:
        """Indices of inputs the operator writes to; they become auxiliary states.

        A graph lists the variables feeding them in
        ``list_auxiliary_states()`` instead of ``list_arguments()``, and
        ``forward`` receives them writable (every other input is read-only).
        """
        return []

    # -- inference -----------------------------------------------------------------
    def infer_shape(self, attrs: dict[str, str],
                    in_shapes: list[tuple[int, ...]]) -> tuple[list, list]:
        """Return ``(in_shapes, out_shapes)``: one shape per input and per output.

        Called once every input shape is known.  Return the input shapes
        unchanged unless the operator constrains them; an output shape may be
        None when it cannot be known yet.
        """
        raise NotImplementedError

    def infer_type(self, attrs: dict[str, str], in_types: list[str]) -> tuple[list, list]:
        """Return ``(in_types, out_types)`` as dtype names (or numpy dtypes).

        Called once every input dtype is known.  Not overriding it means
        what most operators want: every input and output has one dtype
        (inferred in both directions, as MXNet's ``ElemwiseType``).
        """
        num_outputs = self.parse_attrs(attrs)[1]
        first = in_types[0] if in_types else None
        return list(in_types), [first] * num_outputs

    def infer_storage_type(self, attrs: dict[str, str],
                           in_stypes: list[str]) -> tuple[list, list]:
        """Return ``(in_stypes, out_stypes)``; every entry must be ``"default"``.

        MXNet operators may declare sparse (``"row_sparse"``, ``"csr"``)
        inputs or outputs.  mxc compiles dense tensors only: the inputs are
        always ``"default"`` and any other storage type an operator asks for
        is reported as an :class:`~mxc.errors.ExtensionError` when the graph
        is inferred or run.
        """
        num_outputs = self.parse_attrs(attrs)[1]
        return list(in_stypes), ["default"] * num_outputs

    # -- semantics -----------------------------------------------------------------
    def forward(self, attrs: dict[str, str], inputs: list[np.ndarray],
                outputs: list[np.ndarray | None]):
        """Compute the outputs (inference).

        Parameters
        ----------
        inputs:
            One array per input; read-only except the ``mutate_inputs`` ones.
        outputs:
            Zero-filled arrays of the inferred output shapes and dtypes
            (None where inference could not tell).

        Returns
        -------
        list of arrays, one array, or None
            Either return the outputs, or fill *outputs* in place and return
            None (the C++ style).  Results are cast to the inferred dtypes.
        """
        raise NotImplementedError

    def backward(self, attrs: dict[str, str], out_grads: list[np.ndarray],
                 inputs: list[np.ndarray], outputs: list[np.ndarray]) -> list:
        """Return the gradient of each input (None for a non-differentiable one).

        mxc never calls it while running a graph (it executes inference);
        :func:`run_backward` does, for tests and custom training code.
        """
        raise NotImplementedError

    def create_op_state(self, attrs: dict[str, str]) -> Any:
        """Create the state of a *stateful* operator (MXNet ``createOpState``).

        Return an object with ``forward(inputs, outputs)`` (same contract as
        :meth:`forward`, without ``attrs``: keep what you need) and optionally
        ``backward(out_grads, inputs, outputs)``.  mxc creates one state per
        graph node, on its first run, and reuses it for every later run of
        that node (a new one if the node's attributes change); when this hook
        is overridden, ``forward`` is not used.
        """
        raise NotImplementedError

    # -- helpers -------------------------------------------------------------------
    @staticmethod
    def run_subgraph(subgraph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run a subgraph operator's nested graph on *inputs* (its ``list_inputs()`` order)."""
        return run_nested(subgraph, list(inputs))

    def __repr__(self) -> str:
        return f"<CustomOp {self.name or type(self).__name__!r} from {self.extension or '?'}>"


def _overrides(impl: CustomOp, hook: str) -> bool:
    if hook in getattr(impl, "__dict__", {}):
        return True
    return getattr(type(impl), hook, None) is not getattr(CustomOp, hook)


# ---------------------------------------------------------------------------
# value checking
# ---------------------------------------------------------------------------
class _Contract(Exception):
    """A hook returned something outside its contract (reported as ExtensionError)."""


def _norm_shape(value: Any):
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise _Contract(f"{value!r} is not a shape (a tuple of ints)")
    dims = []
    for d in value:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0:
            raise _Contract(f"{value!r} is not a shape (a tuple of non-negative ints)")
        dims.append(int(d))
    return tuple(dims)


def _norm_dtype(value: Any):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise _Contract(f"{value!r} is not a dtype")
    if isinstance(value, (int, np.integer)):
        if int(value) in DTYPE_FROM_FLAG:
            return DTYPE_FROM_FLAG[int(value)]
        raise _Contract(f"{value!r} is not an MXNet dtype flag")
    try:
        return np.dtype(value).name
    except TypeError:
        raise _Contract(f"{value!r} is not a dtype") from None


def _norm_stype(value: Any):
    if value is None:
        return "default"
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if int(value) in _STYPE_FLAGS:
            return _STYPE_FLAGS[int(value)]
    if isinstance(value, str):
        text = value.strip().lower()
        return "default" if text in ("default", "dense") else text
    raise _Contract(f"{value!r} is not a storage type")


def _pair(result: Any, n_in: int, n_out: int, norm: Callable, what: str) -> tuple[list, list]:
    expect = (f"expected ({what}s of the inputs, {what}s of the outputs): a list of "
              f"{n_in} and a list of {n_out}")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise _Contract(f"returned {result!r}; {expect}")
    ins, outs = result
    for side, values, n in (("input", ins, n_in), ("output", outs, n_out)):
        if not isinstance(values, (tuple, list)) or len(values) != n:
            raise _Contract(f"returned {len(values) if isinstance(values, (tuple, list)) else values!r}"
                            f" {side} {what}s; {expect}")
    return [norm(v) for v in ins], [norm(v) for v in outs]


def _is_sparse(x: Any) -> bool:
    """A sparse array (CSR / row-sparse: has ``stype`` and ``todense``), passed through as is."""
    return not isinstance(x, np.ndarray) and hasattr(x, "stype") and hasattr(x, "todense")


def _readonly(x: np.ndarray) -> np.ndarray:
    if _is_sparse(x):
        return x
    view = np.asarray(x).view()
    view.flags.writeable = False
    return view


# ---------------------------------------------------------------------------
# the OpDef adapters
# ---------------------------------------------------------------------------
class _Info:
    """What parse_attrs learned about one node (kept on its Params)."""

    __slots__ = ("attrs", "num_in", "num_out", "mutable", "names")

    def __init__(self, attrs: dict[str, str]):
        self.attrs = attrs
        self.num_in = 0
        self.num_out = 1
        self.mutable: list[int] = []
        self.names: list[str] = []


class _CustomParams(Params):
    __slots__ = ("info",)


class _CustomOpDefMixin:
    """Adapts a :class:`CustomOp` to the :class:`OpDef` interface."""

    family = "custom"
    impl: CustomOp
    extension: str = ""
    _states: "weakref.WeakKeyDictionary"

    # -- helpers -------------------------------------------------------------------
    @property
    def is_stateful(self) -> bool:
        return _overrides(self.impl, "create_op_state")

    def _what(self, hook: str) -> str:
        return f"operator {self.name!r} {hook}"

    def _guard(self, hook: str, node):
        return guard(self.extension, self._what(hook), node)

    def _fail(self, hook: str, node, message: str) -> ExtensionError:
        err = ExtensionError(f"extension {self.extension!r}: {self._what(hook)}"
                             f"{_node_label(node, self._what(hook))}: {message}")
        err.extension, err.function = self.extension, self._what(hook)
        err.node = getattr(node, "name", node)
        err.original = None
        return err

    def _hook_args(self, p) -> tuple:
        return (p,) if self.impl.wants_params else ()

    def _call(self, hook: str, node, fn: Callable, *args):
        with self._guard(hook, node):
            return fn(*args)

    # -- attributes ----------------------------------------------------------------
    def parse_attrs(self, raw: Mapping[str, str], node=None) -> Params:
        """Accept every attribute (as a string) and ask the operator for its arity."""
        attrs = {str(k): v if isinstance(v, str) else format_attr_value(v)
                 for k, v in raw.items()}
        info = _Info(attrs)
        p = _CustomParams(dict(attrs), node)
        object.__setattr__(p, "info", info)
        self._parse(p, info, node)
        return p

    def _parse(self, p, info: _Info, node) -> None:
        raise NotImplementedError

    def _own(self, p) -> "_CustomParams":
        """*p* as parsed by this operator (re-parsed if another definition parsed it,
        e.g. a node built before the name was overridden)."""
        if isinstance(p, _CustomParams):
            return p
        node = p.node
        if node is not None:
            raw = {k: v for k, v in node.attrs.items() if not _is_hidden(k)}
        else:
            raw = {k: format_attr_value(v) for k, v in p.items()}
        return self.parse_attrs(raw, node)

    def format_attrs(self, kwargs: Mapping[str, Any]) -> dict[str, str]:
        return {k: format_attr_value(v) for k, v in kwargs.items() if v is not None}

    # -- storage types -------------------------------------------------------------
    def _check_storage(self, p) -> None:
        if not _overrides(self.impl, "infer_storage_type"):
            return
        p = self._own(p)
        node = p.node
        n_in, n_out = self.num_inputs(p), self.num_outputs(p)
        result = self._call("infer_storage_type", node, self.impl.infer_storage_type,
                            dict(p.info.attrs), ["default"] * n_in, *self._hook_args(p))
        try:
            ins, outs = _pair(result, n_in, n_out, _norm_stype, "storage type")
        except _Contract as exc:
            raise self._fail("infer_storage_type", node, str(exc)) from None
        for side, values in (("input", ins), ("output", outs)):
            for i, st in enumerate(values):
                if st != "default":
                    raise self._fail(
                        "infer_storage_type", node,
                        f"asks for {st!r} storage for {side} {i}; mxc compiles dense "
                        f"('default') tensors only, so operators on sparse storage "
                        f"(row_sparse, csr) are not supported")

    # -- inference -----------------------------------------------------------------
    def infer_shape(self, p, in_shapes, out_shapes):
        p = self._own(p)
        self._check_storage(p)
        if not _overrides(self.impl, "infer_shape"):
            return super().infer_shape(p, in_shapes, out_shapes)
        if not all(is_known(s) for s in in_shapes):
            return list(in_shapes), list(out_shapes)
        node = p.node
        given = [tuple(int(d) for d in s) for s in in_shapes]
        result = self._call("infer_shape", node, self.impl.infer_shape, dict(p.info.attrs),
                            given, *self._hook_args(p))
        try:
            return _pair(result, len(in_shapes), len(out_shapes), _norm_shape, "shape")
        except _Contract as exc:
            raise self._fail("infer_shape", node, f"{exc} (input shapes "
                             f"{', '.join(fmt_shape(s) for s in given)})") from None

    def infer_type(self, p, in_types, out_types):
        p = self._own(p)
        self._check_storage(p)
        if not _overrides(self.impl, "infer_type"):
            return super().infer_type(p, in_types, out_types)
        if any(t is None for t in in_types):
            return list(in_types), list(out_types)
        node = p.node
        result = self._call("infer_type", node, self.impl.infer_type, dict(p.info.attrs),
                            list(in_types), *self._hook_args(p))
        try:
            return _pair(result, len(in_types), len(out_types), _norm_dtype, "dtype")
        except _Contract as exc:
            raise self._fail("infer_type", node, str(exc)) from None

    # -- execution -----------------------------------------------------------------
    def forward(self, p, inputs, ctx):
        return self._forward(p, inputs, ctx, state=None)

    def _forward(self, p, inputs, ctx, state):
        p = self._own(p)
        node = p.node if p.node is not None else ctx.node
        stateful = self.is_stateful
        if not stateful and not _overrides(self.impl, "forward"):
            return super().forward(p, inputs, ctx)  # a subgraph op running its nested graph
        mutable = set(self.mutable_inputs(p))
        ins = [x if i in mutable else _readonly(x) for i, x in enumerate(inputs)]
        n_out = self.num_outputs(p)
        shapes = list(ctx.out_shapes) + [None] * (n_out - len(ctx.out_shapes))
        dtypes = list(ctx.out_dtypes) + [None] * (n_out - len(ctx.out_dtypes))
        outs = [np.zeros(s, dtype=t or np.float32) if is_known(s) else None
                for s, t in zip(shapes, dtypes)]
        if stateful:
            st = state if state is not None else self._state_for(p, node)
            result = self._call("forward", node, st.forward, ins, outs)
        else:
            result = self._call("forward", node, self.impl.forward, dict(p.info.attrs), ins,
                                outs, *self._hook_args(p))
        return self._collect(result, outs, shapes, node)

    def _collect(self, result, outs, shapes, node) -> list[np.ndarray]:
        n_out = len(outs)
        if result is None:
            missing = [i for i, o in enumerate(outs) if o is None]
            if missing:
                raise self._fail("forward", node, f"returned None, but the shape of output "
                                 f"{missing[0]} is unknown so it had no preallocated array; "
                                 f"return the outputs instead")
            values = outs
        elif isinstance(result, (np.ndarray, np.generic, int, float, complex)):
            if n_out != 1:
                raise self._fail("forward", node, f"returned one array for {n_out} outputs; "
                                 f"return a list of {n_out} arrays")
            values = [result]
        elif isinstance(result, (list, tuple)):
            if len(result) != n_out:
                raise self._fail("forward", node, f"returned {len(result)} outputs, expected "
                                 f"{n_out}")
            values = list(result)
        else:
            raise self._fail("forward", node, f"returned {type(result).__name__}; expected a "
                             f"list of {n_out} arrays (or None after filling `outputs`)")
        arrays = []
        for i, v in enumerate(values):
            a = v if _is_sparse(v) else np.asarray(v)  # sparse results of library ops
            want = shapes[i] if i < len(shapes) else None
            if is_known(want) and tuple(a.shape) != tuple(want):
                raise self._fail("forward", node, f"output {i} has shape {fmt_shape(a.shape)}, "
                                 f"but shape inference said {fmt_shape(want)}")
            arrays.append(a)
        return arrays

    def _new_state(self, p, node):
        state = self._call("create_op_state", node, self.impl.create_op_state,
                           dict(p.info.attrs), *self._hook_args(p))
        if state is None or not callable(getattr(state, "forward", None)):
            raise self._fail("create_op_state", node, f"returned {state!r}; expected an object "
                             f"with a forward(inputs, outputs) method")
        return state

    def _state_for(self, p, node):
        """The node's state, created on first use (one per node and attributes)."""
        if node is None:
            return self._new_state(p, node)
        key = tuple(sorted(p.info.attrs.items()))
        entry = self._states.get(node)
        if entry is None or entry[0] != key:
            entry = (key, self._new_state(p, node))
            self._states[node] = entry
        return entry[1]

    def state_of(self, node):
        """The state created for *node*, or None if it has not run yet."""
        entry = self._states.get(node)
        return None if entry is None else entry[1]


class CustomOpDef(_CustomOpDefMixin, OpDef):
    """The OpDef of an ordinary custom operator (arity from ``parse_attrs``)."""

    arguments = ()

    def _parse(self, p, info: _Info, node) -> None:
        impl = self.impl
        result = self._call("parse_attrs", node, impl.parse_attrs, dict(info.attrs))
        if (not isinstance(result, (tuple, list)) or len(result) != 2
                or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                           for n in result)
                or result[0] < 0 or result[1] < 1):
            raise self._fail("parse_attrs", node, f"returned {result!r}; expected "
                             f"(num_inputs, num_outputs): two ints, at least one output")
        info.num_in, info.num_out = int(result[0]), int(result[1])
        if _overrides(impl, "mutate_inputs"):
            idx = self._call("mutate_inputs", node, impl.mutate_inputs, dict(info.attrs))
            try:
                mutable = sorted({int(i) for i in (idx or [])})
            except (TypeError, ValueError):
                raise self._fail("mutate_inputs", node, f"returned {idx!r}; expected a list "
                                 f"of input indices") from None
            bad = [i for i in mutable if not 0 <= i < info.num_in]
            if bad:
                raise self._fail("mutate_inputs", node, f"input index {bad[0]} is out of range "
                                 f"for {info.num_in} inputs")
            info.mutable = mutable
        names = self._call("input_names", node, impl.input_names, dict(info.attrs),
                           info.num_in)
        names = list(names or [])
        if len(names) != info.num_in or len(set(names)) != len(names) or not all(
                isinstance(n, str) and n for n in names):
            raise self._fail("input_names", node, f"returned {names!r}; expected "
                             f"{info.num_in} distinct non-empty names")
        info.names = names

    def input_names(self, p) -> list[str]:
        return list(self._own(p).info.names)

    def num_inputs(self, p) -> int:
        return self._own(p).info.num_in

    def mutable_inputs(self, p) -> list[int]:
        return list(self._own(p).info.mutable)

    def num_outputs(self, p) -> int:
        return self._own(p).info.num_out


class CustomSubgraphOpDef(_CustomOpDefMixin, SubgraphOp):
    """The OpDef of a custom subgraph operator (arity from the nested graph)."""

    def _hook_args(self, p) -> tuple:
        return (self.nested(p),) + ((p,) if self.impl.wants_params else ())

    def _parse(self, p, info: _Info, node) -> None:
        if node is None or not getattr(node, "subgraphs", None):
            return
        if not _overrides(self.impl, "parse_attrs"):
            return
        result = self._call("parse_attrs", node, self.impl.parse_attrs, dict(info.attrs),
                            node.subgraphs[0])
        want = (self.num_inputs(p), self.num_outputs(p))
        if result is not None and (not isinstance(result, (tuple, list))
                                   or tuple(result) != want):
            raise self._fail("parse_attrs", node, f"returned {result!r}, but the nested graph "
                             f"gives the node {want[0]} inputs and {want[1]} outputs")


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------
def _validate(name: str, impl: CustomOp) -> None:
    if impl.is_subgraph_op:
        return
    for hook, why in (("parse_attrs", "the number of inputs and outputs"),
                      ("infer_shape", "the output shapes")):
        if not _overrides(impl, hook):
            raise ExtensionError(f"cannot register custom operator {name!r} "
                                 f"({impl.extension}): {hook} is not implemented; every custom "
                                 f"operator must say {why}")
    if not (_overrides(impl, "forward") or _overrides(impl, "create_op_state")):
        raise ExtensionError(f"cannot register custom operator {name!r} ({impl.extension}): "
                             f"neither forward nor create_op_state is implemented")


def _class_from_hooks(name: str, hooks: dict[str, Any]) -> type:
    extra = {"is_subgraph_op", "doc"}
    unknown = sorted(set(hooks) - set(HOOKS) - extra)
    if unknown:
        raise TypeError(f"register_custom_op({name!r}): unknown hook(s) {', '.join(unknown)}; "
                        f"hooks are {', '.join(HOOKS)}")
    body: dict[str, Any] = {"__doc__": hooks.pop("doc", None) or f"Custom operator {name!r}."}
    if "is_subgraph_op" in hooks:
        body["is_subgraph_op"] = bool(hooks.pop("is_subgraph_op"))
    module = None
    for hook, fn in hooks.items():
        if not callable(fn):
            raise TypeError(f"register_custom_op({name!r}): {hook} must be callable, got "
                            f"{type(fn).__name__}")
        body[hook] = staticmethod(fn)
        module = module or getattr(fn, "__module__", None)
    body["__module__"] = module or __name__
    return type(f"CustomOp_{name}", (CustomOp,), body)


def _register(name: str, op: Any, override: bool) -> CustomOpDef:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ExtensionError(f"a custom operator name must be a non-empty string without "
                             f"surrounding spaces, got {name!r}")
    if isinstance(op, type):
        if not issubclass(op, CustomOp):
            raise TypeError(f"register_custom_op({name!r}): {op.__name__} is not a subclass "
                            f"of mxc.CustomOp")
        lib = current_library()
        with guard(lib.name if lib else op.__module__, f"operator {name!r} constructor", None):
            impl = op()
    elif isinstance(op, CustomOp):
        impl = op
    else:
        raise TypeError(f"register_custom_op({name!r}): expected a CustomOp subclass or "
                        f"instance, got {type(op).__name__}")
    lib = current_library()
    impl.name = name
    impl.extension = lib.name if lib is not None else (type(impl).__module__ or "__main__")
    _validate(name, impl)
    if has_op(name) and not override:
        existing = get_op(name)
        what = (f"custom operator of extension {existing.extension!r}"
                if isinstance(existing, _CustomOpDefMixin)
                else f"built-in operator (family {existing.family})")
        raise ExtensionError(f"cannot register custom operator {name!r}: the name is already "
                             f"registered as a {what}; pass override=True to replace it")
    base = CustomSubgraphOpDef if impl.is_subgraph_op else CustomOpDef
    doc = type(impl).__doc__ if type(impl).__doc__ not in (None, CustomOp.__doc__) else None
    cls = type(f"CustomOpDef_{name}", (base,),
               {"__doc__": doc or f"Custom operator {name!r} ({impl.extension}).",
                "__module__": __name__})
    register_op(name, family="custom", override=True)(cls)
    opdef = cls.opdef
    opdef.impl = impl
    opdef.extension = impl.extension
    opdef._states = weakref.WeakKeyDictionary()
    _drop_sym_builder(name)
    return opdef


def register_custom_op(name: str, op: Any = None, *, override: bool = False, **hooks: Any):
    """Register a custom operator under *name*.

    Three spellings::

        @mxc.register_custom_op("my_relu")        # 1. decorate a CustomOp subclass
        class MyRelu(mxc.CustomOp): ...

        mxc.register_custom_op("my_relu", MyRelu) # 2. a subclass or an instance

        mxc.register_custom_op(                   # 3. hook functions (no self)
            "my_relu",
            parse_attrs=lambda attrs: (1, 1),
            infer_shape=lambda attrs, shapes: (shapes, shapes),
            forward=lambda attrs, inputs, outputs: [np.maximum(inputs[0], 0)])

    Parameters
    ----------
    name:
        The MXNet operator name, as it appears in symbol JSON (``"op"``) and
        in ``mxc.sym``.
    op:
        A :class:`CustomOp` subclass (instantiated once, without arguments)
        or instance.
    override:
        Replace an operator already registered under *name* (a built-in one
        included); without it that is an :class:`~mxc.errors.ExtensionError`.
    **hooks:
        Hook functions (:data:`HOOKS`), plus ``is_subgraph_op`` and ``doc``,
        for spelling 3.

    Returns
    -------
    The decorated/passed class or instance (spelling 3: the generated class).

    Raises
    ------
    ExtensionError
        A required hook is missing (``parse_attrs``, ``infer_shape``, and
        ``forward`` or ``create_op_state``, except for subgraph operators)
        or the name is taken.
    """
    if op is None and not hooks:
        def deco(cls):
            _register(name, cls, override)
            return cls
        return deco
    if hooks:
        if op is not None:
            raise TypeError("register_custom_op: pass either a CustomOp or hook functions, "
                            "not both")
        op = _class_from_hooks(name, dict(hooks))
    _register(name, op, override)
    return op


def is_custom_op(name: str) -> bool:
    """True when *name* is registered as a custom operator."""
    return has_op(name) and isinstance(get_op(name), _CustomOpDefMixin)


def unregister_custom_op(name: str) -> None:
    """Remove custom operator *name* (no-op if absent); built-ins are refused."""
    if not has_op(name):
        return
    op = get_op(name)
    if not isinstance(op, _CustomOpDefMixin):
        raise ExtensionError(f"operator {name!r} is a built-in operator; only custom operators "
                             f"can be unregistered")
    unregister_op(name)
    _drop_sym_builder(name)


def get_custom_op(name: str) -> CustomOp:
    """The :class:`CustomOp` instance registered under *name*."""
    return _opdef(name).impl


def list_custom_ops() -> list[str]:
    """Names of every registered custom operator, sorted."""
    return sorted(n for n, op in registered_ops().items()
                  if isinstance(op, _CustomOpDefMixin) and op.name == n)


def _opdef(name: str) -> _CustomOpDefMixin:
    try:
        op = get_op(name)
    except UnsupportedOpError:
        raise ExtensionError(f"no custom operator {name!r} is registered; custom operators: "
                             f"{', '.join(list_custom_ops()) or 'none'}") from None
    if not isinstance(op, _CustomOpDefMixin):
        raise ExtensionError(f"operator {name!r} is a built-in operator, not a custom one")
    return op


# ---------------------------------------------------------------------------
# calling an operator directly (tests, training code)
# ---------------------------------------------------------------------------
def _prepare(name: str, inputs: Sequence, attrs: Mapping[str, Any] | None):
    opdef = _opdef(name)
    if opdef.impl.is_subgraph_op:
        raise ExtensionError(f"operator {name!r} is a subgraph operator; it runs as part of a "
                             f"partitioned graph, not on its own")
    p = opdef.parse_attrs({k: v for k, v in (attrs or {}).items()}, node=None)
    arrays = [np.asarray(x) for x in inputs]
    if len(arrays) != p.info.num_in:
        raise ExtensionError(f"operator {name!r} takes {p.info.num_in} inputs, got "
                             f"{len(arrays)}")
    return opdef, p, arrays


def create_state(name: str, attrs: Mapping[str, Any] | None = None) -> Any:
    """Create a state of stateful operator *name* for :func:`run_forward`/:func:`run_backward`."""
    opdef = _opdef(name)
    p = opdef.parse_attrs(dict(attrs or {}), node=None)
    if not opdef.is_stateful:
        raise ExtensionError(f"operator {name!r} is not stateful (no create_op_state)")
    return opdef._new_state(p, None)


def run_forward(name: str, inputs: Sequence, attrs: Mapping[str, Any] | None = None, *,
                state: Any = None) -> list[np.ndarray]:
    """Run custom operator *name* once on numpy *inputs*; returns its outputs.

    Shapes and dtypes are inferred with the operator's own hooks first, so
    outputs are preallocated and checked as in a graph.  A stateful
    operator uses *state* (from :func:`create_state`) or a fresh one.
    Inputs the operator mutates are written in place.
    """
    opdef, p, arrays = _prepare(name, inputs, attrs)
    n_out = p.info.num_out
    shapes = [a.shape for a in arrays]
    dtypes = [a.dtype.name for a in arrays]
    _, out_shapes = opdef.infer_shape(p, shapes, [None] * n_out)
    _, out_dtypes = opdef.infer_type(p, dtypes, [None] * n_out)
    ctx = ForwardContext(node=None, out_shapes=out_shapes, out_dtypes=out_dtypes,
                         in_shapes=shapes, in_dtypes=dtypes)
    outs = opdef._forward(p, arrays, ctx, state=state)
    return [o.astype(t) if t is not None and o.dtype.name != t else o
            for o, t in zip(outs, out_dtypes)]


def run_backward(name: str, out_grads: Sequence | np.ndarray, inputs: Sequence,
                 attrs: Mapping[str, Any] | None = None, *, outputs: Sequence | None = None,
                 state: Any = None) -> list[np.ndarray | None]:
    """Gradients of custom operator *name*'s inputs, given its outputs' gradients.

    Parameters
    ----------
    out_grads:
        One array per output (a bare array for a single-output operator).
    inputs:
        The forward inputs.
    outputs:
        The forward outputs; computed with :func:`run_forward` if omitted.
    state:
        For a stateful operator, the state whose ``backward`` to call
        (default: a fresh one, also used for the forward run).

    Returns
    -------
    list
        One gradient per input (None where the operator returns None);
        each is checked to have its input's shape.
    """
    opdef, p, arrays = _prepare(name, inputs, attrs)
    n_in, n_out = p.info.num_in, p.info.num_out
    if opdef.is_stateful and state is None:
        state = opdef._new_state(p, None)
    if outputs is None:
        outputs = run_forward(name, arrays, attrs, state=state)
    outs = [np.asarray(o) for o in outputs]
    grads = [np.asarray(out_grads)] if isinstance(out_grads, np.ndarray) else \
        [np.asarray(g) for g in out_grads]
    if len(grads) != n_out:
        raise ExtensionError(f"operator {name!r} has {n_out} outputs; got {len(grads)} output "
                             f"gradients")
    if opdef.is_stateful:
        fn = getattr(state, "backward", None)
        if not callable(fn):
            raise ExtensionError(f"operator {name!r}: its state {type(state).__name__} has no "
                                 f"backward(out_grads, inputs, outputs) method")
        result = opdef._call("backward", None, fn, grads, arrays, outs)
    else:
        if not _overrides(opdef.impl, "backward"):
            raise ExtensionError(f"operator {name!r} ({opdef.extension}) does not implement "
                                 f"backward")
        result = opdef._call("backward", None, opdef.impl.backward, dict(p.info.attrs), grads,
                             arrays, outs)
    if isinstance(result, np.ndarray) and n_in == 1:
        result = [result]
    if not isinstance(result, (list, tuple)) or len(result) != n_in:
        raise opdef._fail("backward", None, f"returned {result!r}; expected a list of {n_in} "
                          f"input gradients")
    in_grads: list[np.ndarray | None] = []
    for i, (g, x) in enumerate(zip(result, arrays)):
        if g is None:
            in_grads.append(None)
            continue
        g = np.asarray(g)
        if g.shape != x.shape:
            raise opdef._fail("backward", None, f"gradient {i} has shape {fmt_shape(g.shape)}, "
                              f"but input {i} has shape {fmt_shape(x.shape)}")
        in_grads.append(g)
    return in_grads
