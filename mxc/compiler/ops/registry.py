"""The operator registry: one :class:`OpDef` per MXNet operator.

An op definition says everything mxc knows about an MXNet operator apart from
its TVM lowering: the attribute schema (types, MXNet defaults, validation), the
arity and input names (attribute-dependent), which inputs are mutable
(auxiliary states), shape and dtype inference in both directions, and the numpy
reference semantics of inference-mode forward.

Definitions live in ``mxc/compiler/ops/<family>.py`` and register with the
:func:`register_op` class decorator::

    @register_op("exp", family="elemwise_unary")
    class Exp(UnaryOp):
        ...

Hooks receive ``p``, the node's typed :class:`Params` (``p.kernel``,
``p.no_bias``; ``p.node`` is the node, for subgraph ops and error messages).
Shapes are tuples of ints; ``None`` stands for an unknown shape and a ``None``
dimension for an unknown extent (MXNet writes 0 in its legacy shape syntax).
Dtypes are numpy dtype names (``"float32"``) or ``None`` when unknown.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ...errors import (AttributeInvalidError, AttributeRequiredError, MxcError, ShapeError,
                       UnsupportedOpError)
from ...registry import Registry
from ..ir.attrs import format_attr_value, parse_attr_value

log = logging.getLogger(__name__)

Shape = tuple  # tuple[int | None, ...]
ShapeList = list  # list[Shape | None]

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


# ---------------------------------------------------------------------------
# attribute schema
# ---------------------------------------------------------------------------
class Attr:
    """One operator parameter: a converter from MXNet's string and a default.

    ``convert`` receives the raw attribute string and returns the typed value
    or raises ``ValueError``/``TypeError`` with a short reason; the registry
    wraps that into an :class:`AttributeInvalidError` naming op, node and
    attribute.  ``default`` is MXNet's default (:data:`REQUIRED` if none).
    """

    __slots__ = ("convert", "default", "doc")

    def __init__(self, convert: Callable[[str], Any], default: Any = REQUIRED, doc: str = ""):
        self.convert = convert
        self.default = default
        self.doc = doc


class Params(Mapping):
    """Typed, read-only parameters of one node; attribute and mapping access."""

    __slots__ = ("_values", "node")

    def __init__(self, values: dict[str, Any], node=None):
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "node", node)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        raise AttributeError("Params are read-only; change node.attrs instead")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Params({self._values!r})"

    @property
    def node_name(self) -> str:
        return getattr(self.node, "name", "?")

    @property
    def node_ref(self) -> str:
        """The node as messages name it (:attr:`~mxc.compiler.ir.Node.ref`)."""
        return node_ref(self.node)

    @property
    def np_shape(self) -> bool:
        """True when the node comes from a graph with NumPy shape semantics
        (``is_np_shape``): shape attributes are then literal (``()`` is 0-d,
        0 an empty extent) instead of MXNet's legacy "0 = unknown"."""
        meta = getattr(self.node, "meta", None)
        return bool(meta and meta.get("np_shape"))


def node_ref(node) -> str:
    """*node* as messages name it: its :attr:`~mxc.compiler.ir.Node.ref`, or ``'?'``."""
    ref = getattr(node, "ref", None)
    return ref if isinstance(ref, str) else repr(getattr(node, "name", "?"))


# -- converters ---------------------------------------------------------------
def attr_value(text: str) -> Any:
    """An attribute string parsed as MXNet writes values (ints, floats, tuples, None)."""
    return parse_attr_value(text.strip())


_value = attr_value


def to_int(text: str) -> int:
    v = _value(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            isinstance(v, float) and not v.is_integer()):
        raise ValueError("expected an integer")
    return int(v)


def to_float(text: str) -> float:
    v = _value(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected a number")
    return float(v)


def to_bool(text: str) -> bool:
    v = _value(text)
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise ValueError("expected a boolean (True/False/1/0)")


def to_str(text: str) -> str:
    return text


def to_shape(text: str) -> tuple[int, ...] | None:
    """A tuple of ints; a bare int ``3`` means ``(3,)`` as in MXNet's TShape.

    ``None`` is None: MXNet's tuple parser reads it as a shape of unknown rank
    (gluoncv writes ``GridGenerator(target_shape=None)``); the op decides
    whether it can do without the value.
    """
    v = _value(text)
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError("expected a shape tuple such as (3, 3)")
    if isinstance(v, int):
        return (v,)
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in v):
        return tuple(v)
    raise ValueError("expected a shape tuple of integers such as (3, 3)")


def to_opt_int_tuple(text: str) -> tuple[int | None, ...]:
    """A tuple whose entries are ints or None, e.g. slice's ``(1, None, -2)``."""
    v = _value(text)
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if v is None:
        return ()
    if isinstance(v, (tuple, list)) and all(
            x is None or (isinstance(x, int) and not isinstance(x, bool)) for x in v):
        return tuple(v)
    raise ValueError("expected a tuple of integers or None")


