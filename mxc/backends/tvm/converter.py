"""Lowering mxc graphs to TVM Relax: the converter registry and :func:`lower_graph`.

One *converter* per MXNet operator turns a node into Relax expressions.  It
is a function of a :class:`Lowering` context and lives in
``mxc/backends/tvm/ops/<family>.py``, the family being the file that defines
the op in ``mxc/compiler/ops/``::

    @register_converter("Convolution", supports=_conv_supported)
    def convolution(ctx: Lowering):
        p = ctx.p                              # the node's typed params
        data, weight = ctx.inputs[:2]          # relax.Expr of each input
        ...
        return ctx.emit(relax.op.nn.conv2d(data, weight, ...))

A converter returns one expression per output (a list/tuple for multi-output
ops, or a Relax tuple value); hidden outputs that nothing reads may be left
out.  ``supports(node, io)`` (optional; *io* is the node's :class:`NodeIO`, its
inputs' and outputs' inferred shapes and dtypes, read from the graph once)
answers ``True`` or a reason string for attribute combinations the converter
does not handle, so those nodes stay on the host.

Lowering is shape-specialised: every shape is known and static when a
converter runs (``ctx.in_shapes``, ``ctx.out_shapes`` are tuples of ints), so
converters of reshaping ops simply use the inferred output shape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant as _Constant

from ...compiler.ir import Graph, Node
from ...compiler.ir.types import Key  # (node, output index): Entry.key
from ...errors import BackendError, MxcError
from ...registry import Registry

log = logging.getLogger(__name__)

SupportsFn = Callable[[Node, "NodeIO"], "bool | str | None"]

#: operators whose converters are checked on bfloat16 (AMP graphs): they compute through
#: float32 and round once to bfloat16 (nearest even), as MXNet's oneDNN kernels do; any
#: other operator on bfloat16 tensors stays on the host
BF16_OPS = frozenset({"Convolution", "FullyConnected", "Pooling", "Activation", "relu",
                      "elemwise_add", "broadcast_add", "Flatten", "Reshape", "Cast", "amp_cast",
                      "amp_multicast", "BatchNorm"})

#: dtypes the backend lowers (bfloat16 only for :data:`BF16_OPS`)
SUPPORTED_DTYPES = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64",
                              "uint8", "bool"})


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------
@dataclass
class Converter:
    """A registered converter: ``fn(ctx) -> expr(s)`` plus an optional ``supports``."""

    op: str
    fn: Callable[[Lowering], Any]
    supports: SupportsFn | None = None
    module: str = "?"   # the module that registered it (ops/<family>.py)
    nested: bool = False  # lowers a node with nested subgraphs as a whole


#: every converter by (canonical) op name; the family modules (``ops/<family>.py``, the
#: package's public modules) are imported on the first lookup
CONVERTERS: Registry[Converter] = Registry(
    "TVM converters", noun="TVM converter for", builtins=(f"{__package__}.ops",),
    error=ValueError)
#: operators that deliberately have no converter, with the reason (registered by the
#: converter modules: lookups load :data:`CONVERTERS`' built-ins first)
HOST_ONLY: Registry[str] = Registry("host-only operators", noun="host-only operator",
                                    error=ValueError)
_CONVERTERS, _HOST_ONLY = CONVERTERS, HOST_ONLY  # the former private dicts' names


def register_converter(*ops: str, supports: SupportsFn | None = None,
                       override: bool = False, nested: bool = False,
                       module: str | None = None) -> Callable:
    """Function decorator: register the converter of MXNet operator(s) *ops*.

    Register under the op's canonical registry name; aliases (``_plus`` for
    ``elemwise_add`` ...) are resolved through the op registry.  ``nested=True``
    says the converter lowers a node that carries nested subgraphs (a fused
    oneDNN node) from the facts its OpDef reads off them; other subgraph nodes
    stay on the host.  *module* names the family module the converter belongs
    to (default: the module defining the converter function), for converters
    made by a helper in another module (``register_converter("sum",
    module=__name__)(_reduce(R.sum))``).
    """
    if not ops:
        raise ValueError("register_converter needs at least one operator name")

    def deco(fn):
        owner = module or getattr(fn, "__module__", None) or "?"
        for op in ops:
            CONVERTERS.register(op, Converter(op, fn, supports, owner, nested),
                                override=override, origin=fn)
        return fn
    return deco


def register_host_only(*ops: str, reason: str) -> None:
    """Record why operator(s) *ops* deliberately have no converter (they run on the host)."""
    for op in ops:
        HOST_ONLY.register(op, reason, override=True)


def host_only_ops() -> dict[str, str]:
    """Operators that deliberately stay on the host, with the reason."""
    CONVERTERS.load_builtins()
    return HOST_ONLY.as_dict()


def registered_converters() -> dict[str, Converter]:
    """Every registered converter by op name."""
    return CONVERTERS.as_dict()


def get_converter(op: str) -> Converter | None:
    """The converter of *op* (an alias resolves to its canonical op), or None."""
    CONVERTERS.load_builtins()  # HOST_ONLY is filled by the same modules
    conv = CONVERTERS.get(op)
    if conv is None:
        from ...compiler.ops.registry import get_op
        try:
            canonical = get_op(op).name
        except MxcError:
            return None
        conv = CONVERTERS.get(canonical)
    return conv


# ---------------------------------------------------------------------------
# support queries
# ---------------------------------------------------------------------------
@dataclass
class NodeIO:
    """Inferred shapes and dtypes of one node's inputs and outputs."""

    in_shapes: list
    in_dtypes: list
    out_shapes: list
    out_dtypes: list


