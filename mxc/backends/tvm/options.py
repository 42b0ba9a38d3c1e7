"""What a compile or a tuning run is asked to do, in one typed object each.

:class:`CompileOptions` and :class:`TuneOptions` carry every setting the
stages below them need as an explicit value, so no library code consults the
environment: ``mxc.compile(...)`` and the command line build their options
with :meth:`CompileOptions.from_env`, the only place that reads mxc's
environment variables (:data:`ENVIRONMENT`), and the variables it used are
recorded in the manifest (``environment``) -- an artifact says what shaped
it.  Nothing here imports TVM, so the CLI can build options before TVM loads.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence, TextIO

from ...errors import BackendError

#: a tuned kernel is kept only when re-measured at least this much faster than the default
#: (:mod:`.tune.verify`); defined here, as :class:`TuneOptions`' default, so that the
#: options layer imports nothing of the tuner (importing :mod:`.tune.verify` would run
#: the ``tune`` package, which imports this module)
KEEP_MARGIN = 0.03
#: a tuning database directory used when no ``db`` is given (``mxc tune --db DIR``)
ENV_TUNING_DB = "MXC_TUNING_DB"
#: the Winograd mode used when no ``winograd`` is given (``0``/``off``, ``on``, else auto)
ENV_WINOGRAD = "MXC_WINOGRAD"
#: the GPU architecture of a ``cuda`` target that names none and runs on no visible GPU
ENV_CUDA_ARCH = "MXC_CUDA_ARCH"
#: ``1``: an exception inside a schedule rule fails the build (the test suite sets it)
#: instead of being logged and the next rule tried (:mod:`.build_context`)
ENV_STRICT_SCHEDULES = "MXC_STRICT_SCHEDULES"
#: 1: build AMX tile steps as their scalar emulation (tests of the AMX kernels on a CPU
#: without AMX; :mod:`.schedules.base.amx_steps`); read into the options' ``emulate_amx``
#: when they are made, never during a build
ENV_EMULATE_AMX = "MXC_EMULATE_AMX"
#: the C++ compiler that links the library (the usual variable, TVM's too): for another
#: architecture it replaces the ``<triple>-g++`` mxc looks for (:mod:`.toolchain`).  Read
#: by :meth:`CompileOptions.from_env` but not recorded in the manifest: it picks the
#: linker, not the code, and is commonly set in a developer's shell
ENV_CXX = "CXX"
#: every variable :meth:`CompileOptions.from_env` reads and records, with the option it
#: supplies
ENVIRONMENT = {ENV_TUNING_DB: "db", ENV_WINOGRAD: "winograd", ENV_CUDA_ARCH: "cuda_arch"}

#: the ``winograd`` choices (:mod:`mxc.backends.tvm.schedules.families.winograd`): auto (where
#: the output side is large enough to pay for the larger weights), on, off
WINOGRAD_MODES = ("auto", "on", "off")


def winograd_from_env(value: str) -> str:
    """``$MXC_WINOGRAD`` as a mode: ``0``/``false``/``no``/``off`` -> off, ``on`` -> on,
    anything else auto."""
    value = value.strip().lower()
    return "off" if value in ("0", "false", "no", "off") else "on" if value == "on" else "auto"


#: the ``precision`` choices (:mod:`mxc.backends.tvm.precision`)
PRECISIONS = ("fp32", "bf16", "auto")


def check_precision(precision: str | None) -> None:
    if precision not in PRECISIONS:
        raise BackendError(f"precision must be one of {', '.join(PRECISIONS)}, "
                           f"not {precision!r}")


def check_winograd(mode: str | None) -> None:
    if mode is not None and mode not in WINOGRAD_MODES:
        raise BackendError(f"winograd must be one of {', '.join(WINOGRAD_MODES)}, not {mode!r}")


def _from_environment(given: dict, environ: Mapping[str, str] | None,
                      variables: Mapping[str, str]) -> tuple[dict, dict[str, str]]:
    """*given* with each option of *variables* (``{variable: option}``) that is None
    taken from its environment variable when set; returns (options, variables used)."""
    env = os.environ if environ is None else environ
    given = dict(given)
    used: dict[str, str] = {}
    for var, option in variables.items():
        value = (env.get(var) or "").strip()
        if given.get(option) is not None or not value:
            continue
        if option == "winograd":
            given[option] = winograd_from_env(value)
        elif option == "cuda_arch":
            given[option] = value if value.startswith("sm_") else f"sm_{value}"
        else:
            given[option] = value
        used[var] = value
    return given, used


def strict_schedules(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``$MXC_STRICT_SCHEDULES`` asks schedule rules' exceptions to fail builds."""
    env = os.environ if environ is None else environ
    return (env.get(ENV_STRICT_SCHEDULES) or "").strip() not in ("", "0")


