"""Run a compiled graph: :class:`Session` (and :func:`load` for ``.mxc`` files).

A session executes the *runtime graph* of an artifact: a list of steps over
numbered value slots.  A step is either a compiled region (one function of
the library, run by TVM's Relax VM) or a host node (a reference kernel).
Everything that does not depend on the inputs is done once, at load time:
the step list is turned into an execution plan, parameters are put on the
device, slot lifetimes are computed.  A call then only checks the feeds (once:
feeds :meth:`Session.check_feeds` returned are not checked again, see
:mod:`mxc.runtime.feeds`), moves them to the device, calls the VM functions
and copies the outputs out.

``run`` is thread-safe.  On the CPU, compiled code never runs on the caller's
thread: calls are handed to the process's few long-lived executor threads
(:mod:`mxc.runtime.executors`), which bounds TVM's per-thread pools and the
cores in use whatever the number of calling threads, and keeps a forked child
working.  Each executor gets its own VM (and staging buffers) on its first
call, so calls run concurrently as far as the process's cores allow.  Outputs
are always fresh numpy arrays owned by the caller.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import time
from concurrent.futures import Future
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ArtifactError, ExecutionError, MxcError
from . import _tvm
from . import threads as _threads
from .executors import EXECUTORS, submit_elsewhere
from .feeds import CheckedFeeds, Declared, FeedSignature, InputSpec
from .info import (ORT_ELEMENT_TYPES, Profile, SessionSpellings, StepTime,  # noqa: F401
                   TensorInfo)
from .instruments import SessionInstruments, ThreadState
from .plan import GRAPH_FORMAT, GRAPH_VERSION, LoadStep, Plan, RegionStep  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

_REGION, _HOST = 0, 1
_from_dlpack = None  # tvm_ffi.from_dlpack, bound when the first session is made
# how a region argument is obtained
_ARG_CONST, _ARG_VALUE = 0, 1


def _positions(n: int) -> str:
    """How outputs are named by position: ``out0``, ``out0, out1``, ``out0..out9``."""
    return ", ".join(f"out{i}" for i in range(n)) if n <= 2 else f"out0..out{n - 1}"


class Session(SessionSpellings, SessionInstruments):
    """A loaded model, ready to run (normally from :func:`mxc.runtime.load`).

    Parameters
    ----------
    graph, manifest, params:
        The artifact's runtime plan (a :class:`~mxc.runtime.plan.Plan`, or its
        ``graph.json`` object, validated here), manifest and stored parameters.
    module:
        The loaded library (a TVM runtime module), or None when the graph
        has no compiled region.
    threads:
        CPU threads compiled regions use; None (default) uses every core
        this process may run on (see :mod:`mxc.runtime.threads`).
    """

    def __init__(self, graph: Plan | Mapping, manifest: Mapping,
                 params: Mapping[str, np.ndarray], module: Any = None, *,
                 source: str = "<memory>", threads: int | None = None):
        self.manifest = dict(manifest)
        self.source = source
        if not isinstance(graph, Plan):
            graph = Plan.from_json(graph, source)
        self._graph = graph
        self._module = module
        target = self.manifest.get("target") or {}
        self._kind = "cuda" if target.get("kind") == "cuda" else "cpu"
        self._cpu = self._kind == "cpu"
        self._threads = _threads.check_threads(threads) if self._cpu else None
        self._tls = threading.local()
        self._lock = threading.Lock()
        # compiled code: regions, and control-flow bodies called from host steps
        self._has_regions = bool(graph.functions())
        if self._has_regions:
            if module is None:
                raise ArtifactError(f"{source}: the graph has compiled regions but the artifact "
                                    f"has no library")
            self._dev = _tvm.device(self._kind, 0)
        else:
            self._dev = None
        global _from_dlpack
        if _from_dlpack is None and self._has_regions:
            _from_dlpack = _tvm.ffi().from_dlpack
        # CPU compiled code runs on the process's executors (see executors.py)
        self._on_executor = self._has_regions and self._threads is not None
        self._build_plan(graph, params)
        if self._has_regions:  # create a VM now: errors surface at load time
            from .signatures import check_session_functions
            vm = self._call(self._state).vm
            check_session_functions(graph, module, vm, source, params)

    # ------------------------------------------------------------------------------
    # metadata
    # ------------------------------------------------------------------------------
    @property
    def inputs(self) -> list[TensorInfo]:
        """The inputs a call must feed (labels inference ignores are not listed)."""
        return list(self._inputs)

    @property
    def outputs(self) -> list[TensorInfo]:
        """The outputs :meth:`run` returns, in order."""
        return list(self._outputs)

    @property
    def device(self) -> str:
        return self._kind

    @property
    def threads(self) -> int | None:
        """CPU threads the compiled regions run on (None for a GPU model)."""
        return self._threads

    @property
    def regions(self) -> list[str]:
        """Names of the compiled regions, in execution order."""
        return [s.name for s in self._graph.regions]

    @property
    def host_nodes(self) -> list[str]:
        """Names of the nodes run by reference kernels on the host."""
        return [s.name for s in self._graph.host_steps]

    @property
    def input_names(self) -> frozenset[str]:
        """Every name :meth:`run` accepts in its feeds: the inputs, and the optional or
        ignored ones (labels) that :attr:`inputs` does not list."""
        return self._signature.names

    @property
    def feed_signature(self) -> FeedSignature:
        """What :meth:`check_feeds` checks feeds against (:mod:`mxc.runtime.feeds`)."""
        return self._signature

    def check_feeds(self, feeds: Mapping[str, Any]) -> CheckedFeeds:
        """*feeds* checked against the inputs (names, dtypes, shapes), array-likes
        converted: :class:`~mxc.runtime.feeds.CheckedFeeds`, which :meth:`run` and
        :meth:`submit` take without checking them again.  Values may be
        :class:`~mxc.runtime.feeds.Declared` (a dtype and shape, the values read
        later: ``checked.fill(values)``).  Raises :class:`~mxc.runtime.feeds.FeedError`
        (an :class:`~mxc.errors.ExecutionError`) naming the input."""
        return self._signature.check(feeds)

    def __reduce__(self):
        """A session pickles as its artifact's path and load options; the receiving
        process loads (and, when a key was given, verifies) the file again."""
        origin = getattr(self, "_origin", None)
        if origin is None:
            raise ArtifactError(f"{self.source}: a session not loaded from an artifact file "
                                f"cannot be pickled; save the model (model.save(PATH)) and "
                                f"pickle mxc.runtime.load(PATH)")
        path, libraries, key, threads = origin
        if key is not None:
            from .signing import public_key_bytes
            key = public_key_bytes(key)  # key objects do not pickle; raw bytes do
        return _reload, (path, libraries, key, threads)

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in self._inputs)
        return (f"<mxc.runtime.Session {self.source} target={self.target!r} inputs=({ins}) "
                f"regions={len(self.regions)} host_nodes={len(self.host_nodes)}>")

    # ------------------------------------------------------------------------------
    # the plan
    # ------------------------------------------------------------------------------
    def _build_plan(self, g: Plan, params: Mapping[str, np.ndarray]) -> None:
        """Turn the plan's steps into the tuples :meth:`_run` executes:
        ``(kind, name, what, inputs, outputs, release)`` with the constants of
        compiled regions already on the device and, per step, the slots whose
        last reader it is (released after it: bounded memory on the host path)."""
        template: list = [None] * g.num_slots
        producer = [""] * g.num_slots
        dev_const: dict[int, Any] = {}

        self._inputs = []
        self._input_specs = []
        for spec in g.inputs:
            info = TensorInfo(spec.name, tuple(spec.shape), spec.dtype)
            if not spec.optional:
                self._inputs.append(info)
            self._input_specs.append((info.name, spec.slot, info.shape, np.dtype(info.dtype)))
            producer[spec.slot] = "input"
        self._signature = FeedSignature(
            [InputSpec(s.name, tuple(s.shape), np.dtype(s.dtype), s.optional) for s in g.inputs],
            g.ignored_inputs, device_tensor=self._device_tensor)
        for spec in g.params:
            if spec.name not in params:
                raise ArtifactError(f"{self.source}: parameter {spec.name!r} is missing from "
                                    f"the artifact")
            template[spec.slot] = np.ascontiguousarray(params[spec.name])
            producer[spec.slot] = "const"
        self._functions = g.functions()
        for s, value in self._run_load_steps(g, template).items():  # transformed once, now
            template[s] = dev_const[s] = value
            producer[s] = "const"

        last_use: dict[int, int] = {}
        calls = []   # (kind, name, what, inputs, outputs) per step
        for step in g.steps:
            if isinstance(step, LoadStep):
                continue
            for s in step.inputs:
                last_use[s] = len(calls)
            if isinstance(step, RegionStep):
                args = []
                for s in step.inputs:
                    if producer[s] == "const":
                        t = dev_const.get(s)
                        if t is None:  # on the device once (copied when not aligned)
                            t = dev_const[s] = _tvm.from_numpy(template[s], self._dev)
                        args.append((_ARG_CONST, t))
                    else:
                        args.append((_ARG_VALUE, s))
                calls.append((_REGION, step.name, step.function, args, step.outputs))
            else:
                from .host import HostKernel  # imports the op definitions (lazily)
                call = self._body_caller(step.name) if step.bodies else None
                calls.append((_HOST, step.name, HostKernel(step, call), step.inputs,
                              step.outputs))
            for s in step.outputs:
                if s >= 0:
                    producer[s] = step.kind
        self._outputs = [TensorInfo(o.name, tuple(o.shape), o.dtype) for o in g.outputs]
        self._output_slots = [o.slot for o in g.outputs]
        keep = set(self._output_slots)
        releases: list[tuple[int, ...]] = [()] * len(calls)
        for s, i in last_use.items():
            if s not in keep and producer[s] != "const":
                releases[i] += (s,)
        self._plan = [(*c, r or None) for c, r in zip(calls, releases)]
        self._template = template

    def _run_load_steps(self, g: Plan, template: list) -> dict:
        """Run the plan's load steps; drops from *template* the weights only they read."""
        if not g.load_steps:
            return {}
        from .load_steps import load_only_slots, run_load_steps

        def run_steps():
            st = self._state()
            return run_load_steps(g, lambda name: st.vm[name],
                                  lambda s: _tvm.from_numpy(template[s], self._dev), self.source)
        values = self._call(run_steps)
        for s in load_only_slots(g):
            template[s] = None
        return values

    def _body_caller(self, step: str):
        """``call(spec, arrays) -> arrays``: run a compiled control-flow body of *step*."""
        def call(spec, arrays):
            st = self._state()
            fname = spec.function
            args = [self._to_device(st, f"{step}/{fname}", i, np.asarray(v))
                    for i, v in enumerate(arrays)]
            try:
                result = st.fns[fname](*args)
            except Exception as exc:  # noqa: BLE001 - TVM errors
                raise ExecutionError(f"compiled body {fname!r} of {step!r} failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
            return [_tvm.to_numpy(result[i]) for i in range(len(result))]
        return call

    def _call(self, fn, *args):
        """``fn(*args)`` where this session's compiled code may run: an executor on the CPU."""
        if self._on_executor:
            return EXECUTORS.call(self._threads, fn, *args)
        return fn(*args)

    def _state(self) -> ThreadState:
        st = getattr(self._tls, "state", None)
        if st is None:
            vm = None
            fns: dict = {}
            if self._has_regions:
                try:
                    vm = _tvm.create_vm(self._module, self._kind, 0)
                    fns = {name: vm[name] for name in self._functions}
                except Exception as exc:  # noqa: BLE001 - TVM errors
                    raise ArtifactError(f"{self.source}: cannot start the Relax VM: "
                                        f"{type(exc).__name__}: {exc}") from None
            st = ThreadState(vm, fns)
            self._tls.state = st
        return st

    # ------------------------------------------------------------------------------
    # running
    # ------------------------------------------------------------------------------
    def run(self, feeds: Any, input_feed: Mapping[str, Any] | None = None, run_options=None,
            *, profile: bool = False):
        """Run the model on *feeds* (``{input name: array}``); returns the outputs.

        Values may be numpy arrays, anything ``np.asarray`` accepts, or
        DLPack tensors (``__dlpack__``; a GPU tensor is used in place by a
        CUDA model).  Dtypes and shapes must be the compiled ones; *feeds*
        returned by :meth:`check_feeds` are not checked again.  With
        ``profile=True`` returns ``(outputs, Profile)`` instead, with the time
        of every step (GPU steps synchronised).

        ONNX Runtime's form is accepted too: ``run(None, feeds)`` (every
        output) and ``run(["out0", "prob"], feeds)`` (the outputs named, by
        their name or their position ``outN``, in that order); *run_options*
        is accepted and ignored.
        """
        if input_feed is not None or feeds is None:
            wanted = self.output_indices(feeds)
            result = self.run(input_feed if input_feed is not None else {}, profile=profile)
            outs, prof = result if profile else (result, None)
            picked = [outs[i] for i in wanted]
            return (picked, prof) if profile else picked
        return self._call(self._run, feeds, profile)

    def submit(self, feeds: Mapping[str, Any]) -> Future:
        """Start ``run(feeds)`` and return at once: a :class:`concurrent.futures.Future`
        of the outputs (or of the call's exception).

        For asyncio servers (``await asyncio.wrap_future(sess.submit(feeds))``): the
        call goes straight to an executor, which completes the future, instead of
        parking a thread of the event loop's pool on :meth:`run`.
        """
        return self.submit_call(self.run, feeds)

    def submit_call(self, fn, *args) -> Future:
        """Start ``fn(*args)`` where this session's compiled code runs (its executor on
        the CPU, see :mod:`mxc.runtime.executors`); a Future of the result.

        For wrappers whose ``run`` calls this session (a dynamic-batch session pads the
        batch, runs a bucket and slices the outputs): their work runs on the executor
        in one piece, as :meth:`submit` does for :meth:`run`.
        """
        if self._on_executor:
            return EXECUTORS.submit(self._threads, fn, *args)
        return submit_elsewhere(fn, *args)

    def output_indices(self, names) -> list[int]:
        """Positions of the outputs *names* asks for (None: all; a name or a list of
        names, each an output's name or its position ``outN``), as ONNX Runtime's
        ``run(names, feeds)`` picks them; an :class:`~mxc.errors.ExecutionError`
        naming the outputs for an unknown name."""
        if names is None:
            return list(range(len(self._outputs)))
        if isinstance(names, str):
            names = [names]
        by_name = {o.name: i for i, o in enumerate(self._outputs)}
        by_name.update({f"out{i}": i for i in range(len(self._outputs))})
        out = []
        for name in names:
            if name not in by_name:
                import difflib
                close = difflib.get_close_matches(str(name), list(by_name), n=1)
                raise ExecutionError(
                    f"{name!r} is not an output of the model"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + f"; outputs are {', '.join(o.name for o in self._outputs)} "
                      f"(or {_positions(len(self._outputs))})")
            out.append(by_name[name])
        return out

    def get_modelmeta(self):
        """ONNX Runtime's model metadata, from the manifest (:mod:`mxc.runtime.metadata`)."""
        from .metadata import model_metadata
        return model_metadata(self.manifest)

    def get_providers(self) -> list[str]:
        """ONNX Runtime's name of the device this session runs on."""
        return ["CUDAExecutionProvider" if self._kind == "cuda" else "CPUExecutionProvider"]

    def _run(self, feeds: Mapping[str, Any], profile: bool):
        t0 = time.perf_counter() if profile else 0.0
        st = self._state()
        vals = self._feed(feeds)
        times = [] if profile else None
        cpu = self._cpu
        for kind, name, what, ins, outs, release in self._plan:
            if profile:
                ts = time.perf_counter()
            if kind == _REGION:
                args = [a if mode == _ARG_CONST else self._to_device(st, name, i, vals[a])
                        for i, (mode, a) in enumerate(ins)]
                try:
                    result = st.fns[what](*args)
                except Exception as exc:  # noqa: BLE001 - TVM errors
                    raise ExecutionError(f"compiled region {name!r} ({what}) failed: "
                                         f"{type(exc).__name__}: {exc}") from exc
                for k, s in enumerate(outs):
                    if s >= 0:
                        vals[s] = result[k]
                if profile and not cpu:
                    _tvm.sync(self._dev)
            else:
                arrays = [v if type(v) is np.ndarray else _tvm.to_numpy(v, copy=False)
                          for v in (vals[s] for s in ins)]
                for s, v in zip(outs, what(arrays)):
                    if s >= 0:
                        vals[s] = v
            if release:
                for s in release:
                    vals[s] = None
            if profile:
                times.append(StepTime(name, "region" if kind == _REGION else "host",
                                      what if kind == _REGION else what.op,
                                      time.perf_counter() - ts))
        outputs = [np.array(v) if type(v) is np.ndarray else _tvm.to_numpy(v)
                   for v in (vals[s] for s in self._output_slots)]
        if profile:
            return outputs, Profile(tuple(times), time.perf_counter() - t0, self._threads)
        return outputs

    def _feed(self, feeds: Mapping[str, Any]) -> list:
        """The value slots of a call: *feeds* (checked here unless this session's
        signature checked them already) in the input slots, zeros for optional
        inputs left out."""
        if type(feeds) is not CheckedFeeds or feeds.signature is not self._signature:
            feeds = self._signature.check_values(feeds)[0]
        vals = list(self._template)
        for name, slot, shape, dtype in self._input_specs:
            x = feeds.get(name)
            if type(x) is Declared:
                raise ExecutionError(f"input {name!r}: a declared tensor without values "
                                     f"(CheckedFeeds.fill gives them theirs)")
            vals[slot] = np.zeros(shape, dtype) if x is None else x
        return vals

    def _device_tensor(self, spec: InputSpec, x: Any):
        """A DLPack feed: a host array when it lives on the host, else the device
        tensor itself, for a CUDA model (:class:`~mxc.runtime.feeds.FeedSignature`
        checks its dtype and shape)."""
        try:
            dev_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        except Exception:  # noqa: BLE001
            dev_type = 1
        if dev_type == _tvm.KDL_CPU:
            return np.from_dlpack(x)
        if self._cpu or dev_type != _tvm.KDL_CUDA:
            raise ExecutionError(f"input {spec.name!r}: a tensor on DLPack device {dev_type} "
                                 f"cannot feed a {self._kind} model; pass a host array")
        return _tvm.ffi().from_dlpack(x)

    def _to_device(self, st: ThreadState, step: str, i: int, v):
        """A value as a tensor the VM can take: 64-byte aligned, compact, on the device."""
        if type(v) is not np.ndarray:
            if self._cpu or v.device.dlpack_device_type() != _tvm.KDL_CPU:
                return v
            v = _tvm.to_numpy(v, copy=False)
        dlpack = _tvm.dlpack_exchangeable(v.dtype)   # bfloat16 is copied by bytes
        # numpy exports no read-only array through DLPack (BufferError): those are staged
        if self._cpu and dlpack and v.flags.c_contiguous and v.flags.writeable:
            t = _from_dlpack(v)  # zero-copy when TVM's alignment assumption holds
            if t.data_ptr() % _tvm.ALIGNMENT == 0:
                return t
        key = (step, i)
        buf = st.staging.get(key)
        if buf is None or buf[2] != v.shape or buf[3] != v.dtype:
            t = _tvm.empty(v.shape, v.dtype.name, self._dev)
            view = np.from_dlpack(t) if self._cpu and dlpack else None
            if view is not None and not view.flags.writeable:
                view = None  # numpy < 2 imports DLPack tensors read-only: copy through TVM
            buf = st.staging[key] = (t, view, v.shape, v.dtype)
        if buf[1] is not None:
            buf[1][...] = v
        else:
            _tvm.copy_from_numpy(buf[0], v)
        return buf[0]


def load(path: str | os.PathLike, libraries: Sequence[str | os.PathLike] | None = None, *,
         verify_key: Any = None, threads: int | None = None) -> Session:
    """Load an ``.mxc`` artifact and return a :class:`Session` to run it.

    **Loading runs the native code in the artifact's library** (its ELF
    constructors run inside ``dlopen``), so load only artifacts you trust.
    With *verify_key* (an Ed25519 public key: a PEM file path, PEM or raw
    bytes, or a key object) the artifact must carry a signature made with the
    matching private key (``mxc compile --sign KEY``); otherwise it is refused
    before any member besides the manifest is read and before the library is
    written to disk.  Without it, unsigned and signed artifacts load alike.

    The file is verified (format version, fields, sizes and checksums of every
    member, a target this machine can run) before its library is loaded; a
    library already loaded by this process (same sha256) is reused.  A model
    with operators of compiled extension libraries runs only with the same
    library files given in *libraries* (checked by sha256, see
    :mod:`mxc.runtime.libraries`).  *threads* limits the CPU threads of its
    compiled code (default: every core this process may use).  Raises
    :class:`~mxc.errors.ArtifactError`.
    """
    from .artifact import read_artifact
    art = read_artifact(path, verify_key=verify_key)
    if art.manifest.get("libraries") or libraries:  # imported only when there is one
        from .libraries import attach_libraries
        attach_libraries(art.manifest, libraries, str(path))
    origin = (os.path.abspath(path), [os.path.abspath(p) for p in libraries or ()],
              verify_key, threads)
    if "dynamic_batch" in art.manifest:   # one compiled bucket per batch size
        from .buckets import load_buckets   # builds on this module: given what it needs
        return load_buckets(art, str(path), threads, make_session=session_from_parts,
                            origin=origin, reload=_reload)
    sess = session_from_parts(art.plan or art.graph, art.manifest, art.params,
                              art.library, source=str(path), threads=threads)
    sess._origin = origin
    return sess


def _reload(path: str, libraries: list[str], verify_key: bytes | None,
            threads: int | None) -> Session:
    """Unpickle a session: load its artifact again (verified with the key it was loaded with)."""
    return load(path, libraries or None, verify_key=verify_key, threads=threads)


#: libraries loaded by this process, by sha256: a library cannot be unloaded safely
#: (TVM keeps loaded modules alive), so loading the same artifact again reuses it
_LIBRARIES: dict[str, Any] = {}
_LIBRARIES_LOCK = threading.Lock()


def _load_library(library: bytes, source: str):
    from .artifact import extract_library
    digest = hashlib.sha256(library).hexdigest()
    with _LIBRARIES_LOCK:
        module = _LIBRARIES.get(digest)
        if module is not None:
            return module
        tmp, lib = extract_library(library)
        try:
            module = _tvm.load_module(lib)
        except ArtifactError:
            raise
        except Exception as exc:  # noqa: BLE001 - dlopen / TVM errors
            raise ArtifactError(f"{source}: cannot load the compiled library: "
                                f"{type(exc).__name__}: {exc}") from None
        finally:  # the mapping stays valid after unlinking
            shutil.rmtree(tmp, ignore_errors=True)
        _LIBRARIES[digest] = module
        return module


def session_from_parts(graph: Plan | Mapping, manifest: Mapping, params: Mapping[str, np.ndarray],
                       library: bytes | None, *, source: str,
                       threads: int | None = None) -> Session:
    """A :class:`Session` from an artifact's decoded members (the library as bytes)."""
    module = None
    if library is not None:
        if (manifest.get("target") or {}).get("kind") == "cuda" and not _tvm.has_cuda():
            raise ArtifactError(f"{source}: a CUDA model needs a usable CUDA GPU and TVM's CUDA "
                                f"runtime (libtvm_runtime_cuda)")
        module = _load_library(library, source)
    try:
        return Session(graph, manifest, params, module, source=source, threads=threads)
    except MxcError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a forged graph.json still triggers
        raise ArtifactError(f"{source}: graph.json cannot be executed ({type(exc).__name__}: "
                            f"{str(exc)[:200]}); the artifact is corrupt or was modified"
                            ) from None
