"""Compile a model ahead of time: passes, partition for ``tvm``, lower, build.

:func:`compile` (``mxc.compile``) runs the whole pipeline and returns a
:class:`CompiledModel`; ``model.save("model.mxc")`` writes the deployable
artifact (:mod:`mxc.runtime.artifact`), ``model.session()`` runs it in
memory through the same runtime.

1. **passes** -- an optional graph pass pipeline (default
   :data:`DEFAULT_PASSES`, the ones registered);
2. **partition** -- the ``tvm`` subgraph property
   (:mod:`mxc.backends.tvm.property`) groups every node the Relax lowering
   supports into regions; everything else stays a host node;
3. **lower** -- each region becomes one Relax function of ONE ``IRModule``
   (:class:`~mxc.backends.tvm.converter.ModuleBuilder`), parameters bound as
   constants unless ``bind_params=False``;
4. **build** -- one ``tvm.compile`` for the target (one library), kernels
   found in a tuning database (``db=``, ``mxc compile --db``) with their tuned
   schedules;
5. **runtime graph** -- the plan the runtime executes: value slots, steps
   (regions and host nodes with their parsed parameters), inputs, outputs.

This module imports TVM only when :func:`compile` runs, so ``mxc.compile``
costs nothing until it is called.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...compiler.infer import infer_shapes, infer_types
from ...compiler.ir import Graph, Node
from ...compiler.weights import check_params, is_data_name
from ...progress import StageProgress as Progress
from ...errors import BackendError, MxcError

log = logging.getLogger(__name__)

__all__ = ["compile", "CompiledModel", "DEFAULT_PASSES", "default_pipeline", "Progress"]

#: the default pass pipeline (only the registered ones run)
DEFAULT_PASSES = ("remove-dropout", "inline-fused", "simplify", "fold-batchnorm", "dce")


def default_pipeline() -> str:
    """:data:`DEFAULT_PASSES` restricted to the passes that are registered."""
    from ...compiler.passes import has_pass
    return ",".join(p for p in DEFAULT_PASSES if has_pass(p))


# ---------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------
@dataclass
class CompiledModel:
    """A compiled model: save it as an artifact or run it in memory.

    Attributes
    ----------
    graph:
        The partitioned graph (``_tvm_subgraph`` region nodes and host nodes).
    runtime_graph:
        The plan the runtime executes (``graph.json`` of the artifact).
    manifest:
        Target, inputs/outputs, regions, host nodes, versions (``manifest.json``).
    params:
        Parameters the runtime needs that are not compiled into the library.
    executable:
        The Relax VM executable (``tvm.relax.VMExecutable``), None without regions.
    host_nodes:
        ``{node name: why it runs on the host}``.
    timings:
        Seconds per compile stage.
    """

    graph: Graph
    runtime_graph: dict
    manifest: dict
    params: dict[str, np.ndarray]
    executable: Any
    host_nodes: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _library: bytes | None = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)
    sign: Any = field(default=None, repr=False)

    @property
    def inputs(self) -> list[dict]:
        return [i for i in self.manifest["inputs"] if not i.get("optional")]

    @property
    def outputs(self) -> list[dict]:
        return list(self.manifest["outputs"])

    @property
    def regions(self) -> list[dict]:
        return list(self.manifest["regions"])

    @property
    def target(self) -> str:
        return self.manifest["target"]["string"]

    def library_bytes(self) -> bytes | None:
        """The compiled library as ``export_library`` writes it (cached)."""
        if self.executable is None:
            return None
        if self._library is None:
            from ...utils import clean_stale  # what a killed export left behind
            clean_stale(tempfile.gettempdir(), "mxc-export-*")
            tmp = tempfile.mkdtemp(prefix=f"mxc-export-{os.getpid()}-")
            try:
                path = os.path.join(tmp, "lib.so")
                try:
                    self.executable.export_library(path, **self._export_options())
                except BackendError:
                    raise
                except Exception as exc:  # noqa: BLE001 - TVM / C compiler errors
                    raise BackendError(f"exporting the compiled library failed: "
                                       f"{type(exc).__name__}: {exc}") from exc
                self._library = Path(path).read_bytes()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return self._library

    def _export_options(self) -> dict:
        """The linker drops the kernels' debug information (a tenth of a small model's
        artifact; nothing reads it at run time).  CUDA: device code goes in as a
        fatbin (SASS + PTX), see :mod:`.cuda_binary`."""
        options = {"options": ["-Wl,-S"]}
        target = self.manifest["target"]
        if target.get("kind") != "cuda":
            return options
        from .cuda_binary import pack_imports
        from .targets import DEFAULT_CUDA_ARCH
        return {**options,
                "fpack_imports": pack_imports(target.get("arch") or DEFAULT_CUDA_ARCH)}

    def save(self, path: str | os.PathLike, *, sign: Any = None) -> Path:
        """Write the ``.mxc`` artifact to *path* (atomically); returns the path.

        *sign* (default: the ``sign=`` given to :func:`compile`): an Ed25519
        private key (PEM file, bytes or key object) to sign the manifest with,
        so ``mxc.runtime.load(path, verify_key=PUBLIC)`` can authenticate it.
        """
        from ...runtime.artifact import write_artifact
        write_artifact(path, self.manifest, self.runtime_graph, self.params,
                       self.library_bytes(), sign=sign if sign is not None else self.sign)
        return Path(path)

    def session(self):
        """A :class:`mxc.runtime.Session` running this model in memory (cached)."""
        if self._session is None:
            from ...runtime.artifact import check_target_runnable
            from ...runtime.session import session_from_parts
            check_target_runnable(self.manifest["target"], "compiled model")
            self._session = session_from_parts(self.runtime_graph, self.manifest, self.params,
                                               self.library_bytes(), source="<compiled model>")
        return self._session

    def run(self, feeds: Mapping[str, Any], **kwargs):
        """``self.session().run(feeds, **kwargs)``."""
        return self.session().run(feeds, **kwargs)

    def summary(self) -> str:
        m = self.manifest
        lines = [f"target: {m['target']['string']}"]
        for r in m["regions"]:
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(r["ops"].items()))
            lines.append(f"region {r['name']} -> {r['function']}: {r['num_nodes']} nodes ({ops})")
        for h in m["host_nodes"]:
            lines.append(f"host node {h['name']} ({h['op']}): {h['reason']}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# compile
# ---------------------------------------------------------------------------
def compile(sym: Any, params: Any = None, shapes: Mapping[str, Any] | None = None,  # noqa: A001
            dtypes: Mapping[str, Any] | None = None, target: Any = "llvm",
            passes: str | None = None, bind_params: bool = True, *,
            progress: bool | Progress = False, name: str | None = None,
            db: str | os.PathLike | None = None, weights_as_inputs: bool = False,
            params_source: str | None = None, winograd: str | None = None,
            sign: Any = None) -> CompiledModel:
    """Compile a model ahead of time with TVM.

    Parameters
    ----------
    sym:
        A :class:`~mxc.compiler.symbol.Symbol` (or a :class:`~mxc.compiler.ir.Graph`).
    params:
        Parameter arrays: one dict (``{"fc1_weight": ...}``; MXNet's
        ``arg:``/``aux:`` key prefixes are accepted) or an
        ``(arg_params, aux_params)`` pair as :func:`mxc.load_checkpoint` returns.
    shapes:
        Shapes of the data inputs, ``{"data": (1, 3, 224, 224)}``.
    dtypes:
        Dtypes of data inputs that are not float32, ``{"ids": "int32"}``.
    target:
        ``"llvm"`` (default: this CPU, its features detected), ``"cuda"``
        (dlight default GPU schedules; compiles without a GPU given nvcc), a
        TVM target dict/string or ``tvm.target.Target``.
    passes:
        A pass pipeline (``"remove-dropout,fold-batchnorm,dce"``); None runs
        :func:`default_pipeline`, ``""`` none.
    bind_params:
        True: parameters become constants of the compiled code (TVM folds and
        pre-transforms them).  False: they are stored in the artifact and fed
        at run time.
    progress:
        Show a progress line on stderr (or pass a :class:`Progress`).
    name:
        A model name for the manifest.
    db:
        A tuning database directory (``mxc tune --db DIR``,
        :func:`mxc.backends.tvm.tune.tune`): every kernel it holds a tuned
        schedule for uses it, the others get mxc's default schedules.  Default:
        the :func:`~mxc.backends.tvm.build.use_database` block's, else
        ``$MXC_TUNING_DB``, else none.  A path that is not a tuning database is
        a :class:`~mxc.errors.BackendError` (raised before anything is
        compiled).  The manifest's ``tuning_db`` records the database and the
        kernels taken from it.
    weights_as_inputs:
        False (default): every model input that is not data (given a shape or
        dtype, or named ``*label``) must have an array in *params*, else
        :class:`~mxc.compiler.weights.MissingParamsError` (no params, another
        model's, a missing key) -- before anything is compiled.  True: the
        missing weights become run-time inputs (the manifest lists them).
    params_source:
        where *params* came from (a file name), for that message.
    winograd:
        CPU 3x3 convolutions: ``"auto"`` (default; Winograd where the output
        side is >= 8: faster; the artifact stores the weights as given, the
        runtime transforms them once when it loads the model, 1.8-4x their
        size in memory), ``"on"`` (every 3x3 stride-1 convolution it applies
        to), ``"off"`` (direct convolutions).  None: ``$MXC_WINOGRAD`` if set, else auto.  The
        manifest's ``winograd`` records the choice and the weight sizes.
    sign:
        An Ed25519 private key (PEM file path, bytes or key object; ``mxc
        keygen``) that :meth:`CompiledModel.save` signs the artifact's manifest
        with.  Read (and checked) now, before anything is compiled.

    Returns a :class:`CompiledModel`.  Raises :class:`~mxc.errors.BackendError`
    (and the pass/partition errors of the stages).
    """
    if db is not None:  # a wrong path fails now, not after the passes and lowering
        from .tune import check_database
        db = check_database(db)
    if sign is not None:  # so does an unreadable key
        from ...runtime.signing import load_private_key
        sign = load_private_key(sign)
    prog = progress if isinstance(progress, Progress) else Progress(bool(progress))
    try:
        model = _compile(sym, params, shapes, dtypes, target, passes, bind_params, prog, name,
                         db, weights_as_inputs, params_source, winograd)
    finally:
        prog.close()
    model.sign = sign
    return model


#: what the missing-weights error suggests (API and command line)
params_hint = ("Give the model's parameters (--params FILE, params=), or ask for the weights "
               "as run-time inputs (--weights-as-inputs, weights_as_inputs=True).")


def _compile(sym, params, shapes, dtypes, target, passes, bind_params, prog: Progress,
             name, db=None, weights_as_inputs=False, params_source=None,
             winograd=None) -> CompiledModel:
    from ...compiler.partition import optimize_graph
    from . import property as _prop  # registers the "tvm" backend

    graph = _graph_of(sym)
    output_names = graph.list_outputs()
    params = _params_of(params)
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
    check_params(graph.list_inputs(), params, set(shapes) | set(dtypes), source=params_source,
                 weights_as_inputs=weights_as_inputs, hint=params_hint)
    fed_weights = [n for n in graph.list_inputs() if n not in params and n not in shapes
                   and n not in dtypes and not is_data_name(n)]   # --weights-as-inputs
    timings: dict[str, float] = {}

    # 1. passes
    pipeline = default_pipeline() if passes is None else str(passes)
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
    _check_inputs(graph, params, infer_shapes(graph, given_shapes),
                  infer_types(graph, given_dtypes))   # before partitioning needs them
    pg = optimize_graph(graph, _prop.BACKEND, shapes=given_shapes, dtypes=given_dtypes,
                        clear=False)
    pshapes = infer_shapes(pg, given_shapes)
    pdtypes = infer_types(pg, given_dtypes)
    _check_inputs(pg, params, pshapes, pdtypes)
    regions = [n for n in pg.topo_order() if _prop.is_tvm_region(n)]
    host = [n for n in pg.topo_order() if n.op is not None and not _prop.is_tvm_region(n)]
    host_reasons = _host_reasons(host, pshapes, pdtypes)
    timings["partition"] = prog.done(f"{len(regions)} region(s), {len(host)} host node(s)")
    for n, why in host_reasons.items():
        log.info("host node %s: %s", n, why)

    # 3. lower every region into one module
    from .targets import resolve_target
    tgt = resolve_target(target)
    prog.start("lower to Relax")
    functions = _lower_regions(regions, params, pshapes, pdtypes, bind_params, prog, host)
    n_bodies = sum(f is not None for b in functions["__bodies__"].values() for f in b)
    timings["lower"] = prog.done(f"{len(regions)} function(s)"
                                 + (f", {n_bodies} control-flow bod(ies)" if n_bodies else ""))

    # 4. build
    prog.start(f"build for {tgt.kind.name}")
    executable = None
    tuning = None
    from . import load_time as _load_time
    lifted: dict = {}   # region function -> its load-time weight transforms
    if functions["__module__"] is not None:
        from .build import _default_db
        db = db if db is not None else _default_db()
        tuning = _TunedKernels(db) if db is not None else None
        if db is not None:
            from .tune import foreign_records_message
            tuning.foreign = foreign_records_message(db, tgt)
            if tuning.foreign:
                log.warning("%s", tuning.foreign)
        from .schedules import winograd as _winograd
        with _winograd.choose(winograd) as wino, \
                _load_time.lifting(functions[n.name][0].name for n in regions) as lifted:
            executable = _build(functions["__module__"], tgt, prog, db, tuning)
    summary = "one library" if executable is not None else "nothing to compile"
    if tuning is not None:
        summary += (f", {len(tuning.tuned)} of {tuning.kernels} kernel(s) from the tuning "
                    f"database")
    timings["build"] = prog.done(summary)

    # 5. the runtime graph and manifest
    prog.start("runtime graph")
    rt_graph, rt_params = _runtime_graph(pg, regions, functions, params, pshapes, pdtypes,
                                         output_names, host_reasons)
    rt_graph, rt_params = _load_time.add_load_steps(rt_graph, rt_params, lifted)
    manifest = _manifest(rt_graph, regions, functions, host_reasons, tgt, pipeline,
                         bind_params, name, pshapes, pg, tuning)
    if regions and tgt.kind.name == "llvm":
        manifest["winograd"] = _winograd.manifest_record(wino, lifted)
    manifest["weights_as_inputs"] = fed_weights
    timings["runtime graph"] = prog.done(f"{len(rt_graph['steps'])} step(s)")
    return CompiledModel(pg, rt_graph, manifest, rt_params, executable, host_reasons, timings)


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
    inferred = infer_types(graph, given_dtypes)
    for node in graph.input_nodes():  # MXNet binds float32 where nothing says otherwise
        if inferred.get((id(node), 0)) is None and "__dtype__" not in node.attrs:
            given_dtypes[node.name] = "float32"
    return given_shapes, given_dtypes


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)


def _check_inputs(pg: Graph, params, shapes, dtypes) -> None:
    bad = []
    for node in pg.input_nodes():
        key = (id(node), 0)
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
        out[node.name] = why or "not selected by the tvm partitioner"
    return out


def _lower_regions(regions, params, shapes, dtypes, bind_params, prog: Progress,
                   host=()) -> dict:
    """One Relax function per region in one module; returns ``{node name: info}``.

    The bodies of control-flow host nodes become functions of the same module
    (``functions["__bodies__"]``, see :mod:`.control_flow`)."""
    from .ops.control_flow import lower_bodies
    from .converter import ModuleBuilder
    mb = ModuleBuilder()
    functions: dict[str, Any] = {}
    for k, node in enumerate(regions):
        prog.note(f"region {k + 1}/{len(regions)}")
        nested = node.subgraphs[0]
        variables = nested.input_nodes()
        if len(variables) != len(node.inputs):
            raise BackendError(f"region {node.name!r}: {len(node.inputs)} inputs but its nested "
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
    functions["__bodies__"] = lower_bodies(mb, host, shapes, dtypes, params, bind_params)
    has_bodies = any(f is not None for b in functions["__bodies__"].values() for f in b)
    functions["__module__"] = mb.finalize() if regions or has_bodies else None
    return functions


def _build(mod, tgt, prog: Progress, db=None, tuning: "_TunedKernels | None" = None):
    from .build import build_module
    kwargs = {} if db is None else {"db": db}
    instruments = []
    if prog.tty:
        instruments.append(_pass_counter(prog))
    if tuning is not None:
        instruments.append(tuning.instrument())
    instruments = [i for i in instruments if i is not None]
    if not instruments:
        return build_module(mod, tgt, **kwargs)
    import tvm
    cur = tvm.transform.PassContext.current()
    ctx = tvm.transform.PassContext(opt_level=cur.opt_level, required_pass=cur.required_pass,
                                    disabled_pass=cur.disabled_pass, config=cur.config,
                                    instruments=list(cur.instruments) + instruments)
    with ctx:
        return build_module(mod, tgt, **kwargs)


#: the TVM pass that replaces kernels by their tuned schedules from a database
_APPLY_DATABASE = "MetaScheduleApplyDatabase"


class _TunedKernels:
    """Which kernels of a build came from the tuning database *path*.

    A pass instrument compares the module's kernels (TIR PrimFuncs) before and
    after ``MetaScheduleApplyDatabase``: the ones it replaced have a tuned
    schedule; the rest go on to the default schedules.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.kernels = 0              # kernels the database was asked about
        self.tuned: list[str] = []    # the ones it had a schedule for
        self.foreign: str | None = None  # records tuned for another CPU: the warning
        self._before: dict[str, Any] = {}

    def instrument(self):
        try:
            from tvm.ir.instrument import pass_instrument
        except ImportError:  # pragma: no cover
            return None
        owner = self

        @pass_instrument
        class _ApplyDatabaseWatch:
            def run_before_pass(self, mod, info):
                if info.name == _APPLY_DATABASE:
                    owner._before = _prim_funcs(mod)

            def run_after_pass(self, mod, info):
                if info.name == _APPLY_DATABASE:
                    after = _prim_funcs(mod)
                    # a rebuild (the vectorisation fallback) counts once: last one wins
                    owner.kernels = len(owner._before)
                    owner.tuned = sorted(k for k, f in owner._before.items()
                                         if k in after and not after[k].same_as(f))
                    owner._before = {}

        return _ApplyDatabaseWatch()

    def as_manifest(self) -> dict:
        return {"path": os.path.abspath(self.path), "kernels": self.kernels,
                "kernels_tuned": len(self.tuned), "tuned": list(self.tuned),
                "warning": self.foreign}


def _prim_funcs(mod) -> dict:
    import tvm
    prim = getattr(tvm, "tirx", None)
    prim_func = getattr(prim, "PrimFunc", None) or tvm.tir.PrimFunc
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, prim_func)}


