"""Progress display shared by long commands (compile stages, tuning).

On a terminal, :func:`bar` gives a tqdm progress bar (counts, rate, ETA; a
compile's unequal stages show their count and the elapsed time only);
elsewhere (a log file, CI) it gives None and callers print plain lines.
:class:`Heartbeat` keeps a non-terminal log from going silent: when nothing
was printed for *every* seconds it prints one "still working" line, so a
10-minute build never looks like a hang.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from typing import Callable, TextIO

log = logging.getLogger("mxc.backends.tvm.compile")

#: seconds without output after which a plain-line display says it is still working
HEARTBEAT_S = 10.0


def is_tty(stream) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


#: a line without count, rate or ETA, for steps of very unequal length (a compile's
#: stages, whose description already says "[2/5] build"): an estimate from the steps done
#: says nothing about the ones to come; what is known is the step and the time spent
ELAPSED_ONLY = "{desc}{elapsed} elapsed{postfix}"


def bar(total: int, desc: str, stream: TextIO, unit: str = "it", eta: bool = True):
    """A tqdm bar on *stream* when it is a terminal, else None; *eta* False shows the
    count and the elapsed time only (:data:`ELAPSED_ONLY`)."""
    if not is_tty(stream):
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc if eta else f"{desc}: ", unit=unit, file=stream,
                dynamic_ncols=True, leave=True,   # (set_description() adds the ": " itself)
                bar_format=None if eta else ELAPSED_ONLY)


class Heartbeat:
    """Prints ``message()`` on *stream* when nothing was written for *every* seconds."""

    def __init__(self, stream: TextIO, message: Callable[[], str], every: float = HEARTBEAT_S):
        self.stream = stream
        self.message = message
        self.every = every
        self.last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def touch(self) -> None:
        """Something was just written."""
        self.last = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self.last >= self.every:
                try:
                    print(self.message(), file=self.stream, flush=True)
                except (OSError, ValueError):
                    return
                self.touch()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class StageProgress:
    """The progress of a compile's stages on stderr.

    On a terminal: a tqdm bar over the stages (count, elapsed time, the TVM pass
    being run as its postfix; no rate or ETA: the build stage alone can take most
    of the time), each finished stage kept as a line above it.  Elsewhere:
    one line per finished stage, and a "still running" line whenever a stage has
    printed nothing for :data:`HEARTBEAT_S` seconds.  Disabled, it only logs
    (``logging`` at INFO).
    """

    def __init__(self, enabled: bool = False, stream=None, total: int = 5):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and is_tty(self.stream)
        self.total = total
        self.index = 0
        self.stage = ""
        self.detail = ""
        self.t0 = self.t_stage = time.perf_counter()
        self._lock = threading.Lock()
        self._bar = (bar(total, "compile", self.stream, unit="stage", eta=False) if self.tty
                     else None)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._heartbeat = (Heartbeat(self.stream, self._still) if enabled and not self.tty
                           else None)

    def _still(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return (f"[{self.index}/{self.total}] {self.stage}: still running{detail}, "
                f"{time.perf_counter() - self.t_stage:.0f}s")

    def start(self, stage: str) -> None:
        self.index += 1
        self.stage, self.detail = stage, ""
        self.t_stage = time.perf_counter()
        log.info("[%d/%d] %s", self.index, self.total, stage)
        if self._bar is not None:
            self._bar.set_description(f"[{self.index}/{self.total}] {stage}")
            if self._ticker is None:       # keep the elapsed time moving in long stages
                self._ticker = threading.Thread(target=self._tick, daemon=True)
                self._ticker.start()

    def note(self, detail: str) -> None:
        self.detail = detail
        if self._bar is not None:
            with self._lock:
                self._bar.set_postfix_str(detail[:60], refresh=False)

    def done(self, summary: str = "") -> float:
        took = time.perf_counter() - self.t_stage
        log.info("[%d/%d] %s: %s (%.2fs)", self.index, self.total, self.stage, summary or "done",
                 took)
        if self.enabled:
            text = f"[{self.index}/{self.total}] {self.stage}: {summary or 'done'} ({took:.1f}s)"
            try:
                if self._bar is not None:
                    with self._lock:
                        self._bar.set_postfix_str("", refresh=False)
                        self._bar.write(text[:shutil.get_terminal_size((100, 20)).columns - 1],
                                        file=self.stream)
                        self._bar.update(1)
                else:
                    print(text, file=self.stream, flush=True)
                    if self._heartbeat is not None:
                        self._heartbeat.touch()
            except (OSError, ValueError):  # a closed stream must not break a compile
                pass
        return took

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                try:
                    self._bar.refresh()
                except (OSError, ValueError, AttributeError):
                    return

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
