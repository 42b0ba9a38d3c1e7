"""The front half of a compile: graph passes, partition for ``tvm``, lowering to Relax.

:func:`lower_model` turns a model and its :class:`~.options.CompileOptions`
into a :class:`LoweredModel`: the partitioned graph (compiled regions and
host nodes), its inferred types and parameters, and the one Relax
``IRModule`` (``module``) holding a function per region and per compiled
control-flow body, with the target it is meant for.  ``mxc.compile`` builds
that module (:mod:`.compile`); ``mxc tune`` tunes exactly its kernels --
both start here, so what is tuned is what is compiled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ...compiler.ir import Entry, Graph, Node
from ...compiler.weights import check_params, is_data_name
from ...errors import BackendError, MxcError
from .compile_progress import CompileProgress, QuietProgress
from .options import CompileOptions

log = logging.getLogger("mxc.backends.tvm.compile")

__all__ = ["LoweredModel", "lower_model", "DEFAULT_PASSES", "default_pipeline", "params_hint"]

#: the default pass pipeline (only the registered ones run)
DEFAULT_PASSES = ("remove-dropout", "inline-fused", "simplify", "fold-batchnorm", "dce")

#: what the missing-weights error suggests (API and command line)
params_hint = ("Give the model's parameters (--params FILE, params=), or ask for the weights "
               "as run-time inputs (--weights-as-inputs, weights_as_inputs=True).")


def default_pipeline() -> str:
    """:data:`DEFAULT_PASSES` restricted to the passes that are registered."""
    from ...compiler.passes import has_pass
    return ",".join(p for p in DEFAULT_PASSES if has_pass(p))


@dataclass
class LoweredModel:
    """A model after passes, partitioning and lowering: what the build and the
    runtime plan need.

    Attributes
    ----------
    graph:
        The partitioned graph (``_tvm_subgraph`` region nodes and host nodes).
    params:
        Parameter arrays after the passes (folded BatchNorms ...).
    shapes, dtypes:
        Inferred types of *graph*, keyed by entry (``(node, index)``).
    output_names:
        The model's output names, in order.
    regions, host:
        The region nodes and the host nodes, in topological order.
    host_reasons:
        ``{host node label: why it runs on the host}`` (the label is the name, with
        the node's index added where several nodes share it: :attr:`Node.label`).
    functions:
        ``{region name: (FunctionInfo, [the outer entry of each function input])}``.
    bodies:
        ``{id(control-flow host node): [body spec or None per body]}`` (by identity:
        two loops may share a name).
    module:
        The Relax ``IRModule`` to build (None: nothing to compile).
    target:
        The resolved ``tvm.target.Target``.
    pipeline:
        The pass pipeline that ran.
    fed_weights:
        Weights that became run-time inputs (``weights_as_inputs``).
    timings:
        Seconds per stage so far.
    """

    graph: Graph
    params: dict[str, np.ndarray]
    shapes: dict
    dtypes: dict
    output_names: list[str]
    regions: list[Node]
    host: list[Node]
    host_reasons: dict[str, str]
    functions: dict[str, tuple[Any, list[Entry]]]
    bodies: dict[int, list]
    module: Any
    target: Any
    pipeline: str
    fed_weights: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def region_functions(self) -> list[str]:
        """The library function name of every region, in order."""
        return [self.functions[n.name][0].name for n in self.regions]


#: why a dimension range (``data=1..64,3,224,224``, ``((1, 64), 3, 224, 224)``) is refused
SHAPE_RANGE_REFUSAL = (
    "one lowering is for static shapes only: its converter, CPU schedules (Winograd, "
    "channel padding, packed weights) and load-time weight transforms are generated for "
    "fixed extents. `mxc compile`/mxc.compile compile a batch range as one lowering per "
    "batch bucket (mxc.backends.tvm.buckets); lower or tune each batch size you serve "
    "(e.g. --shape data=1,... and --shape data=8,...)")


def refuse_shape_ranges(shapes: Mapping[str, Any]) -> None:
    """Raise :class:`BackendError` naming the input and range when a dimension of
    *shapes* is a ``(LO, HI)`` pair or a ``"LO..HI"`` string (dynamic batch)."""
    for name, shape in shapes.items():
        for axis, dim in enumerate(shape if isinstance(shape, (tuple, list)) else ()):
            if isinstance(dim, (tuple, list)) or (isinstance(dim, str) and ".." in dim):
                text = "..".join(map(str, dim)) if not isinstance(dim, str) else dim
                raise BackendError(f"input {name!r}: dimension {axis} is the range {text}; "
                                   f"dynamic dimensions are not supported: "
                                   f"{SHAPE_RANGE_REFUSAL}")


def lower_model(sym: Any, params: Any = None, shapes: Mapping[str, Any] | None = None,
                dtypes: Mapping[str, Any] | None = None,
                options: CompileOptions | None = None,
                progress: CompileProgress | None = None) -> LoweredModel:
    """Passes, partitioning and lowering of *sym* (a Symbol or a Graph) under *options*.

    *params*, *shapes* and *dtypes* are :func:`mxc.compile`'s.  Raises
    :class:`~mxc.errors.BackendError` for inputs without a complete static
    type, shapes/dtypes of inputs the model lacks, and
    :class:`~mxc.compiler.weights.MissingParamsError` for missing weights --
    all before anything is compiled.
    """
    from ...compiler.partition import optimize_graph
    from . import property as _prop
    _prop.register_tvm_backend()

    opts = options if options is not None else CompileOptions()
    prog = progress if progress is not None else QuietProgress()
    graph = _graph_of(sym)
    output_names = graph.list_outputs()
    params = _params_of(params)
    refuse_shape_ranges(shapes or {})
    shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    dtypes = {k: np.dtype(v).name for k, v in (dtypes or {}).items()}
    empty = {k: v for k, v in shapes.items() if any(d <= 0 for d in v)}
    if empty:
        raise BackendError(f"shapes must have positive dimensions (mxc compiles no empty "
                           f"tensors): {', '.join(f'{k}={v}' for k, v in empty.items())}")
    inputs = set(graph.list_inputs())
    unknown = sorted((set(shapes) | set(dtypes)) - inputs)
    if unknown:
        raise BackendError(_unknown_inputs_message(unknown, graph.list_inputs(), params))
    check_params(graph.list_inputs(), params, set(shapes) | set(dtypes),
                 source=opts.params_source, weights_as_inputs=opts.weights_as_inputs,
                 hint=params_hint)
    fed_weights = [n for n in graph.list_inputs() if n not in params and n not in shapes
                   and n not in dtypes and not is_data_name(n)]   # --weights-as-inputs
    timings: dict[str, float] = {}

    # 1. passes
    pipeline = default_pipeline() if opts.passes is None else str(opts.passes)
    prog.start("passes")
    if pipeline.strip():
        from ...compiler.passes import run_graph as run_pipeline
        graph = _with_declared_dtypes(graph, dtypes)
        aux_names = set(graph.list_auxiliary_states())
        result = run_pipeline(graph, pipeline,
                              {k: v for k, v in params.items() if k not in aux_names},
                              {k: v for k, v in params.items() if k in aux_names},
                              shapes=shapes)
        graph = result.graph
        params = {**result.args, **result.aux}
        timings["passes"] = prog.done(f"{pipeline} -> {len(graph.op_nodes())} op nodes")
    else:
        graph = graph.copy()
        timings["passes"] = prog.done("none")
    if len(graph.outputs) != len(output_names):  # pragma: no cover - a pass changed the outputs
        output_names = graph.list_outputs()

    # 2. types and partition
    prog.start("partition for tvm")
    given_shapes, given_dtypes = _given_types(graph, params, shapes, dtypes)
    types = graph.types(given_shapes, given_dtypes)   # kept on the graph: the partitioner's
    _check_inputs(graph, params, types.shapes, types.dtypes)   # copy starts with them
    pg = optimize_graph(graph, _prop.BACKEND, shapes=given_shapes, dtypes=given_dtypes,
                        clear=False)
    ptypes = pg.types(given_shapes, given_dtypes)
    pshapes, pdtypes = ptypes.shapes, ptypes.dtypes
    _check_inputs(pg, params, pshapes, pdtypes)
    regions = [n for n in pg.topo_order() if _prop.is_tvm_region(n)]
    host = [n for n in pg.topo_order() if n.op is not None and not _prop.is_tvm_region(n)]
    host_reasons = _host_reasons(host, pshapes, pdtypes)
    timings["partition"] = prog.done(f"{len(regions)} region(s), {len(host)} host node(s)")
    for n, why in host_reasons.items():
        log.info("host node %s: %s", n, why)

    # 3. lower every region into one module
    from .targets import resolve_target
    tgt = resolve_target(opts.target, cuda_arch=opts.cuda_arch)
    prog.start("lower to Relax")
    functions, bodies, module = _lower_regions(regions, params, pshapes, pdtypes,
                                               opts.bind_params, prog, host)
    n_bodies = sum(f is not None for b in bodies.values() for f in b)
    timings["lower"] = prog.done(f"{len(regions)} function(s)"
                                 + (f", {n_bodies} control-flow bod(ies)" if n_bodies else ""))
    return LoweredModel(pg, params, pshapes, pdtypes, output_names, regions, host,
                        host_reasons, functions, bodies, module, tgt, pipeline, fed_weights,
                        timings)


def _unknown_inputs_message(unknown, inputs, params) -> str:
    """Name the data inputs (those without a parameter array) first: a ResNet has
    one of them beside hundreds of weights, which a full list would bury."""
    import difflib
    data = [n for n in inputs if n not in params]
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, data or inputs, n=1)
        parts.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    shown = data if data else inputs[:10]
    more = len(inputs) - len(shown)
    return (f"shapes/dtypes given for {', '.join(parts)}, which the model does not have as "
            f"inputs; its {'data ' if data else ''}inputs are {', '.join(shown) or 'none'}"
            + (f" (and {more} parameter(s))" if more > 0 else ""))


def _graph_of(sym) -> Graph:
    if isinstance(sym, Graph):
        return sym
    graph = getattr(sym, "graph", None)
    if isinstance(graph, Graph):
        return graph
    raise BackendError(f"compile() takes a Symbol or a Graph, got {type(sym).__name__}")


def _with_declared_dtypes(graph: Graph, dtypes: Mapping[str, str]) -> Graph:
    """A copy whose data inputs declare their dtypes (``__dtype__``, as MXNet writes it).

    The pass pipeline takes input shapes but not dtypes, and passes infer a
    dtype nothing declares as float32 (``simplify`` would drop the ``Cast``
    of an int32 input); the attribute tells them.
    """
    from ...compiler.ops.registry import FLAG_FROM_DTYPE
    declared = {k: v for k, v in dtypes.items() if v != "float32" and v in FLAG_FROM_DTYPE}
    if not declared:
        return graph
    graph = graph.copy()
    for node in graph.input_nodes():
        if node.name in declared and "__dtype__" not in node.attrs:
            node.attrs["__dtype__"] = str(FLAG_FROM_DTYPE[declared[node.name]])
    return graph


def _params_of(params) -> dict[str, np.ndarray]:
    if params is None:
        return {}
    if isinstance(params, (tuple, list)) and len(params) == 2 and all(
            isinstance(p, Mapping) or p is None for p in params):
        merged = {**(params[0] or {}), **(params[1] or {})}
    elif isinstance(params, Mapping):
        merged = dict(params)
    else:
        raise BackendError(f"params must be a dict or an (arg_params, aux_params) pair, got "
                           f"{type(params).__name__}")
    out = {}
    for k, v in merged.items():
        key = k.split(":", 1)[1] if k.startswith(("arg:", "aux:")) else k
        out[key] = np.asarray(v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray)
                              else v)
    return out


def _given_types(graph: Graph, params, shapes, dtypes):
    names = graph.list_inputs()
    given_shapes = {n: tuple(params[n].shape) for n in names if n in params}
    given_shapes.update({k: v for k, v in shapes.items() if k in names})
    given_dtypes = {n: params[n].dtype.name for n in names if n in params}
    given_dtypes.update({k: v for k, v in dtypes.items() if k in names})
    inferred = graph.inferred_dtypes(given_dtypes)
    for node in graph.input_nodes():  # MXNet binds float32 where nothing says otherwise
        if inferred.get((node, 0)) is None and "__dtype__" not in node.attrs:
            given_dtypes[node.name] = "float32"
    return given_shapes, given_dtypes


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)


def _check_inputs(pg: Graph, params, shapes, dtypes) -> None:
    bad = []
    for node in pg.input_nodes():
        key = (node, 0)
        if node.name in params:
            continue
        if not _static(shapes.get(key)) or dtypes.get(key) is None:
            bad.append(f"{node.name} (shape {shapes.get(key)}, dtype {dtypes.get(key)})")
    if bad:
        raise BackendError(f"input(s) without a complete static shape/dtype: {', '.join(bad)}; "
                           f"give them, e.g. shapes={{'data': (1, 3, 224, 224)}} (CLI: "
                           f"--shape data=1,3,224,224)")


def _host_reasons(host: list[Node], shapes, dtypes) -> dict[str, str]:
    from .converter import support_reason
    out = {}
    for node in host:
        try:
            why = support_reason(node, shapes, dtypes)
        except MxcError as exc:
            why = str(exc)
        out[node.label] = why or "not selected by the tvm partitioner"
    return out


def _lower_regions(regions, params, shapes, dtypes, bind_params, prog: CompileProgress,
                   host=()) -> tuple[dict, dict, Any]:
    """One Relax function per region in one module: ``({region name: (info, outer
    entries)}, {id(host node): body specs}, module or None)``.

    The bodies of control-flow host nodes become functions of the same module
    (see :mod:`.ops.control_flow`)."""
    from .ops.control_flow import lower_bodies
    from .converter import ModuleBuilder
    mb = ModuleBuilder()
    functions: dict[str, Any] = {}
    for k, node in enumerate(regions):
        prog.note(f"region {k + 1}/{len(regions)}")
        nested = node.subgraphs[0]
        variables = nested.input_nodes()
        if len(variables) != len(node.inputs):
            raise BackendError(f"region {node.ref}: {len(node.inputs)} inputs but its nested "
                               f"graph has {len(variables)} variables")
        r_shapes, r_dtypes, r_params, outer = {}, {}, {}, {}
        for var, e in zip(variables, node.inputs):
            r_shapes[var.name] = shapes.get(e.key)
            r_dtypes[var.name] = dtypes.get(e.key)
            outer.setdefault(var.name, e)
            if e.node.op is None and e.node.name in params:
                r_params[var.name] = params[e.node.name]
        fname = f"region{k}"
        info = mb.add(fname, nested, shapes=r_shapes, dtypes=r_dtypes, params=r_params,
                      bind_params=bind_params)
        functions[node.name] = (info, [outer[n] for n in info.input_names])
    bodies = lower_bodies(mb, host, shapes, dtypes, params, bind_params)
    has_bodies = any(f is not None for b in bodies.values() for f in b)
    return functions, bodies, (mb.finalize() if regions or has_bodies else None)
