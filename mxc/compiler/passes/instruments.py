"""Pass instruments: hooks the pass manager calls around every pass.

An instrument subclasses :class:`PassInstrument` and overrides any of
``run_before_pass``, ``run_after_pass`` and ``run_after_failure`` (TVM's
names); each receives the :class:`~.pipeline.PassSpec` being run, its
position and the graph.  Built in:

* :class:`PassTiming` -- wall time per pass; ``report()`` is a table.
* :class:`PrintIRAfterAll` -- the textual IR after every pass.
* :class:`PrintIRAfterFailure` -- the textual IR a failing pass left.
* :class:`PrintIRBefore` -- the textual IR before every pass, or before the
  passes named (mlir-opt's ``--print-ir-before``).
* :class:`PrintIRAfterChange` -- the textual IR after each pass that changed
  it (mlir-opt's ``--print-ir-after-change``).

Verification after each pass is not an instrument but a pass-manager flag
(``verify_each``, on by default).
"""

from __future__ import annotations

import sys
import time
from typing import IO

from ..ir import Graph
from ..ir.text import print_graph

__all__ = ["PassInstrument", "PassTiming", "PrintIRAfterAll", "PrintIRAfterFailure",
           "PrintIRBefore", "PrintIRAfterChange"]


class PassInstrument:
    """Base class: every hook does nothing."""

    def run_before_pass(self, spec, index: int, total: int, graph: Graph) -> None:
        """Called before pass *spec* (number *index* of *total*, from 1) runs."""

    def run_after_pass(self, spec, index: int, total: int, graph: Graph, ctx) -> None:
        """Called after the pass succeeded and the graph verified."""

    def run_after_failure(self, spec, index: int, total: int, graph: Graph,
                          error: BaseException) -> None:
        """Called when the pass raised or left an invalid graph."""


class PassTiming(PassInstrument):
    """Records ``(pass text, seconds)`` for every pass run (failed ones included)."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self._start = 0.0

    def run_before_pass(self, spec, index, total, graph):
        self._start = time.perf_counter()

    def run_after_pass(self, spec, index, total, graph, ctx):
        self.timings.append((str(spec), time.perf_counter() - self._start))

    def run_after_failure(self, spec, index, total, graph, error):
        self.timings.append((f"{spec} (failed)", time.perf_counter() - self._start))

    @property
    def total(self) -> float:
        return sum(t for _, t in self.timings)

    def report(self) -> str:
        """A table: one row per pass with its time and share, then the total."""
        total = self.total or 1e-12
        width = max([len(name) for name, _ in self.timings] + [5])
        lines = [f"{'pass':<{width}}  {'time (ms)':>10}  {'share':>6}"]
        for name, t in self.timings:
            lines.append(f"{name:<{width}}  {t * 1e3:10.2f}  {100 * t / total:5.1f}%")
        lines.append(f"{'total':<{width}}  {self.total * 1e3:10.2f}  100.0%")
        return "\n".join(lines)


class PrintIRAfterAll(PassInstrument):
    """Print the graph in the textual IR after every pass (to *file*, default stderr)."""

    def __init__(self, file: IO[str] | None = None):
        self.file = file

    def run_after_pass(self, spec, index, total, graph, ctx):
        out = self.file or sys.stderr
        print(f"// ----- IR after pass {index}/{total}: {spec} -----", file=out)
        print(print_graph(graph), file=out)


class PrintIRAfterFailure(PassInstrument):
    """Print the graph a failing pass left (to *file*, default stderr)."""

    def __init__(self, file: IO[str] | None = None):
        self.file = file

    def run_after_failure(self, spec, index, total, graph, error):
        out = self.file or sys.stderr
        print(f"// ----- IR after FAILED pass {index}/{total}: {spec} -----", file=out)
        try:
            print(print_graph(graph), file=out)
        except Exception as exc:  # noqa: BLE001 - the graph may be arbitrarily broken
            print(f"// (cannot print the graph: {exc})", file=out)


def _pass_name(spec) -> str:
    return str(getattr(spec, "name", spec)).split("{", 1)[0].strip()


class PrintIRBefore(PassInstrument):
    """Print the graph before every pass (*names* None) or before the passes named."""

    def __init__(self, names=None, file: IO[str] | None = None):
        self.names = None if names is None else {str(n).strip() for n in names}
        self.file = file

    def run_before_pass(self, spec, index, total, graph):
        if self.names is not None and _pass_name(spec) not in self.names:
            return
        out = self.file or sys.stderr
        print(f"// ----- IR before pass {index}/{total}: {spec} -----", file=out)
        print(print_graph(graph), file=out)


class PrintIRAfterChange(PassInstrument):
    """Print the graph after a pass only when the pass changed its textual IR."""

    def __init__(self, file: IO[str] | None = None):
        self.file = file
        self._before = ""

    def run_before_pass(self, spec, index, total, graph):
        self._before = print_graph(graph)

    def run_after_pass(self, spec, index, total, graph, ctx):
        text = print_graph(graph)
        if text != self._before:
            out = self.file or sys.stderr
            print(f"// ----- IR after pass {index}/{total} (changed): {spec} -----", file=out)
            print(text, file=out)
