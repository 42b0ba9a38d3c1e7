"""Compile a model ahead of time: passes, partition for ``tvm``, lower, build.

:func:`compile` (``mxc.compile``) runs the whole pipeline and returns a
:class:`CompiledModel`; ``model.save("model.mxc")`` writes the deployable
artifact (:mod:`mxc.runtime.artifact`), ``model.session()`` runs it in
memory through the same runtime.  Each stage has its own module:

1. **passes**, 2. **partition**, 3. **lower** -- :func:`~.lower.lower_model`
   (:mod:`.lower`): the graph passes (default :data:`DEFAULT_PASSES`), the
   ``tvm`` subgraph property grouping supported nodes into regions
   (:mod:`.property`), and one Relax ``IRModule`` with a function per region
   (``mxc tune`` starts from the same stage);
4. **build** -- :func:`~.build_stage.build_lowered`: one ``tvm.compile`` for
   the target, with the tuned kernels of a database (``db=``);
5. **runtime graph** -- :func:`~.runtime_plan.plan_model`: the typed
   :class:`~mxc.runtime.plan.Plan` the runtime executes, and the manifest
   (:mod:`.manifest`).

Settings travel as one :class:`~.options.CompileOptions` (built from the
keywords and the environment by :func:`compile`); progress is reported to a
:class:`~.compile_progress.CompileProgress` the caller chooses.  This module
imports TVM only when :func:`compile` runs, so ``mxc.compile`` costs nothing
until it is called.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...compiler.ir import Graph
from ...errors import BackendError
# the stderr display, importable from here as before (mxc.compile(progress=Progress(...)))
from ...progress import StageProgress as Progress  # noqa: F401
from ...runtime.plan import Plan
from .compile_progress import CompileProgress, ProgressArg, as_progress
from .lower import DEFAULT_PASSES, default_pipeline, lower_model, params_hint  # noqa: F401
from .manifest import ManifestTensors
from .options import CompileOptions

log = logging.getLogger(__name__)

__all__ = ["compile", "CompiledModel", "CompileOptions", "DEFAULT_PASSES", "default_pipeline",
           "Progress", "lower_model"]


# ---------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------
@dataclass
class CompiledModel(ManifestTensors):
    """A compiled model: save it as an artifact or run it in memory.

    Attributes
    ----------
    graph:
        The partitioned graph (``_tvm_subgraph`` region nodes and host nodes).
    plan:
        The :class:`~mxc.runtime.plan.Plan` the runtime executes (the artifact's
        ``graph.json``; :attr:`runtime_graph` is its JSON).
    manifest:
        Target, inputs/outputs, regions, host nodes, versions (``manifest.json``).
    params:
        Parameters the runtime needs that are not compiled into the library.
    executable:
        The Relax VM executable (``tvm.relax.VMExecutable``), None without regions.
    host_nodes:
        ``{node label: why it runs on the host}`` (the name, with the node's index
        where nodes share it).
    timings:
        Seconds per compile stage.
    """

    graph: Graph
    plan: Plan
    manifest: dict
    params: dict[str, np.ndarray]
    executable: Any
    host_nodes: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _library: bytes | None = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)
    sign: Any = field(default=None, repr=False)
    #: the compiler that links the library (:func:`.toolchain.linker_for`; None: TVM's)
    linker: str | None = field(default=None, repr=False)

    @property
    def runtime_graph(self) -> dict:
        """The plan as the artifact's ``graph.json`` object."""
        return self.plan.to_json()

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
            from ...atomic_files import clean_stale  # what a killed export left behind
            clean_stale(tempfile.gettempdir(), "mxc-export-*")
            tmp = tempfile.mkdtemp(prefix=f"mxc-export-{os.getpid()}-")
            try:
                path = os.path.join(tmp, "lib.so")
                try:
                    self.executable.export_library(path, **self._export_options())
                except BackendError:
                    raise
                except Exception as exc:  # noqa: BLE001 - TVM / C compiler errors
                    if "Compilation error" in str(exc):   # the linker's, in one line
                        from .toolchain import link_error
                        raise link_error(exc, self._triple(), self.linker) from exc
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
        options: dict[str, Any] = {"options": ["-Wl,-S"]}
        if self.linker:
            options["cc"] = self.linker
        target = self.manifest["target"]
        if target.get("kind") != "cuda":
            return options
        from .cuda_binary import pack_imports
        from .targets import DEFAULT_CUDA_ARCH
        return {**options,
                "fpack_imports": pack_imports(target.get("arch") or DEFAULT_CUDA_ARCH)}

    def _triple(self) -> str | None:
        return (self.manifest["target"].get("host") or {}).get("triple")

    def save(self, path: str | os.PathLike, *, sign: Any = None) -> Path:
        """Write the ``.mxc`` artifact to *path* (atomically); returns the path.

        *sign* (default: the ``sign=`` given to :func:`compile`): an Ed25519
        private key (PEM file, bytes or key object) to sign the manifest with,
        so ``mxc.runtime.load(path, verify_key=PUBLIC)`` can authenticate it.
        """
        from ...runtime.artifact import write_artifact
        write_artifact(path, self.manifest, self.plan, self.params,
                       self.library_bytes(), sign=sign if sign is not None else self.sign)
        return Path(path)

    def session(self):
        """A :class:`mxc.runtime.Session` running this model in memory (cached)."""
        if self._session is None:
            from ...runtime.artifact import check_target_runnable
            from ...runtime.session import session_from_parts
            check_target_runnable(self.manifest["target"], "compiled model")
            self._session = session_from_parts(self.plan, self.manifest, self.params,
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
            progress: ProgressArg = False, name: str | None = None,
            db: str | os.PathLike | None = None, weights_as_inputs: bool = False,
            params_source: str | None = None, winograd: str | None = None,
            sign: Any = None, precision: str = "fp32",
            check_inputs: Mapping[str, Any] | None = None,
            buckets: Sequence[int] | None = None) -> CompiledModel:
    """Compile a model ahead of time with TVM.

    Parameters
    ----------
    sym:
        A :class:`~mxc.symbol.Symbol` (or a :class:`~mxc.compiler.ir.Graph`).
    params:
        Parameter arrays: one dict (``{"fc1_weight": ...}``; MXNet's
        ``arg:``/``aux:`` key prefixes are accepted) or an
        ``(arg_params, aux_params)`` pair as :func:`mxc.load_checkpoint` returns.
    shapes:
        Shapes of the data inputs, ``{"data": (1, 3, 224, 224)}``.  One dimension
        may be a batch range, ``{"data": ((1, 64), 3, 224, 224)}`` (or
        ``"1..64"``): the model is compiled once per batch bucket into one
        artifact (:mod:`.buckets`; returns a :class:`~.bucket_model.BucketedModel`).
    dtypes:
        Dtypes of data inputs that are not float32, ``{"ids": "int32"}``.
    target:
        ``"llvm"`` (default: this CPU, its features detected), ``"cuda"``
        (dlight default GPU schedules; compiles without a GPU given nvcc; the
        architecture: the target's ``arch``, else ``$MXC_CUDA_ARCH``, else the
        GPU present, else sm_75), a TVM target dict/string or ``tvm.target.Target``.
    passes:
        A pass pipeline (``"remove-dropout,fold-batchnorm,dce"``); None runs
        :func:`default_pipeline`, ``""`` none.
    bind_params:
        True: parameters become constants of the compiled code (TVM folds and
        pre-transforms them).  False: they are stored in the artifact and fed
        at run time.
    progress:
        True: show a progress line on stderr; or a
        :class:`~.compile_progress.CompileProgress` (e.g. :class:`Progress`) to
        report to, or a callback ``fn(stage, summary, seconds)`` called as each
        stage finishes.
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
        CPU 3x3 convolutions: ``"auto"`` (default; Winograd where the sides
        are >= 7: faster, transformed weights 1.8-4x the size), ``"on"``
        (every 3x3 stride-1 convolution it applies to), ``"off"`` (direct:
        smallest artifact).  None: ``$MXC_WINOGRAD`` if set, else auto.  The
        manifest's ``winograd`` records the choice and the weight sizes.
    sign:
        An Ed25519 private key (PEM file path, bytes or key object; ``mxc
        keygen``) that :meth:`CompiledModel.save` signs the artifact's manifest
        with.  Read (and checked) now, before anything is compiled.
    precision:
        ``"fp32"`` (default); ``"bf16"``: convolutions and dense layers in
        bfloat16 with float32 accumulation (weights stored as bfloat16), on
        CPUs with AVX512-BF16 (a :class:`~mxc.errors.BackendError` elsewhere);
        ``"auto"``: bf16 only where its outputs on *check_inputs* (default:
        standard-normal example inputs) are within the bf16 tolerance of the
        float32 build's (:mod:`.precision`).  The manifest's ``precision``
        records the choice.
    check_inputs:
        the feeds ``precision="auto"`` checks on.
    buckets:
        the batch sizes a range is compiled for (default: the powers of two in
        the range and its top, ``1..64`` -> 1, 2, 4, ..., 64).

    The environment variables that supplied a default are recorded in the
    manifest's ``environment``.  Returns a :class:`CompiledModel`.  Raises
    :class:`~mxc.errors.BackendError` (and the pass/partition errors of the stages).
    """
    options = CompileOptions.from_env(   # db: given, else a use_database() block, else env
        target=target, passes=passes, bind_params=bind_params, name=name, db=db,
        weights_as_inputs=weights_as_inputs, params_source=params_source, winograd=winograd,
        precision=precision)
    return compile_with(sym, params, shapes, dtypes, options, progress=progress, sign=sign,
                        check_inputs=check_inputs, buckets=buckets)