def to_float_tuple(text: str) -> tuple[float, ...] | None:
    """A tuple of numbers (a bare number is a 1-tuple); ``None`` as :func:`to_shape`."""
    v = _value(text)
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (float(v),)
    if isinstance(v, (tuple, list)) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return tuple(float(x) for x in v)
    raise ValueError("expected a tuple of numbers")


def optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """Accept ``None`` as well as whatever *convert* accepts."""
    def conv(text: str) -> Any:
        if text.strip() in ("None", ""):
            return None
        return convert(text)
    conv.__name__ = f"optional_{getattr(convert, '__name__', 'value')}"
    return conv


def enum(*choices: str) -> Callable[[str], str]:
    """One of a fixed set of words (case-sensitive, as MXNet)."""
    def conv(text: str) -> str:
        v = text.strip().strip("'\"")
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return v
    conv.__name__ = "enum"
    return conv


_DTYPE_NAMES = {
    "float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool", "bfloat16",
}
# MXNet's type flags (mshadow) as they appear in __dtype__ attributes
DTYPE_FROM_FLAG = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32",
                   5: "int8", 6: "int64", 7: "bool", 12: "bfloat16"}
FLAG_FROM_DTYPE = {v: k for k, v in DTYPE_FROM_FLAG.items()}


def to_dtype(text: str) -> str:
    v = text.strip().strip("'\"")
    if v in _DTYPE_NAMES:
        return v
    if v.lstrip("-").isdigit() and int(v) in DTYPE_FROM_FLAG:
        return DTYPE_FROM_FLAG[int(v)]
    raise ValueError(f"expected a dtype name ({', '.join(sorted(_DTYPE_NAMES))})")


