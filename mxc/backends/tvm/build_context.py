"""The explicit context of one build: its settings and what it records.

A compile's TVM end used to read its settings from ambient state -- the
Winograd mode and statistics from a process-global class, the bfloat16
precision and the kernel-progress hook from context variables, the load-time
lifting from a thread-local -- because a schedule rule or a legalization
callback had no parameter to receive options through.  Two compiles in two
threads with different settings could then see each other's.  Instead,
``mxc.compile`` and ``mxc tune`` each build one :class:`BuildContext`
(:func:`build_context`, the same function for both, so what is tuned is what
is compiled) and pass it down: to the graph passes
(:func:`.schedules.pipeline.graph_passes`), the legalizations
(:func:`.schedules.legalize.cpu_legalize_map`), the load-time lifting
(:func:`.load_time.lift_load_time_pass`) and the default schedules
(:func:`.schedules.cpu.cpu_schedule_pass`).

The context is immutable; its one mutable part is :class:`BuildRecords`, the
statistics sink the steps fill for the manifest, which belongs to that build
alone.

Like TVM's ``PassContext`` (``tvm/ir/transform.py``), every setting is resolved
once, when the context is made (:func:`build_context`): the tuning database
(``db``), the AMX emulation (``emulate_amx``), the precision (its value checked once,
when the options were made; against the CPU once, as the compile began,
:func:`.precision.check_request`), the Winograd mode, and the CPU's capabilities
(``cpu``: what it computes, decided once per target --
:func:`.schedules.base.microarch.cpu_features` -- the decision that check read).  A
build enters its context (``with ctx:``, :func:`~.build.build_module`); code too deep
to be handed it -- the AMX helper IR of a tile schedule -- reads
:func:`current_context`.  Nothing below reads the environment or a ``use_database``
block: a setting changed once the build has begun does not reach it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .options import check_winograd, emulate_amx, strict_schedules



@dataclass
class BuildRecords:
    """What one build's steps record (the manifest's ``winograd``/``precision``
    and the lifted load-time transforms).

    ``winograd``/``precision``/``lifted`` are empty (``{}``/None) for a build that
    records nothing (a module built on its own): then each Winograd convolution
    is judged alone against the precision budget instead of the model's sum."""

    winograd: dict = field(default_factory=dict)
    #: the summed error estimate of the build's Winograd convolutions so far
    winograd_error: float = 0.0
    precision: dict | None = None
    lifted: dict | None = None
    #: variables read exactly once, noted before legalization (``--precision bf16``): a
    #: bfloat16 kernel's input rounding moves into the producer of such a variable
    single_use: set = field(default_factory=set)


@dataclass(frozen=True)
class BuildContext:
    """Everything a build's passes and schedule rules may depend on besides the IR."""

    target: Any                       #: the resolved ``tvm.target.Target``
    #: :class:`.schedules.base.microarch.CpuInfo` (None: not a CPU), decided when the
    #: context is made; within the build its ``bf16_dot``/``bf16_tiles`` answer "can this
    #: CPU do bfloat16?" for the kernel-choice table (:mod:`.schedules.kernel_choice`),
    #: once per build -- nothing asks the target again, and no schedule rule asks at all
    cpu: Any
    winograd: str = "auto"            #: ``auto`` / ``on`` / ``off``
    precision: str = "fp32"           #: ``fp32`` / ``bf16``
    db: str | None = None             #: the tuning database directory, if any
    lift: frozenset = frozenset()     #: functions whose load-time transforms are lifted
    records: BuildRecords = field(default_factory=BuildRecords)
    #: called with a progress detail: ``kernel i/N NAME`` as the default schedules reach
    #: each kernel, then a line saying code generation (all kernels at once) has begun
    progress: Callable[[str], None] | None = None
    #: a schedule rule's exception fails the build (tests) instead of being logged
    strict: bool = False
    #: the default-schedule rules, in order (None: :data:`.schedules.cpu.RULES`)
    rules: tuple | None = None
    #: build AMX tile steps as their scalar emulation (:mod:`.schedules.base.amx_steps`)
    emulate_amx: bool = False

    def __enter__(self) -> "BuildContext":
        """Make this the :func:`current_context` of this thread until the block ends."""
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _stack().pop()

    @property
    def winograd_min_size(self) -> int:
        from .schedules.families.winograd import MIN_SIZE, MIN_SIZE_FORCED
        return MIN_SIZE_FORCED if self.winograd == "on" else MIN_SIZE


_ACTIVE = threading.local()


def _stack() -> list:
    stack = getattr(_ACTIVE, "stack", None)
    if stack is None:
        stack = _ACTIVE.stack = []
    return stack


def current_context() -> BuildContext | None:
    """The innermost entered :class:`BuildContext` of this thread (None: no build)."""
    stack = _stack()
    return stack[-1] if stack else None


def build_context(target, *, winograd: str | None = None, precision: str | None = None,
                  db: str | os.PathLike | None = None, lift: Iterable[str] = (),
                  record: bool = True, progress: Callable[[str], None] | None = None,
                  strict: bool | None = None, emulate: bool | None = None) -> BuildContext:
    """The context of a build for *target* (``mxc.compile`` and ``mxc tune`` both call
    this, with their options' ``winograd``/``precision``).

    *record*: fill :class:`BuildRecords` for a manifest (a model's compile) rather
    than build a module on its own.  *emulate* (the AMX emulation) and *strict*, when
    None, come from the environment through :mod:`.options`, now: a module built on its
    own reads them once, as it starts."""
    check_winograd(winograd)   # the precision was checked when the options were made
    cpu = None
    if getattr(getattr(target, "kind", None), "name", None) == "llvm":
        from .schedules.base.microarch import cpu_info
        cpu = cpu_info(target)
    mode = winograd or "auto"
    prec = precision or "fp32"
    records = BuildRecords()
    if record:
        records = BuildRecords(
            winograd={"mode": mode, "convolutions": 0, "weight_bytes": 0,
                      "transformed_bytes": 0},
            precision={"mode": prec, "kernels": 0}, lifted={})
    return BuildContext(target=target, cpu=cpu, winograd=mode, precision=prec,
                        db=None if db is None else os.fspath(db), lift=frozenset(lift),
                        records=records, progress=progress,
                        strict=strict_schedules() if strict is None else strict,
                        emulate_amx=emulate_amx() if emulate is None else bool(emulate))


def options_context(options: Any, target, **extra: Any) -> BuildContext:
    """The context of a build for *target* under *options* -- a
    :class:`~.options.CompileOptions` (``mxc compile``) or a
    :class:`~.options.TuneOptions` (``mxc tune``): both read the same fields here, so
    the kernels tuned are the kernels compiled.  The options' settings were resolved
    when they were made (:meth:`~.options.CompileOptions.from_env`); the context copies
    them (each setting a field of its own: the options object itself is not kept) and
    reads nothing else."""
    return build_context(target, winograd=options.winograd,
                         precision=getattr(options, "precision", None),
                         db=getattr(options, "db", None),
                         emulate=getattr(options, "emulate_amx", False),
                         **{"strict": getattr(options, "strict", None), **extra})
