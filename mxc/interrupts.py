"""Ctrl-C that lands inside TVM's C++ code, told apart from TVM's own failures.

TVM checks for signals in its long loops; a SIGINT there comes back to
Python not as ``KeyboardInterrupt`` but as whatever TVM's FFI makes of it,
often a ``RuntimeError`` with an empty message, which mxc then reported as
"TVM compilation ... failed: RuntimeError:" (exit 7).  Guessing from the
message would misread real errors; instead :func:`watch_interrupts` installs a
SIGINT handler that *counts* the signal before raising ``KeyboardInterrupt``
as Python's own does, and on leaving the block:

* an exception raised after a SIGINT arrived becomes ``KeyboardInterrupt``
  (chained to the exception, for ``-v``);
* a SIGINT that something swallowed still ends the block with
  ``KeyboardInterrupt``.

:func:`check` raises it at once where a long loop wants to stop promptly
(``mxc tune`` between measured batches).  The handler is installed only in
the main thread and only over Python's default handler: an application that
ignores SIGINT or handles it itself keeps its handler.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_seen = 0          # SIGINTs counted by every watch so far
_marks: list[int] = []   # the count when each active watch began (outermost first)


def _counting(previous, defer: bool, start: int):
    def handler(signum, frame):
        global _seen
        _seen += 1
        if defer and _seen - start == 1:
            return                        # the first: noted, for the loop to stop at a batch
        previous(signum, frame)           # Python's default: raise KeyboardInterrupt
    return handler


def interrupted() -> bool:
    """Whether a SIGINT arrived since the outermost active :func:`watch_interrupts` began."""
    return bool(_marks) and _seen > _marks[0]


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a SIGINT arrived inside an active watch."""
    if interrupted():
        raise KeyboardInterrupt


@contextlib.contextmanager
def watch_interrupts(defer: bool = False) -> Iterator[None]:
    """Count SIGINTs in the block, and end it with ``KeyboardInterrupt`` if one came.

    *defer*: the first SIGINT raises nothing; the block's code polls :func:`interrupted`
    (or :func:`check`) where stopping is safe, and a second SIGINT raises at once.  For
    code whose C++ side crashes on an exception thrown from its signal check (MetaSchedule's
    task scheduler segfaults when the interrupt lands between two batches)."""
    previous = signal.getsignal(signal.SIGINT)
    install = (threading.current_thread() is threading.main_thread()
               and (previous is signal.default_int_handler
                    or getattr(previous, "_mxc_watch", False)))
    start = _seen
    if install:
        handler = _counting(previous if previous is signal.default_int_handler
                            else signal.default_int_handler, defer, start)
        handler._mxc_watch = True
        signal.signal(signal.SIGINT, handler)
    _marks.append(start)
    try:
        yield
    except Exception as exc:
        if _seen > start:
            raise KeyboardInterrupt from exc
        raise
    finally:
        _marks.pop()
        if install:
            signal.signal(signal.SIGINT, previous)
    if _seen > start:      # the block went on after a SIGINT that something swallowed
        raise KeyboardInterrupt
