"""The Symbol API MXNet users know, over mxc's graph IR.

A :class:`Symbol` is a list of output entries (MXNet's heads) plus the graph
that holds their producers.  Symbols built with :mod:`mxc.sym` builders share
nodes the way MXNet symbols do; a symbol loaded from JSON keeps the file's node
order so ``tojson()`` reproduces it.

Shapes returned by the inference methods are tuples of ints; in the
``*_partial`` variants an unknown shape is ``None`` and an unknown dimension
inside a shape is ``None`` too.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np


from .compiler.ir import Entry, Graph, Node, post_order
from .compiler.ops.registry import FLAG_FROM_DTYPE, OpDef, get_op
from .compiler.partition.registry import provide_subgraph_backend
from .errors import GraphError, MxcError, ShapeError

__all__ = ["Symbol", "NameManager", "var", "Variable", "Group", "load", "load_json", "create"]


def _register_tvm_backend() -> None:
    from .backends.tvm.property import register_tvm_backend
    register_tvm_backend()


# optimize_for("tvm") works without importing the backend first: the compiler is told
# how to register it (it may not import the backend itself)
provide_subgraph_backend("tvm", _register_tvm_backend)


# ---------------------------------------------------------------------------
# naming (MXNet's NameManager: "<hint><counter>")
# ---------------------------------------------------------------------------
class NameManager:
    """Hands out ``<hint><n>`` node names; ``with NameManager():`` starts fresh."""

    _local = threading.local()

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._old: NameManager | None = None

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self) -> "NameManager":
        self._old = NameManager.current()
        NameManager._local.value = self
        return self

    def __exit__(self, *exc) -> None:
        NameManager._local.value = self._old

    @classmethod
    def current(cls) -> "NameManager":
        cur = getattr(cls._local, "value", None)
        if cur is None:
            cur = cls._local.value = NameManager()
        return cur


# ---------------------------------------------------------------------------
# Symbol
# ---------------------------------------------------------------------------
class Symbol:
    """One or more outputs of a graph of MXNet operators."""

    __slots__ = ("_outputs", "_graph")

    def __init__(self, outputs: Sequence[Entry], graph: Graph | None = None):
        self._outputs = list(outputs)
        self._graph = graph

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_graph(cls, graph: Graph) -> "Symbol":
        return cls(graph.outputs, graph)

    @property
    def graph(self) -> Graph:
        """The graph of this symbol (built lazily for composed symbols)."""
        if self._graph is None or [e.key for e in self._graph.outputs] != \
                [e.key for e in self._outputs]:
            attrs = self._graph.attrs if self._graph is not None else {}
            self._graph = Graph(post_order(e.node for e in self._outputs), self._outputs, attrs)
        return self._graph

    @property
    def outputs(self) -> list[Entry]:
        return list(self._outputs)

    def __repr__(self) -> str:
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return f"<Symbol group [{', '.join(self.list_outputs())}]>"

    def __str__(self) -> str:
        return str(self.graph)

    @property
    def name(self) -> str | None:
        """The node name of a single-output symbol (None for a group)."""
        return self._outputs[0].node.name if len(self._outputs) == 1 else None

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self):
        return (Symbol([e]) for e in self._outputs)

    def __getitem__(self, index: int | str) -> "Symbol":
        if isinstance(index, str):
            names = self.list_outputs()
            if index not in names:
                raise MxcError(f"symbol has no output named {index!r}; outputs: "
                               f"{', '.join(names)}")
            at = [i for i, n in enumerate(names) if n == index]
            if len(at) > 1:  # nodes that share a name (a Gluon block called twice), as MXNet
                raise MxcError(f"there are multiple outputs named {index!r} (at positions "
                               f"{', '.join(map(str, at))}); index the output by position")
            return Symbol([self._outputs[at[0]]])
        if not -len(self._outputs) <= index < len(self._outputs):
            raise IndexError(f"output index {index} out of range ({len(self._outputs)} outputs)")
        return Symbol([self._outputs[index]])

    def get_internals(self) -> "Symbol":
        """Every visible output of every node, in topological order."""
        entries = []
        for n in self.graph.topo_order():
            entries.extend(Entry(n, i) for i in range(n.num_visible_outputs()))
        return Symbol(entries)

    def get_children(self) -> "Symbol | None":
        entries = [e for out in self._outputs for e in out.node.inputs]
        return Symbol(entries) if entries else None

    # -- listing ------------------------------------------------------------------
    def list_arguments(self) -> list[str]:
        return self.graph.list_arguments()

    def list_auxiliary_states(self) -> list[str]:
        return self.graph.list_auxiliary_states()

    def list_inputs(self) -> list[str]:
        return self.graph.list_inputs()

    def list_outputs(self) -> list[str]:
        return self.graph.list_outputs()

    def attr(self, key: str) -> str | None:
        """An attribute of the single node behind this symbol."""
        if len(self._outputs) != 1:
            return None
        return self._outputs[0].node.attrs.get(key)

    def list_attr(self) -> dict[str, str]:
        return dict(self._outputs[0].node.attrs) if len(self._outputs) == 1 else {}

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """``{node name: {attr: value}}`` for every node that has attributes."""
        return {n.name: dict(n.attrs) for n in self.graph.topo_order() if n.attrs}

    def _set_attr(self, **kwargs: str) -> None:
        for e in self._outputs:
            e.node.attrs.update({k: str(v) for k, v in kwargs.items()})

    # -- serialization ------------------------------------------------------------
    def tojson(self) -> str:
        from .frontend.symbol_json import dump_json
        return dump_json(self.graph)

    def save(self, path: str | Path) -> None:
        from .frontend.symbol_json import dump_json
        from .atomic_files import atomic_write_text
        atomic_write_text(path, dump_json(self.graph))

    # -- inference ----------------------------------------------------------------
    def _given(self, args: Sequence, kwargs: Mapping, what: str) -> dict[str, Any]:
        names = self.list_arguments()
        given: dict[str, Any] = {}
        if args:
            if len(args) > len(names):
                raise MxcError(f"{what}: {len(args)} positional values for {len(names)} arguments")
            for n, v in zip(names, args):
                if v is not None:
                    given[n] = v
        inputs = set(self.list_inputs())
        for k, v in kwargs.items():
            if k not in inputs:
                raise MxcError(f"{what}: {k!r} is not an input of this symbol; inputs are "
                               f"{', '.join(sorted(inputs))}")
            if v is not None:
                given[k] = v
        return given

    def _collect(self, values: Mapping, convert) -> tuple[list, list, list]:
        g = self.graph
        arg = [convert(values.get((n, 0))) for n in g.argument_nodes()]
        out = [convert(values.get(e.key)) for e in g.outputs]
        aux = [convert(values.get((n, 0))) for n in g.aux_nodes()]
        return arg, out, aux

    def infer_shape_partial(self, *args, **kwargs) -> tuple[list, list, list]:
        """Like :meth:`infer_shape` but returns what is known (None for unknown)."""
        given = self._given(args, kwargs, "infer_shape")
        shapes = self.graph.inferred_shapes({k: tuple(v) for k, v in given.items()})
        return self._collect(_as_mxnet_reports(self.graph, shapes),
                             lambda s: None if s is None else tuple(s))

    def infer_shape(self, *args, **kwargs) -> tuple[list | None, list | None, list | None]:
        """``(arg_shapes, out_shapes, aux_shapes)``; ``(None, None, None)`` if incomplete.

        With no arguments, shapes declared on variables (``__shape__``) are used.
        """
        arg, out, aux = self.infer_shape_partial(*args, **kwargs)
        if any(s is None or any(d is None for d in s) for s in arg + out + aux):
            return None, None, None
        return arg, out, aux

    def infer_type_partial(self, *args, **kwargs) -> tuple[list, list, list]:
        given = self._given(args, kwargs, "infer_type")
        dtypes = self.graph.inferred_dtypes(given)
        return self._collect(dtypes, lambda t: None if t is None else np.dtype(t).type)

    def infer_type(self, *args, **kwargs) -> tuple[list | None, list | None, list | None]:
        """``(arg_types, out_types, aux_types)`` as numpy scalar types; Nones if incomplete."""
        arg, out, aux = self.infer_type_partial(*args, **kwargs)
        if any(t is None for t in arg + out + aux):
            return None, None, None
        return arg, out, aux

    # -- execution ----------------------------------------------------------------
    def bind(self, ctx: Any = None, args: Mapping | Sequence | None = None,
             args_grad: Any = None, grad_req: str = "null",
             aux_states: Mapping | Sequence | None = None, **_ignored):
        """Bind arrays to the inputs; returns an executor (reference backend)."""
        from .compiler.interpret import Executor
        if grad_req not in ("null", None) or args_grad is not None:
            raise MxcError("mxc executes inference only: use grad_req='null'")
        arg_dict = _as_dict(args, self.list_arguments(), "args")
        aux_dict = _as_dict(aux_states, self.list_auxiliary_states(), "aux_states")
        optional = self.graph.unused_inputs()
        missing = [n for n in self.list_arguments() if n not in arg_dict and n not in optional]
        missing += [n for n in self.list_auxiliary_states() if n not in aux_dict]
        if missing:
            raise MxcError(f"bind: no array given for {', '.join(missing)}")
        return Executor(self.graph, arg_dict, aux_dict)

    def simple_bind(self, ctx: Any = None, grad_req: str = "null", type_dict=None, **shapes):
        """Allocate zero arrays of the inferred shapes and bind them."""
        arg_shapes, _, aux_shapes = self.infer_shape(**shapes)
        if arg_shapes is None:
            partial = self.infer_shape_partial(**shapes)[0]
            unknown = [n for n, s in zip(self.list_arguments(), partial)
                       if s is None or None in s]
            raise ShapeError(f"simple_bind: cannot infer the shape of {', '.join(unknown)}")
        arg_types, _, aux_types = self.infer_type_partial(**(type_dict or {}))
        from .memory_limits import checked_nbytes
        for name, shape, t in zip(self.list_arguments() + self.list_auxiliary_states(),
                                  arg_shapes + aux_shapes, arg_types + aux_types):
            checked_nbytes(shape, np.dtype(t or np.float32).itemsize, f"simple_bind: {name!r}")
        args = {n: np.zeros(s, dtype=t or np.float32)
                for n, s, t in zip(self.list_arguments(), arg_shapes, arg_types)}
        aux = {n: np.zeros(s, dtype=t or np.float32)
               for n, s, t in zip(self.list_auxiliary_states(), aux_shapes, aux_types)}
        return self.bind(ctx, args, grad_req=grad_req, aux_states=aux)

    def eval(self, ctx: Any = None, **kwargs) -> list[np.ndarray]:
        return self.bind(ctx, kwargs).forward()

    # -- optimize_for --------------------------------------------------------------
    def optimize_for(self, backend: str, args: dict | None = None, aux: dict | None = None,
                     ctx: Any = None, clear: bool = True, **options) -> "Symbol":
        """Partition (or transform) for *backend*; returns a new Symbol.

        Given ``args``/``aux`` (name -> array), shapes and dtypes are inferred
        first and exposed to the backend; a backend that adds or removes
        parameters updates these dicts in place, as MXNet does.
        """
        from .compiler.optimize import optimize_symbol
        return optimize_symbol(self, backend, args=args, aux=aux, clear=clear, **options)

    # -- arithmetic ---------------------------------------------------------------
    def _binary(self, other, op: str, hint: str, scalar_op: str, scalar_hint: str):
        if isinstance(other, Symbol):
            return _compose(op, [self, other], {}, hint=hint)
        if isinstance(other, (int, float, np.number)) and not isinstance(other, bool):
            return _compose(scalar_op, [self], {"scalar": other}, hint=scalar_hint)
        return NotImplemented

    def _rscalar(self, other, op: str, hint: str):
        if isinstance(other, (int, float, np.number)) and not isinstance(other, bool):
            return _compose(op, [self], {"scalar": other}, hint=hint)
        return NotImplemented

    def __add__(self, o):
        return self._binary(o, "elemwise_add", "_plus", "_plus_scalar", "_plusscalar")

    def __radd__(self, o):
        return self._rscalar(o, "_plus_scalar", "_plusscalar")

    def __sub__(self, o):
        return self._binary(o, "elemwise_sub", "_minus", "_minus_scalar", "_minusscalar")

    def __rsub__(self, o):
        return self._rscalar(o, "_rminus_scalar", "_rminusscalar")

    def __mul__(self, o):
        return self._binary(o, "elemwise_mul", "_mul", "_mul_scalar", "_mulscalar")

    def __rmul__(self, o):
        return self._rscalar(o, "_mul_scalar", "_mulscalar")

    def __truediv__(self, o):
        return self._binary(o, "elemwise_div", "_div", "_div_scalar", "_divscalar")

    def __rtruediv__(self, o):
        return self._rscalar(o, "_rdiv_scalar", "_rdivscalar")

    def __mod__(self, o):
        return self._binary(o, "_mod", "_mod", "_mod_scalar", "_modscalar")

    def __rmod__(self, o):
        return self._rscalar(o, "_rmod_scalar", "_rmodscalar")

    def __pow__(self, o):
        return self._binary(o, "_power", "_power", "_power_scalar", "_powerscalar")

    def __rpow__(self, o):
        return self._rscalar(o, "_rpower_scalar", "_rpowerscalar")

    def __neg__(self):
        return self.__mul__(-1.0)

    def __eq__(self, o):  # type: ignore[override]
        return self._binary(o, "_equal", "_equal", "_equal_scalar", "_equalscalar")

    def __ne__(self, o):  # type: ignore[override]
        return self._binary(o, "_not_equal", "_not_equal", "_not_equal_scalar",
                            "_not_equalscalar")

    def __gt__(self, o):
        return self._binary(o, "_greater", "_greater", "_greater_scalar", "_greaterscalar")

    def __ge__(self, o):
        return self._binary(o, "_greater_equal", "_greater_equal", "_greater_equal_scalar",
                            "_greater_equalscalar")

    def __lt__(self, o):
        return self._binary(o, "_lesser", "_lesser", "_lesser_scalar", "_lesserscalar")

    def __le__(self, o):
        return self._binary(o, "_lesser_equal", "_lesser_equal", "_lesser_equal_scalar",
                            "_lesser_equalscalar")

    __hash__ = object.__hash__


def _as_mxnet_reports(graph: Graph, shapes: dict) -> dict:
    """*shapes* with each variable's shape as MXNet's ``infer_shape`` reports it: the
    view the last op reading it wrote back (:meth:`~mxc.compiler.ops.registry.OpDef.
    reported_input_shapes`)."""
    out = shapes
    for node in graph.topo_order():
        if node.op is None or type(node.opdef).reported_input_shapes is \
                OpDef.reported_input_shapes:
            continue
        ins = [shapes.get(e.key) for e in node.inputs]
        for e, s in zip(node.inputs, node.opdef.reported_input_shapes(node.params, ins)):
            if e.node.op is None and s is not None:
                out = dict(out) if out is shapes else out
                out[e.key] = tuple(s)
    return out


def _as_dict(values, names: list[str], what: str) -> dict[str, np.ndarray]:
    if values is None:
        return {}
    if isinstance(values, Mapping):
        return {k: np.asarray(v) for k, v in values.items()}
    values = list(values)
    if len(values) != len(names):
        raise MxcError(f"bind: {what} has {len(values)} arrays for {len(names)} names")
    return {k: np.asarray(v) for k, v in zip(names, values)}


# ---------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------
def var(name: str, attr: Mapping[str, str] | None = None, shape: Sequence[int] | None = None,
        lr_mult: float | None = None, wd_mult: float | None = None, dtype: Any = None,
        init: Any = None, stype: str | None = None, **kwargs: Any) -> Symbol:
    """A variable (graph input), with MXNet's hidden attributes."""
    if not isinstance(name, str) or not name:
        raise MxcError("var: name must be a non-empty string")
    attrs: dict[str, str] = dict(attr or {})
    if shape is not None:
        attrs["__shape__"] = str(tuple(int(d) for d in shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(FLAG_FROM_DTYPE[np.dtype(dtype).name])
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else str(init)
    if stype is not None:
        attrs["__storage_type__"] = str(stype)
    for k, v in kwargs.items():
        key = k if k.startswith("__") and k.endswith("__") else f"__{k}__"
        attrs[key] = str(v)
    return Symbol([Entry(Node(None, name, attrs))])


Variable = var


def Group(symbols: Iterable[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of *symbols*, in order."""
    entries: list[Entry] = []
    for s in symbols:
        if not isinstance(s, Symbol):
            raise MxcError(f"Group expects Symbols, got {type(s).__name__}")
        entries.extend(s._outputs)
    return Symbol(entries)


def load_json(text: str, *, source: str = "<string>") -> Symbol:
    from .frontend.symbol_json import load_json as _load
    return Symbol.from_graph(_load(text, source=source))


def load(path: str | Path) -> Symbol:
    from .frontend.symbol_json import load_json_file
    return Symbol.from_graph(load_json_file(path))


def create(op_name: str, *args: Symbol, name: str | None = None,
           attr: Mapping[str, str] | None = None, **kwargs: Any) -> Symbol:
    """Apply operator *op_name*: ``create("Convolution", x, kernel=(3, 3), num_filter=8)``."""
    return _compose(op_name, list(args), kwargs, name=name, attr=attr)


def _compose(op_name: str, args: list, kwargs: dict, *, name: str | None = None,
             attr: Mapping[str, str] | None = None, hint: str | None = None) -> Symbol:
    opdef = get_op(op_name)
    sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    attr_kwargs = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol) and v is not None}
    for a in args:
        if not isinstance(a, Symbol):
            raise MxcError(f"{op_name}: positional arguments must be Symbols, got "
                           f"{type(a).__name__}; pass attributes by keyword")
    if "num_args" in opdef.attrs and "num_args" not in attr_kwargs:
        attr_kwargs["num_args"] = len(args) + len(sym_kwargs)
    attrs = opdef.format_attrs(attr_kwargs)
    node_name = NameManager.current().get(name, hint or op_name.lower())
    probe = Node(op_name, node_name, attrs)
    params = probe.params  # validates attributes with node-named errors
    input_names = opdef.input_names(params)
    inputs: list[Entry] = []
    positional = list(args)
    for i, in_name in enumerate(input_names):
        if positional:
            sym = positional.pop(0)
        elif in_name in sym_kwargs:
            sym = sym_kwargs.pop(in_name)
        else:
            var_attrs = {**attrs, **opdef.input_var_attrs(params, in_name)}
            sym = var(f"{node_name}_{in_name}", attr=var_attrs)
        if len(sym._outputs) != 1:
            raise MxcError(f"{op_name} (node {node_name!r}): input {in_name!r} must be a "
                           f"single-output symbol, got {len(sym._outputs)} outputs")
        inputs.append(sym._outputs[0])
    if positional or sym_kwargs:
        extra = list(sym_kwargs) or [f"{len(positional)} positional"]
        raise MxcError(f"{op_name} (node {node_name!r}): unexpected input(s) {', '.join(extra)}; "
                       f"inputs are {', '.join(input_names)}")
    if attr:
        attrs.update({k: str(v) for k, v in attr.items()})
    node = Node(op_name, node_name, attrs, _versioned(inputs, opdef.mutable_inputs(params)))
    return Symbol([Entry(node, i) for i in range(node.num_visible_outputs())])


def _versioned(inputs: list[Entry], mutable: Sequence[int]) -> list[Entry]:
    """Stamp variable entries with MXNet's variable versions.

    Each variable counts the ops that mutate it: a mutated input gets the
    incremented count, other uses the current one (MXNet serializes a
    BatchNorm's moving statistics as ``[nid, 0, 1]``).
    """
    out = []
    for i, e in enumerate(inputs):
        if e.node.op is None:
            version = e.node.meta.get("var_version", 0)
            if i in mutable:
                version += 1
                e.node.meta["var_version"] = version
            e = Entry(e.node, e.index, version)
        out.append(e)
    return out


def builder(op_name: str):
    """A function ``f(*inputs, name=None, attr=None, **attrs) -> Symbol`` for one op."""
    opdef = get_op(op_name)

    def build(*args: Symbol, name: str | None = None, attr=None, **kwargs: Any) -> Symbol:
        return _compose(op_name, list(args), kwargs, name=name, attr=attr)

    build.__name__ = op_name
    build.__qualname__ = op_name
    params = ", ".join(f"{k}={v.default!r}" for k, v in opdef.attrs.items())
    build.__doc__ = (f"Build a ``{op_name}`` node.\n\nInputs: {', '.join(opdef.arguments)}."
                     f"\nAttributes: {params or 'none'}.\n\n{type(opdef).__doc__ or ''}")
    return build