# ---------------------------------------------------------------------------
# op definitions
# ---------------------------------------------------------------------------
class OpDef:
    """Base class of every operator definition; override what differs.

    Class attributes
    ----------------
    name, family:
        Set by :func:`register_op`.
    attrs:
        ``{param name: Attr}``: the complete MXNet parameter list of the op.
    arguments:
        Default input names (``["data"]``); override :meth:`input_names` when
        they depend on attributes.
    aux:
        Names of mutable inputs (auxiliary states), appended after arguments
        unless :meth:`input_names` says otherwise.
    is_subgraph_op:
        True for ops that carry a nested graph (``_CachedOp``, custom regions).
    has_param_struct:
        Whether MXNet 1.9.1 parses the op's attributes with a parameter struct
        (``dmlc::Parameter``), which refuses unknown keys.  Derived once, at
        registration, from the schema: an op that declares attributes has one,
        an op without them has none (checked against MXNet's sources by
        ``tests/ops/test_attr_schema.py``).  Without a struct MXNet keeps every
        attribute on the node and reads none (``F.zeros_like(x, dtype='int64')``
        writes a ``dtype`` that changes nothing), so :meth:`parse_attrs` ignores
        them too, with a debug log.
    """

    name: str = ""
    family: str = ""
    aliases: tuple[str, ...] = ()
    attrs: dict[str, Attr] = {}
    arguments: tuple[str, ...] = ("data",)
    aux: tuple[str, ...] = ()
    is_subgraph_op: bool = False
    has_param_struct: bool = True

    # -- attributes ---------------------------------------------------------------
    def parse_attrs(self, raw: Mapping[str, str], node=None) -> Params:
        """Convert raw strings to typed values, applying defaults and checking."""
        where = f"operator {self.name} (node {node_ref(node)})"
        values: dict[str, Any] = {}
        for key, text in raw.items():
            spec = self.attrs.get(key)
            if spec is None and not self.has_param_struct:
                log.debug("%s: attribute %s=%r ignored (MXNet registers %s without a "
                          "parameter struct and reads no attributes)", where, key, text,
                          self.name)
                continue
            if spec is None:
                known = ", ".join(sorted(self.attrs)) or "none"
                raise AttributeInvalidError(
                    f"{where}: unknown attribute {key!r}; "
                    f"known attributes: {known}")
            try:
                values[key] = spec.convert(text)
            except (ValueError, TypeError, MxcError) as exc:
                reason = getattr(exc, "bare_message", None) or str(exc)
                raise AttributeInvalidError(
                    f"{where}: attribute {key}={text!r} "
                    f"is invalid: {reason}") from None
        for key, spec in self.attrs.items():
            if key not in values:
                if spec.default is REQUIRED:
                    raise AttributeRequiredError(
                        f"{where}: required attribute "
                        f"{key!r} is missing")
                values[key] = spec.default
        p = Params(values, node)
        try:
            self.validate(p)
        except (TypeError, ValueError, IndexError) as exc:
            # a shape written "None" parses (MXNet: unknown rank), but this op needs it
            unknown = [k for k, v in values.items() if v is None and raw.get(k, "").strip()
                       == "None"]
            if not unknown:
                raise
            raise AttributeInvalidError(
                f"{where}: attribute {', '.join(f'{k}=None' for k in unknown)} is a shape of "
                f"unknown rank, which this operator needs to know") from None
        return p

    def validate(self, p: Params) -> None:
        """Cross-attribute checks; raise :class:`AttributeInvalidError`."""

    def format_attrs(self, kwargs: Mapping[str, Any]) -> dict[str, str]:
        """Builder keyword arguments -> MXNet attribute strings."""
        return {k: format_attr_value(v) for k, v in kwargs.items() if v is not None or k in self.attrs}

    # -- arity --------------------------------------------------------------------
    def input_names(self, p: Params) -> list[str]:
        """Names of all inputs in order (arguments then aux, by default)."""
        return list(self.arguments) + list(self.aux)

    def num_inputs(self, p: Params) -> int | None:
        """Expected input count (None: any)."""
        return len(self.input_names(p))

    def mutable_inputs(self, p: Params) -> list[int]:
        """Indices of inputs the op mutates: MXNet's auxiliary states."""
        names = self.input_names(p)
        return [names.index(a) for a in self.aux if a in names]

    def input_var_attrs(self, p: Params, input_name: str) -> dict[str, str]:
        """Attributes MXNet puts on a variable it creates for a missing input.

        (MXNet's ``FSetInputVarAttrOnCompose``: BatchNorm marks its moving
        statistics with ``__init__``.)
        """
        return {}

    def unused_inputs(self, p: Params) -> list[int]:
        """Indices of inputs inference never reads (a loss op's label).

        Executors feed zeros to graph inputs used only in such slots, so a
        model can run without the training-only labels, as in MXNet's Module
        when bound for inference.
        """
        return []

    def num_outputs(self, p: Params) -> int:
        return 1

    def data_dependent_outputs(self, p: Params) -> list[int]:
        """Indices of outputs whose shape depends on input VALUES (``boolean_mask``).

        Shape inference leaves the data-dependent extents unknown (``None``);
        a compiled graph runs such a node on the host and its artifact marks
        every output downstream as having a data-dependent shape.
        """
        return []

    def num_visible_outputs(self, p: Params) -> int:
        return self.num_outputs(p)

    def output_names(self, p: Params) -> list[str]:
        n = self.num_outputs(p)
        return ["output"] if n == 1 else [f"output{i}" for i in range(n)]

    # -- inference ----------------------------------------------------------------
    def infer_shape(self, p: Params, in_shapes: ShapeList,
                    out_shapes: ShapeList) -> tuple[ShapeList, ShapeList]:
        """Return refined ``(in_shapes, out_shapes)``; may fill either side."""
        raise NotImplementedError(f"{self.name}: infer_shape not implemented")

    def reported_input_shapes(self, p: Params, in_shapes: ShapeList) -> ShapeList:
        """The input shapes MXNet's ``infer_shape`` reports once this op's shape
        function has run: a few write their internal view of an input back into
        the graph (``concatenate(axis=None)`` its inputs flattened, ``insert``
        its values padded to the array's rank), and MXNet then lists that view
        as the argument's shape.  :meth:`Symbol.infer_shape
        <mxc.symbol.Symbol.infer_shape>` reports it too; inference, binding and
        compiling keep the real shapes.  Default: unchanged."""
        return in_shapes

    def infer_type(self, p: Params, in_types: list, out_types: list) -> tuple[list, list]:
        """Default: every input and output shares one dtype (MXNet's ElemwiseType)."""
        known = next((t for t in list(in_types) + list(out_types) if t is not None), None)
        if known is None:
            return in_types, out_types
        return [known] * len(in_types), [known] * len(out_types)

    # -- semantics ----------------------------------------------------------------
    def forward(self, p: Params, inputs: Sequence[np.ndarray], ctx: "ForwardContext") -> list:
        """Inference-mode forward on numpy arrays; returns every output."""
        raise NotImplementedError(f"{self.name}: reference forward not implemented")

    def backward(self, p: Params, out_grads: Sequence[np.ndarray], inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray]) -> list:
        """Gradients of the inputs given the gradients of the outputs (reverse mode).

        Returns one array (or None where no gradient flows) per input.  mxc
        compiles inference; gradients exist for the ops MXNet scripts
        differentiate through the ``mxc.mxnet`` API (``bind(args_grad=...)``,
        ``autograd``).  Ops without a rule raise :class:`NotImplementedError`;
        :meth:`has_backward` tells which do.
        """
        raise NotImplementedError(f"operator {self.name} has no gradient in mxc")

    def has_backward(self) -> bool:
        """True when this definition overrides :meth:`backward`."""
        return type(self).backward is not OpDef.backward

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