def _pass_counter(prog: Progress):
    """A TVM pass instrument that shows the pass being run (terminal progress only)."""
    try:
        from tvm.ir.instrument import pass_instrument
    except ImportError:  # pragma: no cover
        return None

    @pass_instrument
    class _Count:
        def __init__(self):
            self.n = 0

        def run_before_pass(self, mod, info):
            self.n += 1
            prog.note(f"pass {self.n}: {info.name}")

    return _Count()


# ---------------------------------------------------------------------------
# the runtime graph
# ---------------------------------------------------------------------------
def _runtime_graph(pg: Graph, regions, functions, params, shapes, dtypes, output_names,
                   host_reasons) -> tuple[dict, dict]:
    from ...runtime.host import encode_graph
    from ...runtime.session import GRAPH_FORMAT, GRAPH_VERSION
    slots: dict[tuple[int, int], int] = {}

    def slot(key) -> int:
        s = slots.get(key)
        if s is None:
            s = slots[key] = len(slots)
        return s

    order = pg.topo_order()
    region_ids = {id(n) for n in regions}
    # which variable entries are read, and how
    needed_inputs: set[str] = set()      # data inputs some step really reads
    optional_inputs: set[str] = set()    # read only in slots inference ignores
    used_params: set[str] = set()
    steps = []
    for node in order:
        if node.op is None:
            continue
        if id(node) in region_ids:
            info, entries = functions[node.name]
            ins = []
            for e in entries:
                _note_var(e, params, needed_inputs, used_params)
                ins.append(slot(e.key))
            heads = len(node.subgraphs[0].outputs)
            steps.append({"kind": "region", "name": node.name, "function": info.name,
                          "inputs": ins, "outputs": [(id(node), i) for i in range(heads)],
                          "num_nodes": len(node.subgraphs[0].op_nodes()),
                          "ops": node.subgraphs[0].op_counts()})
        else:
            unused = set(node.opdef.unused_inputs(node.params))
            ins = []
            for i, e in enumerate(node.inputs):
                if e.node.op is None and e.node.name not in params and i in unused:
                    optional_inputs.add(e.node.name)
                else:
                    _note_var(e, params, needed_inputs, used_params)
                ins.append(slot(e.key))
            step = _host_step(node, ins, shapes, dtypes, host_reasons, encode_graph)
            bodies = functions["__bodies__"].get(node.name)
            if bodies and any(b is not None for b in bodies):
                step["bodies"] = bodies
            steps.append(step)
    # outputs: slot numbers for the entries something reads
    graph_outputs = []
    for e, name in zip(pg.outputs, output_names):
        _note_var(e, params, needed_inputs, used_params)
        graph_outputs.append({"name": name, "slot": slot(e.key),
                              "shape": _jshape(shapes[e.key]), "dtype": dtypes[e.key]})
    for step in steps:
        step["outputs"] = [slots.get(k, -1) for k in step["outputs"]]
    optional_inputs -= needed_inputs
    inputs, ignored = [], []
    for var in pg.input_nodes():
        key = (id(var), 0)
        if var.name in params:
            continue
        if var.name in needed_inputs or var.name in optional_inputs:
            inputs.append({"name": var.name, "slot": slot(key), "shape": list(shapes[key]),
                           "dtype": dtypes[key], "optional": var.name in optional_inputs})
        else:
            ignored.append(var.name)  # read by nothing (a label inference ignores)
    rt_params = {}
    param_specs = []
    for var in pg.input_nodes():
        if var.name in used_params:
            rt_params[var.name] = np.ascontiguousarray(
                np.asarray(params[var.name]).astype(dtypes[(id(var), 0)], copy=False))
            param_specs.append({"name": var.name, "slot": slot((id(var), 0))})
    graph = {"format": GRAPH_FORMAT, "version": GRAPH_VERSION, "num_slots": len(slots),
             "inputs": inputs, "ignored_inputs": ignored, "params": param_specs,
             "steps": steps, "outputs": graph_outputs}
    return graph, rt_params