def node_io(node: Node, shapes: Mapping[Key, Any], dtypes: Mapping[Key, Any]) -> NodeIO:
    """The shapes/dtypes of *node*'s inputs and outputs from whole-graph inference."""
    nout = node.num_outputs()
    return NodeIO(
        in_shapes=[shapes.get(e.key) for e in node.inputs],
        in_dtypes=[dtypes.get(e.key) for e in node.inputs],
        out_shapes=[shapes.get((node, i)) for i in range(nout)],
        out_dtypes=[dtypes.get((node, i)) for i in range(nout)],
    )


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)


def support_reason(node: Node, shapes: Mapping[Key, Any], dtypes: Mapping[Key, Any]) -> str | None:
    """Why *node* cannot be lowered to TVM, or None when it can.

    *shapes*/*dtypes* are whole-graph inference results keyed by
    ``Entry.key`` (:func:`mxc.compiler.infer.infer_shapes`).
    """
    if node.op is None:
        return None
    conv = get_converter(node.op)
    if node.subgraphs and (conv is None or not conv.nested):
        why = HOST_ONLY.get(node.op)
        return f"{node.op}: {why}" if why else \
            f"{node.op} carries nested subgraphs, which the TVM backend does not lower"
    if conv is None:
        try:
            canonical = node.opdef.name
        except MxcError:
            return f"operator {node.op} is not registered"
        why = HOST_ONLY.get(node.op) or HOST_ONLY.get(canonical)
        return f"{node.op}: {why}" if why else f"no TVM converter for operator {node.op}"
    try:
        io = node_io(node, shapes, dtypes)
    except MxcError as exc:
        return str(exc)
    for what, items in (("input", io.in_shapes), ("output", io.out_shapes)):
        for i, s in enumerate(items):
            if not _static(s):
                return f"{what} {i} has no static shape ({s!r})"
    for what, items in (("input", io.in_dtypes), ("output", io.out_dtypes)):
        for i, t in enumerate(items):
            if t is None:
                return f"{what} {i} has no known dtype"
            if t == "bfloat16" and _canonical(node) in BF16_OPS:
                continue
            if t not in SUPPORTED_DTYPES:
                return f"{what} {i} has dtype {t}, which the TVM backend does not handle"
    if conv.supports is not None:
        try:
            verdict = conv.supports(node, io)
        except MxcError as exc:
            return str(exc)
        if isinstance(verdict, str):
            return verdict
        if verdict is False:
            return f"the TVM converter of {node.op} does not handle these attributes"
    return None


def _canonical(node: Node) -> str:
    try:
        return node.opdef.name
    except MxcError:
        return node.op


def is_supported(node: Node, shapes: Mapping[Key, Any], dtypes: Mapping[Key, Any]) -> bool:
    """True when :func:`lower_graph` can lower *node* (see :func:`support_reason`)."""
    return support_reason(node, shapes, dtypes) is None


def unsupported_nodes(graph: Graph, shapes: Mapping | None = None,
                      dtypes: Mapping | None = None) -> dict[str, str]:
    """``{node label: reason}`` for every op node the TVM backend cannot lower.

    The label is the node's name, with its index where nodes share the name
    (:attr:`~mxc.compiler.ir.Node.label`).

    *shapes*/*dtypes* are either whole-graph inference results (keyed by
    ``Entry.key``) or input shapes/dtypes by name, as for :func:`lower_graph`.
    """
    shapes, dtypes = _resolve_types(graph, shapes, dtypes, None)
    out: dict[str, str] = {}
    for node in graph.topo_order():
        reason = support_reason(node, shapes, dtypes)
        if reason is not None:
            out[node.label] = reason
    return out