class ForwardContext:
    """What a reference kernel may need beyond its inputs.

    ``out_shapes``/``out_dtypes`` are the inferred output shapes and dtypes
    (ops such as ``_zeros`` with ``shape=(0, 32)`` need them); ``node`` is the
    node being run.
    """

    __slots__ = ("node", "out_shapes", "out_dtypes", "in_shapes", "in_dtypes", "executor")

    def __init__(self, node=None, out_shapes=None, out_dtypes=None, in_shapes=None,
                 in_dtypes=None, executor=None):
        self.node = node
        self.out_shapes = out_shapes or []
        self.out_dtypes = out_dtypes or []
        self.in_shapes = in_shapes or []
        self.in_dtypes = in_dtypes or []
        self.executor = executor


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------
def _describe_op(name: str, op: OpDef) -> list[str]:
    """Report lines of ``mxc.library.load``: MXNet's flags of a custom operator."""
    lines = []
    if getattr(op, "is_subgraph_op", False):
        lines.append("isSubgraphOp")
    if getattr(op, "is_stateful", False):
        lines.append("isStateful")
    return lines


def _unknown_op(name: str) -> UnsupportedOpError:
    return UnsupportedOpError({name: 1}, where="graph", suggestions=_suggest([name]))


#: every operator by name and alias; the family modules (the package's public modules),
#: then MXNet's extra names for them, are imported on the first miss
OPS: Registry[OpDef] = Registry(
    "operators", noun="operator",
    builtins=("mxc.compiler.ops", "mxc.compiler.ops._mxnet_aliases"), error=ValueError,
    unknown=_unknown_op, describe=_describe_op)

#: the former private dict's name, kept for code that reads it (a :class:`Registry`)
_REGISTRY = OPS


def register_op(name: str, *, family: str = "", aliases: Iterable[str] = (),
                override: bool = False) -> Callable[[type], type]:
    """Class decorator: instantiate and register an :class:`OpDef` subclass."""
    def deco(cls: type) -> type:
        inst = cls()
        inst.has_param_struct = bool(inst.attrs)  # derived once from the schema
        inst.name = name
        inst.family = family or cls.__module__.rsplit(".", 1)[-1]
        inst.aliases = tuple(aliases)
        OPS.register(name, inst, aliases=inst.aliases, override=override, origin=cls)
        cls.opdef = inst
        return cls
    return deco


def add_aliases(name: str, *aliases: str) -> None:
    """Make *aliases* other names of the registered operator *name* (MXNet's ``add_alias``)."""
    OPS.add_alias(name, *aliases)
    inst = OPS.lookup(name)
    inst.aliases = tuple(dict.fromkeys((*inst.aliases, *aliases)))


def unregister_op(name: str) -> None:
    OPS.unregister(name)


def get_op(name: str, node=None) -> OpDef:
    """The definition of *name*; raises :class:`UnsupportedOpError`."""
    op = OPS.get(name)
    if op is None:
        where = f"node {node.ref}" if node is not None else "graph"
        raise UnsupportedOpError({name: 1}, where=where, suggestions=_suggest([name]))
    return op


def _suggest(names) -> dict[str, str]:
    """Registered op names close to each unknown name (case-insensitive first)."""
    out = {}
    for name in names:
        close = OPS.suggest(name, cutoff=0.75)
        if close:
            out[name] = close
    return out


def has_op(name: str) -> bool:
    return name in OPS


def registered_ops() -> dict[str, OpDef]:
    """Every registered name (aliases included) -> definition."""
    return OPS.as_dict()


def definitions_in(module) -> dict[str, type]:
    """``{op name: OpDef class}`` of the ops a family module registered.

    Reads what is registered so far without importing other families, so a
    family module can build on another one it imported itself.
    """
    return {op.name: type(op) for _, op in OPS.items(load=False)
            if type(op).__module__ == module.__name__}


def check_supported(graph) -> None:
    """Raise one :class:`UnsupportedOpError` listing every unknown op with counts."""
    OPS.load_builtins()
    counts: dict[str, int] = {}
    nodes: dict[str, list[str]] = {}

    def visit(g):
        for n in g.nodes:
            if n.op is not None and n.op not in OPS:
                counts[n.op] = counts.get(n.op, 0) + 1
                nodes.setdefault(n.op, []).append(n.name)
            for sub in n.subgraphs:
                visit(sub)
    visit(graph)
    if counts:
        raise UnsupportedOpError(counts, nodes=nodes, suggestions=_suggest(counts))


def shape_error(p: Params, message: str) -> ShapeError:
    """A :class:`ShapeError` that names the op and node."""
    op = getattr(getattr(p, "node", None), "op", "?")
    return ShapeError(f"operator {op} (node {p.node_ref}): {message}")
