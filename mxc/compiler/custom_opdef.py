"""The OpDef adapter around a :class:`~.custom_hooks.CustomOp`, and the hook contracts it checks.

:mod:`mxc.compiler.custom_op` registers one :class:`CustomOpDef` (or
:class:`CustomSubgraphOpDef`) per custom operator and re-exports these names;
every hook call goes through :func:`~.extension_guard.guard` so a failing
hook is reported as an :class:`~mxc.errors.ExtensionError` naming the node.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import ExtensionError
from .custom_hooks import _STYPE_FLAGS, CustomOp, _overrides
from .extension_guard import _node_label, guard
from .ir.attrs import format_attr_value
from .ir.node import is_hidden_attr as _is_hidden
from .ops.common import fmt_shape, is_known
from .ops.registry import DTYPE_FROM_FLAG, OpDef, Params
from .ops.subgraph import SubgraphOp

__all__ = ["CustomOpDef", "CustomSubgraphOpDef"]


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