# ---------------------------------------------------------------------------
# shape/dtype resolution
# ---------------------------------------------------------------------------
def _is_inferred(mapping: Mapping | None) -> bool:
    if not mapping:
        return False
    return all(isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], Node)
               and isinstance(k[1], int) for k in mapping)


def _resolve_types(graph: Graph, shapes, dtypes, params):
    """Whole-graph shapes/dtypes from inferred dicts or from input shapes/dtypes by name."""
    params = params or {}
    if _is_inferred(shapes):
        shape_map = shapes
    else:
        given = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items() if v is not None}
        for name, arr in params.items():
            given.setdefault(name, tuple(np.shape(arr)))
        shape_map = graph.inferred_shapes(given)
    if _is_inferred(dtypes):
        dtype_map = dtypes
    else:
        given_t = {k: np.dtype(v).name for k, v in (dtypes or {}).items() if v is not None}
        for name, arr in params.items():
            given_t.setdefault(name, np.asarray(arr).dtype.name)
        dtype_map = graph.inferred_dtypes(given_t)
        # MXNet's default dtype for inputs nothing says anything about
        missing = {n.name: "float32" for n in graph.input_nodes()
                   if dtype_map.get((n, 0)) is None and "__dtype__" not in n.attrs}
        if missing:
            dtype_map = graph.inferred_dtypes({**missing, **given_t})
    return shape_map, dtype_map


# ---------------------------------------------------------------------------
# the lowering context
# ---------------------------------------------------------------------------
class Lowering:
    """What a converter sees: the block builder, the node, its inputs and types.

    Attributes
    ----------
    bb:
        The :class:`tvm.relax.BlockBuilder` (inside a dataflow block).
    node, p:
        The node and its typed parameters (``node.params``).
    inputs:
        One ``relax.Expr`` per node input (a constant, ``tvm.ir.expr.Constant``, for bound params).
    in_shapes, in_dtypes, out_shapes, out_dtypes:
        Inferred static shapes (tuples of ints) and dtype names.
    """

    def __init__(self, bb: relax.BlockBuilder, node: Node, inputs: Sequence[relax.Expr],
                 io: NodeIO):
        self.bb = bb
        self.node = node
        self.p = node.params
        self.inputs = list(inputs)
        self.in_shapes = [tuple(int(d) for d in s) for s in io.in_shapes]
        self.in_dtypes = list(io.in_dtypes)
        self.out_shapes = [tuple(int(d) for d in s) for s in io.out_shapes]
        self.out_dtypes = list(io.out_dtypes)

    # -- conveniences ---------------------------------------------------------------
    @property
    def params(self):
        return self.p

    @property
    def op(self) -> str:
        return self.node.op

    @property
    def out_shape(self) -> tuple:
        return self.out_shapes[0]

    @property
    def out_dtype(self) -> str:
        return self.out_dtypes[0]

    def error(self, message: str) -> BackendError:
        """A :class:`BackendError` naming the op and node."""
        return BackendError(f"operator {self.node.op} (node {self.node.ref}): {message}")

    def emit(self, expr: relax.Expr) -> relax.Expr:
        """Bind *expr* to a new variable (constants and variables pass through)."""
        if isinstance(expr, (relax.Var, _Constant)):
            return expr
        return self.bb.emit(expr)

    def emit_te(self, func: Callable, *args, **kwargs) -> relax.Expr:
        """Emit a TE compute (``func`` gets ``te.Tensor``s for Relax tensor args)."""
        return self.bb.emit_te(func, *args, **kwargs)

    def const(self, value, dtype: str | None = None) -> relax.Expr:
        """A Relax constant from a Python/numpy value (scalar or array)."""
        arr = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
        return tensor_const(arr)

    def const_value(self, i: int) -> np.ndarray | None:
        """The value of input *i* when it is a bound constant, else None."""
        x = self.inputs[i]
        if isinstance(x, _Constant):
            return x.value.numpy()
        return None

    def astype(self, x: relax.Expr, dtype: str) -> relax.Expr:
        """*x* cast to *dtype* (no-op when it already has it)."""
        if self.dtype_of(x) == dtype:
            return x
        return self.emit(relax.op.astype(x, dtype))

    def shape_of(self, x: relax.Expr) -> tuple[int, ...]:
        """The static shape of a tensor expression."""
        sinfo = self._sinfo(x)
        return tuple(int(v) for v in sinfo.shape.values)

    def dtype_of(self, x: relax.Expr) -> str:
        return str(self._sinfo(x).dtype)

    def _sinfo(self, x):
        return x.ty if _has_type(x) else self.bb.normalize(x).ty

    def reshape(self, x: relax.Expr, shape: Sequence[int]) -> relax.Expr:
        """*x* reshaped to *shape* (no-op when it already has it)."""
        shape = tuple(int(d) for d in shape)
        if self.shape_of(x) == shape:
            return x
        return self.emit(relax.op.reshape(x, shape))


