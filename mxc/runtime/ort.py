"""ONNX Runtime's way in: ``mxc.runtime.InferenceSession(path, providers=[...])``.

Users porting ORT code keep their lines::

    so = mxc.runtime.SessionOptions()
    so.intra_op_num_threads = 2
    sess = mxc.runtime.InferenceSession("model.mxc", so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name            # .shape, .type == "tensor(float)"
    probs = sess.run(None, {name: x})[0]
    sess.get_modelmeta().producer_name          # "mxc 0.1.0"

An artifact is compiled for one device, so *providers* does not choose a
kernel library as in ORT: it states where the caller expects the model to
run, and a list that does not include the artifact's device is an error
saying which device the artifact was compiled for (rather than a silent
surprise).  The result is an ordinary :class:`~mxc.runtime.Session`.

:class:`SessionOptions` holds ORT's option names.  What a loaded artifact can
honour is honoured (``intra_op_num_threads`` is the session's thread count,
``register_custom_ops_library`` the libraries it is loaded with); an option
that would change what was fixed at compile time (graph optimisation, memory
planning) or that mxc has no counterpart for is refused when set to anything
but ORT's default, naming what to do instead -- never silently ignored.
"""

from __future__ import annotations

import enum
import os
import shutil
import tempfile
from typing import Any, Sequence

from ..errors import ArtifactError, MxcError
from .metadata import ModelMetadata, model_metadata  # noqa: F401 - ORT's names, re-exported
from .session import Session, load

#: ORT execution provider names -> the artifact target kind that runs on it
PROVIDERS = {"CPUExecutionProvider": "llvm", "CUDAExecutionProvider": "cuda"}


def get_available_providers() -> list[str]:
    """The providers this machine can run artifacts on, CUDA first as in ORT."""
    from ._tvm import has_cuda
    return (["CUDAExecutionProvider"] if has_cuda() else []) + ["CPUExecutionProvider"]


class GraphOptimizationLevel(enum.IntEnum):
    """ORT's levels; an artifact was optimised when it was compiled (``--passes``)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


#: option -> (ORT's default, what to do instead of changing it): refused when changed
_FIXED = {
    "inter_op_num_threads": (0, "steps run one after another; intra_op_num_threads sets the "
                                "threads of each compiled kernel"),
    "execution_mode": (ExecutionMode.ORT_SEQUENTIAL, "steps run one after another"),
    "graph_optimization_level": (GraphOptimizationLevel.ORT_ENABLE_ALL,
                                 "the graph was optimised when the artifact was compiled: "
                                 "compile with mxc compile --passes '' for no graph passes"),
    "optimized_model_filepath": ("", "an artifact is already the compiled model"),
    "enable_profiling": (False, "use sess.run(feeds, profile=True) or mxc run --profile"),
    "profile_file_prefix": ("onnxruntime_profile_", "use sess.run(feeds, profile=True)"),
    "enable_cpu_mem_arena": (True, "memory is planned when the artifact is compiled"),
    "enable_mem_pattern": (True, "memory is planned when the artifact is compiled"),
    "enable_mem_reuse": (True, "memory is planned when the artifact is compiled"),
    "log_severity_level": (2, "mxc logs through `logging` (logger 'mxc.runtime')"),
    "log_verbosity_level": (0, "mxc logs through `logging` (logger 'mxc.runtime')"),
    "logid": ("", "mxc logs through `logging` (logger 'mxc.runtime')"),
    "use_deterministic_compute": (False, "compiled kernels are deterministic on the CPU"),
}


class SessionOptions:
    """ORT's ``SessionOptions``: ``intra_op_num_threads`` (0: every core this process may
    use) and ``register_custom_ops_library`` are honoured; the options in :data:`_FIXED`
    keep ORT's default or :func:`InferenceSession` refuses them; other names are an
    ``AttributeError``, as on ORT's own object."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {name: default for name, (default, _) in
                                             _FIXED.items()})
        self._values["intra_op_num_threads"] = 0
        self._values["custom_ops_libraries"] = []

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"'SessionOptions' object has no attribute {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._values or name == "custom_ops_libraries":
            raise AttributeError(f"SessionOptions has no option {name!r}; mxc takes "
                                 f"intra_op_num_threads, register_custom_ops_library() and "
                                 f"ORT's defaults of {', '.join(sorted(_FIXED))}")
        self._values[name] = value

    def register_custom_ops_library(self, path: str | os.PathLike) -> None:
        """An extension library the artifact's custom operators need: a compiled MXNet
        library or an mxc Python extension, loaded as ``mxc run --load PATH`` loads it."""
        self._values["custom_ops_libraries"].append(os.fspath(path))

    def add_session_config_entry(self, key: str, value: str) -> None:
        raise MxcError(f"SessionOptions.add_session_config_entry({key!r}, ...): mxc has no "
                       f"session configuration entries")

    def load_arguments(self) -> dict:
        """The :func:`~mxc.runtime.load` arguments these options ask for; refuses an option
        changed from ORT's default that mxc cannot honour."""
        for name, (default, instead) in _FIXED.items():
            if self._values[name] != default:
                raise MxcError(f"SessionOptions.{name} = {self._values[name]!r} is not "
                               f"supported: {instead}")
        threads = self._values["intra_op_num_threads"]
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise MxcError(f"SessionOptions.intra_op_num_threads must be an integer >= 0 "
                           f"(0: every core), not {threads!r}")
        return {"threads": threads or None,
                "libraries": list(self._values["custom_ops_libraries"]) or None}