def _note_var(e, params, needed_inputs: set, used_params: set) -> None:
    if e.node.op is not None:
        return
    (used_params if e.node.name in params else needed_inputs).add(e.node.name)


def _host_step(node: Node, ins, shapes, dtypes, host_reasons, encode_graph) -> dict:
    nout = node.num_outputs()
    keys = [(id(node), i) for i in range(nout)]
    step = {"kind": "host", "name": node.name, "op": node.op, "attrs": dict(node.attrs),
            "params": _encode_params(node), "inputs": ins, "outputs": keys,
            "in_shapes": [_jshape(shapes.get(e.key)) for e in node.inputs],
            "in_dtypes": [dtypes.get(e.key) for e in node.inputs],
            "out_shapes": [_jshape(shapes.get(k)) for k in keys],
            "out_dtypes": [dtypes.get(k) for k in keys],
            "reason": host_reasons.get(node.name, "")}
    if node.subgraphs:
        step["subgraphs"] = [encode_graph(g) for g in node.subgraphs]
    return step


def _jshape(shape):
    return None if shape is None else [None if d is None else int(d) for d in shape]


def _encode_params(node: Node) -> dict | None:
    """The node's parsed parameters as JSON, or None (parsed again at load) if not plain."""
    from ...compiler.ops.registry import Params
    from ...runtime.host import encode_value
    try:
        p = node.params
        if type(p) is not Params or node.opdef.is_subgraph_op:
            return None
        return {k: encode_value(v) for k, v in p.items()}
    except (TypeError, MxcError):
        return None