def emulate_amx(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``$MXC_EMULATE_AMX`` asks for the scalar emulation of AMX tile steps."""
    env = os.environ if environ is None else environ
    return (env.get(ENV_EMULATE_AMX) or "").strip() == "1"


def _build_switches(given: dict, environ: Mapping[str, str] | None) -> dict:
    """*given* with ``emulate_amx`` and ``strict`` left None read from their variables:
    test switches, not recorded in the manifest's ``environment`` (the manifest says
    what emulation did in ``target.host.emulated``)."""
    given = dict(given)
    if given.get("emulate_amx") is None:
        given["emulate_amx"] = emulate_amx(environ)
    if given.get("strict") is None:
        given["strict"] = strict_schedules(environ)
    return given


_STATE = threading.local()


@contextlib.contextmanager
def use_database(db: str | os.PathLike | None):
    """Within the block, compiles and :func:`~mxc.backends.tvm.build.build_module`
    calls given no ``db=`` use *db* (it wins over ``$MXC_TUNING_DB``)."""
    previous = getattr(_STATE, "db", None)
    _STATE.db = db
    try:
        yield
    finally:
        _STATE.db = previous


def current_database() -> str | os.PathLike | None:
    """The innermost :func:`use_database` block's database (this thread), or None."""
    return getattr(_STATE, "db", None)


def resolve_database(db: str | os.PathLike | None) -> str | os.PathLike | None:
    """*db* if given, else the :func:`use_database` block's: the one place a build's
    database is looked up (``$MXC_TUNING_DB`` comes after both, in
    :meth:`CompileOptions.from_env`).  Called once, where a compile or a module built on
    its own starts; everything later reads the build context's ``db``."""
    return db if db is not None else current_database()