def tensor_const(arr: np.ndarray) -> relax.Expr:
    """A Relax constant holding *arr* with its exact dtype.

    ``relax.const(array)`` without a dtype narrows int64 to int32 and float64
    to float32 (TVM 0.27), so the dtype is always passed.
    """
    arr = np.ascontiguousarray(arr)
    return relax.const(arr, arr.dtype.name)


def _has_type(x) -> bool:
    ty = getattr(x, "ty", None)
    return ty is not None and not ty.is_missing()


# ---------------------------------------------------------------------------
# building functions and modules
# ---------------------------------------------------------------------------
@dataclass
class FunctionInfo:
    """What :meth:`ModuleBuilder.add` built: the function's name and signature."""

    name: str
    input_names: list[str]
    input_shapes: list[tuple]
    input_dtypes: list[str]
    bound: list[str] = field(default_factory=list)
    num_outputs: int = 0


class ModuleBuilder:
    """Lower several graphs into one ``IRModule``, one Relax function each.

    Compiling one module with many functions is much faster than compiling
    each graph on its own (one LLVM session, shared kernels).
    """

    def __init__(self):
        from .tvm_threads import per_thread_block_builders
        per_thread_block_builders()   # concurrent compiles (see the module)
        self.bb = relax.BlockBuilder()
        self.functions: dict[str, FunctionInfo] = {}

    def add(self, name: str, graph: Graph, *, shapes: Mapping | None = None,
            dtypes: Mapping | None = None, params: Mapping[str, np.ndarray] | None = None,
            bind_params: bool = True) -> FunctionInfo:
        """Lower *graph* into a function called *name*; see :func:`lower_graph`."""
        if name in self.functions:
            raise BackendError(f"the module already has a function named {name!r}")
        params = dict(params or {})
        shape_map, dtype_map = _resolve_types(graph, shapes, dtypes, params)
        order = graph.topo_order()

        problems = {}
        for node in order:
            reason = support_reason(node, shape_map, dtype_map)
            if reason is not None:
                problems[node.ref] = (node.op, reason)
        if problems:
            listing = "; ".join(f"node {n} ({op}): {r}" for n, (op, r) in problems.items())
            raise BackendError(f"cannot lower {len(problems)} node(s) to TVM: {listing}")

        from ..reference.executor import unused_inputs
        unused = unused_inputs(graph)
        env: dict[Key, Any] = {}
        fparams: list = []
        info = FunctionInfo(name, [], [], [])
        for var in graph.input_nodes():
            key = (var, 0)
            shape = shape_map.get(key)
            dtype = dtype_map.get(key)
            if not _static(shape) or dtype is None:
                raise BackendError(f"graph input {var.name!r} has no static shape/dtype "
                                   f"(shape {shape!r}, dtype {dtype!r}); give its shape")
            shape = tuple(int(d) for d in shape)
            if bind_params and var.name in params:
                arr = np.asarray(params[var.name])
                if arr.shape != shape:
                    raise BackendError(f"parameter {var.name!r} has shape {arr.shape}, the "
                                       f"graph needs {shape}")
                env[key] = tensor_const(arr.astype(dtype, copy=False))
                info.bound.append(var.name)
            elif var.name in unused and var.name not in params:
                env[key] = tensor_const(np.zeros(shape, dtype=dtype))  # a label inference ignores
                info.bound.append(var.name)
            else:
                v = relax.Var(var.name, relax.TensorType(shape, dtype))
                env[key] = v
                fparams.append(v)
                info.input_names.append(var.name)
                info.input_shapes.append(shape)
                info.input_dtypes.append(dtype)

        bb = self.bb
        with bb.function(name, fparams):
            with bb.dataflow():
                for node in order:
                    if node.op is None:
                        continue
                    self._lower_node(node, env, shape_map, dtype_map)
                outs = []
                for e in graph.outputs:
                    if e.key not in env or env[e.key] is None:
                        raise BackendError(f"graph output {graph.output_name(e)!r} was not "
                                           f"produced by the lowering")
                    outs.append(env[e.key])
                result = bb.emit_output(relax.Tuple(outs))
            bb.emit_func_output(result)
        info.num_outputs = len(graph.outputs)
        self.functions[name] = info
        return info

    def _lower_node(self, node: Node, env: dict, shape_map, dtype_map) -> None:
        conv = get_converter(node.op)
        io = node_io(node, shape_map, dtype_map)
        inputs = []
        for e in node.inputs:
            x = env.get(e.key)
            if x is None:
                raise BackendError(f"operator {node.op} (node {node.ref}): input "
                                   f"{e.node.ref} output {e.index} was not lowered")
            inputs.append(x)
        ctx = Lowering(self.bb, node, inputs, io)
        try:
            result = conv.fn(ctx)
            outs = self._normalize(ctx, result)
        except MxcError:
            raise
        except Exception as exc:
            raise ctx.error(f"lowering to TVM failed: {type(exc).__name__}: {exc}") from exc
        for i, x in enumerate(outs):
            env[(node, i)] = x

    def _normalize(self, ctx: Lowering, result) -> list:
        bb = self.bb
        if isinstance(result, (list, tuple)):
            items = list(result)
        else:
            expr = ctx.emit(result)
            if isinstance(expr.ty, relax.TupleType):
                n = len(expr.ty.fields)
                items = [bb.emit(relax.TupleGetItem(expr, i)) for i in range(n)]
            else:
                items = [expr]
        node = ctx.node
        nout, nvis = node.num_outputs(), node.num_visible_outputs()
        if not nvis <= len(items) <= nout:
            raise ctx.error(f"the converter returned {len(items)} outputs, expected "
                            f"{nout}" + (f" (or {nvis} visible)" if nvis != nout else ""))
        outs = []
        for i, x in enumerate(items):
            if x is None:
                if i < nvis:
                    raise ctx.error(f"the converter returned no value for output {i}")
                outs.append(None)
                continue
            x = ctx.emit(x)
            sinfo = x.ty
            if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
                raise ctx.error(f"output {i} is not a tensor of known shape ({sinfo})")
            got_shape = tuple(int(v) for v in sinfo.shape.values)
            got_dtype = str(sinfo.dtype)
            want_shape, want_dtype = ctx.out_shapes[i], ctx.out_dtypes[i]
            if got_shape != want_shape or got_dtype != want_dtype:
                raise ctx.error(f"output {i} lowered to {got_dtype}{list(got_shape)}, but "
                                f"inference says {want_dtype}{list(want_shape)}")
            outs.append(x)
        return outs

    def finalize(self) -> tvm.IRModule:
        """The ``IRModule`` with every function added so far."""
        return self.bb.finalize()