def _target_info(tgt) -> dict:
    from tvm.target import codegen
    kind = tgt.kind.name
    info: dict[str, Any] = {"kind": kind, "string": str(tgt),
                            "device": "cuda" if kind == "cuda" else "cpu"}
    host = tgt if kind == "llvm" else tgt.host
    if kind == "cuda":
        info["arch"] = str(tgt.attrs.get("arch", ""))
    if host is not None and host.kind.name == "llvm":
        triple = str(host.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
        try:
            features = sorted(str(f) for f in codegen.llvm_get_cpu_features(host))
        except Exception:  # noqa: BLE001 - an LLVM without the query
            features = []
        info["host"] = {"cpu": str(host.attrs.get("mcpu", "") or "generic"), "triple": triple,
                        "arch": _arch_of(triple), "features": features}
    return info


def _arch_of(triple: str) -> str:
    arch = triple.split("-", 1)[0].lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def _libraries(ops) -> list[dict]:
    from ...runtime.libraries import manifest_entries
    return manifest_entries(ops)


def _manifest(rt_graph, regions, functions, host_reasons, tgt, pipeline, bind_params, name,
              shapes, pg, tuning: _TunedKernels | None = None) -> dict:
    import tvm
    from ... import __version__
    by_name = {s["name"]: s for s in rt_graph["steps"]}
    return {
        "name": name,
        "mxc_version": __version__,
        "tvm_version": str(tvm.__version__),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "target": _target_info(tgt),
        "pipeline": pipeline,
        "bind_params": bool(bind_params),
        "inputs": [{k: i[k] for k in ("name", "shape", "dtype", "optional")}
                   for i in rt_graph["inputs"]],
        # a None extent: the output's shape depends on the input values (boolean_mask)
        "outputs": [{**{k: o[k] for k in ("name", "shape", "dtype")},
                     "data_dependent_shape": None in o["shape"]} for o in rt_graph["outputs"]],
        "regions": [{"name": n.name, "function": functions[n.name][0].name,
                     "num_nodes": by_name[n.name]["num_nodes"], "ops": by_name[n.name]["ops"],
                     "num_inputs": len(by_name[n.name]["inputs"]),
                     "num_outputs": len(by_name[n.name]["outputs"])} for n in regions],
        "host_nodes": [{"name": s["name"], "op": s["op"], "reason": s["reason"],
                        **({"compiled_bodies": [b and b["function"] for b in s["bodies"]]}
                           if s.get("bodies") else {})}
                       for s in rt_graph["steps"] if s["kind"] == "host"],
        "num_params_stored": len(rt_graph["params"]),
        "libraries": _libraries(s["op"] for s in rt_graph["steps"] if s["kind"] == "host"),
        # None: default schedules only; else the database and the kernels taken from it
        "tuning_db": tuning.as_manifest() if tuning is not None else None,
    }
