"""What a profiler may do to a session's compiled code, as public methods.

The kernel profiler (:mod:`.profiler`) must run a session's regions on a VM of its
own whose calls pass through an instrument, then time single kernels on the
arguments it recorded.  Both need the session's module, device and per-thread
VM state; this mixin of :class:`.session.Session` offers exactly those two acts,
so the profiler never reads a private attribute of another module's class.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from . import _tvm


class ThreadState:
    """One thread's Relax VM of a session, its region functions and staging buffers."""

    __slots__ = ("vm", "fns", "staging")

    def __init__(self, vm, fns):
        self.vm = vm
        self.fns = fns
        self.staging: dict = {}


class SessionInstruments:
    """Instrumented runs and single-kernel timing (mixed into ``Session``)."""

    _module: Any
    _kind: Any
    _dev: Any
    _functions: Sequence[str]
    _tls: Any

    @contextlib.contextmanager
    def instrumented(self, instrument: Callable[..., int]) -> Iterator[None]:
        """Within the block, runs on this thread use a fresh VM whose every call passes
        through *instrument* (TVM's VM instrument: ``(func, name, before, ret, *args)
        -> 0``); the session's own VM stays uninstrumented and comes back after."""
        vm = _tvm.create_vm(self._module, self._kind, 0)
        vm["set_instrument"](_tvm.ffi().convert(instrument))
        fns = {name: vm[name] for name in self._functions}
        saved = getattr(self._tls, "state", None)
        self._tls.state = ThreadState(vm, fns)
        try:
            yield
        finally:
            self._tls.state = saved

    def time_kernel(self, name: str, args: list, *, repeat: int, min_ms: float) -> list[float]:
        """Seconds of each of *repeat* timings of kernel *name* alone on *args* (TVM's
        time evaluator; each figure spans at least *min_ms*)."""
        return _tvm.time_call(self._module, name, self._dev, args, repeat=repeat, min_ms=min_ms)