def compile_with(sym: Any, params: Any = None, shapes: Mapping[str, Any] | None = None,
                 dtypes: Mapping[str, Any] | None = None,
                 options: CompileOptions | None = None, *,
                 progress: ProgressArg = False, sign: Any = None,
                 check_inputs: Mapping[str, Any] | None = None,
                 buckets: Sequence[int] | None = None) -> CompiledModel:
    """:func:`compile` with its settings as one :class:`~.options.CompileOptions`
    (default: all defaults; nothing is read from the environment here)."""
    from .buckets import compile_buckets, find_range
    rng = find_range(shapes)
    if rng is None and buckets is not None:
        raise BackendError("batch buckets need a dimension range in the shapes "
                           "(--shape data=1..64,...)")
    options = options if options is not None else CompileOptions()
    if options.db is None:   # options made directly: a use_database() block, looked up once
        from .options import resolve_database
        options = options.with_(db=resolve_database(None))
    if options.db is not None:  # a wrong path fails now, not after the passes and lowering
        from .tune.database import check_database
        options = options.with_(db=check_database(options.db))
    if sign is not None:  # so does an unreadable key
        from ...runtime.signing import load_private_key
        sign = load_private_key(sign)
    if rng is not None:   # one compile per batch bucket, into one artifact
        model = compile_buckets(sym, params, shapes, dtypes, rng, buckets,
                                lambda bucket_shapes: compile_with(
                                    sym, params, bucket_shapes, dtypes, options,
                                    progress=progress, check_inputs=check_inputs))
        model.sign = sign
        return model
    if options.target not in (None, "llvm", "cpu", "host", "cuda", "gpu"):
        _linker(options)   # another architecture without its cross linker fails now
    if options.precision == "bf16":   # a CPU without bf16 fails now, before the passes;
        from .precision import check_request   # the one check of the precision's target
        from .targets import resolve_target
        check_request(options.precision,
                      resolve_target(options.target, cuda_arch=options.cuda_arch))
    if options.precision == "auto":
        from .precision import compile_auto
        model = compile_auto(lambda opts: compile_with(sym, params, shapes, dtypes, opts,
                                                       progress=progress),
                             options, check_inputs)
        model.sign = sign
        return model
    prog = as_progress(progress)
    try:
        model = _compile(sym, params, shapes, dtypes, options, prog)
    finally:
        prog.close()
    model.sign = sign
    return model


def _compile(sym, params, shapes, dtypes, options: CompileOptions,
             prog: CompileProgress) -> CompiledModel:
    from .build_stage import build_lowered
    from .load_time import add_load_steps
    from .manifest import build_manifest
    from .runtime_plan import plan_model

    lowered = lower_model(sym, params, shapes, dtypes, options, prog)
    executable, record = build_lowered(lowered, options, prog)
    prog.start("runtime graph")
    plan, rt_params = plan_model(lowered)
    plan, rt_params = add_load_steps(plan, rt_params, record.lifted)
    manifest = build_manifest(plan, lowered, options, record)
    lowered.timings["runtime graph"] = prog.done(f"{len(plan.steps)} step(s)")
    return CompiledModel(lowered.graph, plan, manifest, rt_params, executable,
                         lowered.host_reasons, lowered.timings, linker=_linker(options))


def _linker(options: CompileOptions) -> str | None:
    """The compiler that links the library for the options' target (:mod:`.toolchain`)."""
    from .targets import resolve_target
    from .toolchain import linker_for, target_triple
    return linker_for(target_triple(resolve_target(options.target, cuda_arch=options.cuda_arch)),
                      options.cxx)