def _provider_name(entry: Any) -> str:
    name = entry[0] if isinstance(entry, (tuple, list)) else entry
    if name not in PROVIDERS:
        raise ArtifactError(f"unknown execution provider {name!r}; mxc artifacts run on "
                            f"{', '.join(PROVIDERS)}")
    return name


def InferenceSession(path_or_bytes: str | os.PathLike | bytes,  # noqa: N802
                     sess_options: SessionOptions | None = None,
                     providers: Sequence[Any] | None = None,
                     provider_options: Sequence[Any] | None = None, **kwargs: Any) -> Session:
    """Load an ``.mxc`` artifact (a path, or its bytes) as ORT's ``InferenceSession``
    would load a model.

    providers:
        ORT provider names (or ``(name, options)`` pairs); None accepts the
        artifact's own device.
    sess_options:
        a :class:`SessionOptions`; its threads and custom-op libraries are applied.
    provider_options, other keywords:
        refused when they ask for anything (a device's options are fixed at compile
        time).
    """
    if kwargs:
        raise MxcError(f"InferenceSession: {', '.join(sorted(kwargs))} not supported by mxc")
    if provider_options and any(provider_options):
        raise MxcError("InferenceSession: provider_options are not supported (the device is "
                       "chosen at compile time; threads: SessionOptions.intra_op_num_threads)")
    load_kwargs = (sess_options or SessionOptions()).load_arguments()
    if load_kwargs["libraries"]:       # as `mxc run --load`: registered, then checked
        from ..library import load as load_library
        for lib in load_kwargs["libraries"]:
            load_library(lib, verbose=False)
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return _from_bytes(bytes(path_or_bytes), providers, load_kwargs)
    _check_providers(path_or_bytes, providers)
    return load(path_or_bytes, **load_kwargs)


def _check_providers(path: str | os.PathLike, providers, source: str | None = None) -> None:
    names = [_provider_name(p) for p in providers] if providers else None
    from .artifact import read_manifest
    kind = (read_manifest(path).get("target") or {}).get("kind", "llvm")
    if names is not None and kind not in {PROVIDERS[n] for n in names}:
        wanted = next(n for n, k in PROVIDERS.items() if k == kind)
        raise ArtifactError(f"{source or path} was compiled for {kind} and runs with "
                            f"{wanted}, which providers={list(names)} does not include "
                            f"(compile it with --target for the device you want)")


def _from_bytes(data: bytes, providers, load_kwargs: dict) -> Session:
    """An artifact's bytes go through the file reader's checks: they are written to a
    private temporary file (mode 0600, in a fresh directory) that is removed after
    loading; errors name ``<bytes>``, not that file."""
    tmp = tempfile.mkdtemp(prefix="mxc-bytes-")
    path = os.path.join(tmp, "model.mxc")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        _check_providers(path, providers, "<bytes>")
        sess = load(path, **load_kwargs)
    except ArtifactError as exc:
        raise ArtifactError(str(exc).replace(path, "<bytes>")) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sess.source = "<bytes>"
    return sess