def lower_graph(graph: Graph, *, shapes: Mapping | None = None, dtypes: Mapping | None = None,
                params: Mapping[str, np.ndarray] | None = None, bind_params: bool = True,
                func_name: str = "main") -> tvm.IRModule:
    """Lower *graph* to a shape-specialised Relax ``IRModule``.

    Parameters
    ----------
    shapes, dtypes:
        Input shapes/dtypes by input name (``{"data": (1, 3, 224, 224)}``),
        or whole-graph inference results keyed by ``Entry.key``.  Shapes and
        dtypes of *params* are added to what is given by name.
    params:
        Parameter arrays by input name (``arg_params`` and ``aux_params``).
    bind_params:
        True (default): every input found in *params* becomes a
        ``relax.const`` so TVM can fold and pre-transform weights.  False:
        they stay runtime inputs of ``main``.

    Returns a module whose function ``main`` takes the graph inputs that were
    not bound, in MXNet's ``list_inputs`` order (:func:`function_input_names`),
    and always returns a tuple of the graph outputs.  Inputs that inference
    never reads (a loss op's label) and that *params* does not give are bound
    to zeros.  Raises :class:`~mxc.errors.BackendError` naming every node that
    cannot be lowered.
    """
    mb = ModuleBuilder()
    mb.add(func_name, graph, shapes=shapes, dtypes=dtypes, params=params,
           bind_params=bind_params)
    return mb.finalize()


def function_input_names(mod: tvm.IRModule, func_name: str = "main") -> list[str]:
    """The parameter names (graph input names) of a lowered function, in order."""
    return [v.name for v in mod[func_name].params]
