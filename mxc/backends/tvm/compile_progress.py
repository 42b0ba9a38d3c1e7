"""How a compile reports its progress, without owning a display.

The compile stages call a :class:`CompileProgress` (``start``, ``note``,
``done``, ``close``); what it shows is the caller's business.  The command
line passes the terminal display (:class:`mxc.progress.StageProgress`: a
bar on a terminal, plain lines elsewhere); ``mxc.compile(progress=...)``
takes such an object, a callback ``fn(stage, summary, seconds)`` called as
each stage finishes, or True for the stderr display.  The default,
:class:`QuietProgress`, only times the stages and logs them.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Protocol, Union, runtime_checkable

log = logging.getLogger("mxc.backends.tvm.compile")

#: the stages of a compile: passes, partition, lower, build, runtime plan
STAGES = 5


@runtime_checkable
class CompileProgress(Protocol):
    """What the compile stages report to."""

    #: True when the display shows per-pass detail (the build then reports each TVM pass)
    tty: bool

    def start(self, stage: str) -> None: ...

    def note(self, detail: str) -> None: ...

    def done(self, summary: str = "") -> float:
        """The stage finished; returns its duration in seconds."""

    def close(self) -> None: ...


class QuietProgress:
    """Times and logs the stages (``logging`` at INFO); shows nothing."""

    tty = False

    def __init__(self, total: int = STAGES):
        self.total = total
        self.index = 0
        self.stage = ""
        self.t_stage = time.perf_counter()

    def start(self, stage: str) -> None:
        self.index += 1
        self.stage = stage
        self.t_stage = time.perf_counter()
        log.info("[%d/%d] %s", self.index, self.total, stage)

    def note(self, detail: str) -> None:
        pass

    def done(self, summary: str = "") -> float:
        took = time.perf_counter() - self.t_stage
        log.info("[%d/%d] %s: %s (%.2fs)", self.index, self.total, self.stage,
                 summary or "done", took)
        self.finished(self.stage, summary, took)
        return took

    def finished(self, stage: str, summary: str, seconds: float) -> None:
        """Called as each stage finishes (nothing here)."""

    def close(self) -> None:
        pass


class CallbackProgress(QuietProgress):
    """Calls ``callback(stage, summary, seconds)`` as each stage finishes."""

    def __init__(self, callback: Callable[[str, str, float], None], total: int = STAGES):
        super().__init__(total)
        self.callback = callback

    def finished(self, stage: str, summary: str, seconds: float) -> None:
        self.callback(stage, summary, seconds)


ProgressArg = Union[bool, CompileProgress, Callable[[str, str, float], None], None]


def as_progress(progress: ProgressArg) -> CompileProgress:
    """The :class:`CompileProgress` that ``compile(progress=...)`` asks for."""
    if progress is None or progress is False:
        return QuietProgress()
    if progress is True:
        from ...progress import StageProgress  # the stderr display
        return StageProgress(True, total=STAGES)
    if isinstance(progress, CompileProgress):
        return progress
    if callable(progress):
        return CallbackProgress(progress)
    raise TypeError(f"progress must be a bool, a CompileProgress or a callback, not "
                    f"{type(progress).__name__}")