@dataclass(frozen=True)
class CompileOptions:
    """How :func:`mxc.compile` compiles a model (its keyword arguments, typed).

    Attributes
    ----------
    target:
        ``"llvm"`` (this CPU), ``"cuda"``, a TVM target dict/string or a
        ``tvm.target.Target``.
    passes:
        the graph pass pipeline; None: the default one, ``""``: none.
    bind_params:
        compile the parameters in as constants (False: store them beside the
        library and feed them at run time).
    name:
        the model name the manifest records.
    db:
        a tuning database directory; None: the :func:`use_database` block's, else none.
    weights_as_inputs:
        weights missing from the params become run-time inputs instead of an error.
    params_source:
        where the params came from (a file name), for the missing-weights error.
    winograd:
        CPU 3x3 convolutions: ``auto``, ``on`` or ``off``; None: auto.
    cuda_arch:
        the ``sm_XY`` of a ``cuda`` target that names no ``arch``; None: the
        visible GPU's, else ``sm_75``.
    precision:
        ``fp32`` (default), ``bf16`` (convolutions/dense in bfloat16 with float32
        accumulation, :mod:`mxc.backends.tvm.precision`) or ``auto``.
    emulate_amx:
        build AMX tile steps as their scalar emulation (``$MXC_EMULATE_AMX=1``, read by
        :meth:`from_env`; tests of the AMX kernels on a CPU without AMX).  A field, not a
        variable read mid-build, so one compile's code and manifest agree on it.
    cxx:
        the C++ compiler that links the library (``$CXX``); None: this machine's for its
        own architecture, ``<triple>-g++`` for another (:mod:`.toolchain`).
    strict:
        a schedule rule's exception fails the build (``$MXC_STRICT_SCHEDULES``, read by
        :meth:`from_env`; the test suite sets it); None: the build context reads the
        variable when it is made.
    environment:
        the environment variables that supplied a value above (recorded in the
        manifest); filled by :meth:`from_env`.
    """

    target: Any = "llvm"
    passes: str | None = None
    bind_params: bool = True
    name: str | None = None
    db: str | os.PathLike | None = None
    weights_as_inputs: bool = False
    params_source: str | None = None
    winograd: str | None = None
    cuda_arch: str | None = None
    precision: str = "fp32"
    emulate_amx: bool = False
    strict: bool | None = None
    cxx: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_winograd(self.winograd)
        check_precision(self.precision)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> "CompileOptions":
        """Options from *given* (``mxc.compile``'s keywords), every option left None
        taken from its environment variable (:data:`ENVIRONMENT`) when that is set.

        The database: ``db`` given, else the :func:`use_database` block's, else
        ``$MXC_TUNING_DB`` (:func:`resolve_database`).  *environ* defaults to
        ``os.environ``; this is the one place mxc reads it for a compile, so a compile's
        settings are fixed before any of its stages runs."""
        given = {**given, "db": resolve_database(given.get("db"))}
        given = _build_switches(given, environ)
        if given.get("cxx") is None:
            given["cxx"] = ((os.environ if environ is None else environ).get(ENV_CXX)
                            or "").strip() or None
        given, used = _from_environment(given, environ, ENVIRONMENT)
        return cls(**given, environment=used)

    def with_(self, **changes: Any) -> "CompileOptions":
        """A copy with *changes*, of which only the settings that change are checked: the
        others were checked once, when these options were made (a compile copies its
        options several times -- the database resolved, ``auto``'s two precisions --
        and would otherwise check the same precision at every copy)."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"CompileOptions has no field(s) {', '.join(sorted(unknown))}")
        new = copy.copy(self)
        for name, value in changes.items():
            object.__setattr__(new, name, value)
        if "winograd" in changes and changes["winograd"] != self.winograd:
            check_winograd(new.winograd)
        if "precision" in changes and changes["precision"] != self.precision:
            check_precision(new.precision)
        return new


@dataclass(frozen=True)
class TuneOptions:
    """How :func:`mxc.backends.tvm.tune.tune_model` tunes (``mxc tune``'s options).

    Attributes
    ----------
    target:
        the target the kernels are tuned for (as :class:`CompileOptions`).
    trials:
        measured trials per kernel (tasks with as many records are skipped).
    db_dir:
        the database directory (created when missing), shared by every model.
    rpc:
        ``(tracker_host, tracker_port, key)``: measure on the RPC tracker's
        devices of that key (*rpc_workers* sessions in parallel) instead of
        locally.
    trials_per_iter:
        candidates measured per batch (the database grows batch by batch).
    max_workers:
        local build processes (None: every allowed core).
    timeout_s:
        seconds per build/measurement.
    all_kernels:
        also tune injective kernels (transposes, padding ...); by default only
        kernels with a reduction are tuned.
    search:
        ``"evolutionary"`` (cost-model guided) or ``"random"`` (design-space samples).
    seed_default:
        also measure mxc's default schedule of each kernel and store it as a
        record, so a tuned build is never slower than the untuned one.
    seed:
        the search seed.
    progress:
        a stream for progress lines (True: stderr, False/None: silent).
    verbose:
        let MetaSchedule log to the console too (it always logs to ``DB_DIR/logs/``).
    model_info:
        what the database's tuning log says about the model
        (``{"model": name, "symbol": path, "shapes": ...}``).
    winograd:
        the Winograd mode the model will be compiled with (the kernels differ);
        None: auto.
    precision:
        the ``--precision`` the model will be compiled with (``bf16`` legalizes to
        other kernels); ``fp32`` by default.
    verify:
        after tuning a kernel (or finding it tuned already), re-measure its best
        record against mxc's default schedule, interleaved, and let ``compile
        --db`` use the tuned schedule only when it is faster by *keep_margin* (a
        fraction; see :mod:`.tune.verify`): measurement noise then cannot make a
        tuned build slower than the untuned one.
    keep_margin:
        how much faster a tuned schedule must re-measure to be kept.
    only:
        tune only the kernels whose task name contains one of these strings
        (``["conv2d_nhwc_packed_add"]``: spend trials where the default is weak);
        the others are treated as tuned already.
    """

    target: Any = "llvm"
    trials: int = 64
    db_dir: str | os.PathLike = "mxc-tuning"
    rpc: tuple[str, int, str] | None = None
    rpc_workers: int = 1
    trials_per_iter: int = 64
    max_workers: int | None = None
    timeout_s: float = 30.0
    all_kernels: bool = False
    search: str = "evolutionary"
    seed_default: bool = True
    seed: int | None = None
    progress: TextIO | None | bool = True
    verbose: bool = False
    model_info: Mapping[str, Any] | None = None
    winograd: str | None = None
    precision: str = "fp32"
    verify: bool = True
    keep_margin: float = KEEP_MARGIN
    only: Sequence[str] | None = None
    #: build AMX tile steps as their scalar emulation (as :class:`CompileOptions`)
    emulate_amx: bool = False
    #: a schedule rule's exception fails the build (as :class:`CompileOptions`)
    strict: bool | None = None

    #: the environment variables that supplied a value (filled by :meth:`from_env`)
    environment: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> "TuneOptions":
        """Options from *given*; ``winograd`` left None comes from ``$MXC_WINOGRAD`` (the
        kernels tuned are those :meth:`CompileOptions.from_env` would compile), and
        ``emulate_amx`` from ``$MXC_EMULATE_AMX`` likewise."""
        given = _build_switches(given, environ)
        given, used = _from_environment(given, environ, {ENV_WINOGRAD: "winograd"})
        return cls(**given, environment=used)

    def __post_init__(self) -> None:
        check_winograd(self.winograd)
        check_precision(self.precision)
        if self.trials < 1:
            raise BackendError(f"trials must be >= 1, not {self.trials}")
