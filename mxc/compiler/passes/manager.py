"""The pass manager: run a pipeline over a symbol and its parameters.

:class:`PassManager` resolves the whole pipeline first (unknown passes and
bad options fail before anything runs), then for each pass: builds a
:class:`~.context.PassContext`, calls the instruments, runs the pass,
restores a topological node order and verifies the graph.  Any failure is a
:class:`~mxc.errors.PassError` naming the pass, the passes before it and,
when the verifier found it, the broken node (``.pass_name``, ``.previous``,
``.node``).

Parameters are handled as MXNet's ``optimize_for`` does: arrays a pass
allocates are added, and parameters whose variable left the graph are
removed.  The caller's dicts are never modified here; :func:`run` returns
new ones (``Symbol.optimize_for`` copies the changes back, as MXNet does).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ...errors import GraphError, MxcError, PassError
from ..ir import Graph, post_order
from .context import ParamStore, PassContext, restore_order
from .instruments import PassInstrument
from .pipeline import Pipeline, PassSpec

__all__ = ["PassManager", "PipelineResult", "run", "run_graph"]

log = logging.getLogger("mxc.passes")


@dataclass
class PipelineResult:
    """What a pipeline produced; unpacks as ``sym, args, aux = result``.

    ``graph`` is the transformed graph (``symbol.graph``), ``statistics``
    one ``(pass text, {counter: n})`` per pass, ``allocated`` the parameters
    passes created or replaced (``name -> "arg"/"aux"``) and ``removed`` the
    parameters that left the graph.
    """

    symbol: Any
    args: dict[str, np.ndarray]
    aux: dict[str, np.ndarray]
    graph: Graph
    statistics: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    allocated: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator:
        return iter((self.symbol, self.args, self.aux))


class PassManager:
    """Run a pipeline (text, :class:`~.pipeline.Pipeline` or list of passes).

    instruments:
        :class:`~.instruments.PassInstrument` objects, called in order.
    verify_each:
        Verify the graph after every pass (default).  When off, the graph is
        verified once, after the last pass.  Either way ``graph.nodes`` is
        re-sorted topologically after each pass.
    """

    def __init__(self, pipeline: Pipeline | str | Iterable, *,
                 instruments: Sequence[PassInstrument] = (), verify_each: bool = True):
        self.pipeline = Pipeline.of(pipeline)
        self._resolved = self.pipeline.resolve()
        self.instruments = list(instruments)
        self.verify_each = verify_each

    def __repr__(self) -> str:
        return f"<PassManager {str(self.pipeline)!r}>"

    def run(self, sym, args: Mapping | None = None, aux: Mapping | None = None, *,
            shapes: Mapping[str, Sequence[int]] | None = None) -> PipelineResult:
        """Run on a Symbol; the result's ``symbol`` is a new Symbol (of *sym*'s class).

        The manager itself works on graphs (:meth:`run_graph`); a Symbol is
        only unwrapped and rebuilt here, through its own class.
        """
        result = self.run_graph(sym.graph, args, aux, shapes=shapes)
        result.symbol = type(sym).from_graph(result.graph)
        return result

    def run_graph(self, graph: Graph, args: Mapping | None = None, aux: Mapping | None = None,
                  *, shapes: Mapping[str, Sequence[int]] | None = None) -> PipelineResult:
        """Run on a copy of *graph*; the input graph and dicts are left untouched.

        shapes:
            Shapes of data inputs (``{"data": (1, 3, 224, 224)}``), for
            passes that infer shapes; these inputs are never treated as
            parameters even if *args* holds arrays for them.
        """
        work = graph.copy()
        store = ParamStore(args, aux)
        original_inputs = [n.name for n in work.nodes if n.op is None]
        done: list[str] = []
        stats: list[tuple[str, dict[str, int]]] = []
        total = len(self._resolved)
        for index, (spec, info, typed, extra) in enumerate(self._resolved, start=1):
            ctx = PassContext(work, {**typed, **extra}, params=store, pass_name=spec.name,
                              previous=done, input_shapes=shapes)
            for inst in self.instruments:
                inst.run_before_pass(spec, index, total, work)
            stage = "failed"
            try:
                returned = info.run(work, ctx, typed)
                if returned is not None:
                    if not isinstance(returned, Graph):
                        raise PassError(f"returned {type(returned).__name__}; a pass returns "
                                        f"None (graph edited in place) or a Graph")
                    work = returned
                stage = "left an invalid graph"
                restore_order(work)  # later passes may rely on graph.nodes being sorted
                if self.verify_each or index == total:
                    # structure only: a fresh inference per pass would double what the
                    # type cache saves (Graph.verify() checks cached types by default)
                    work.verify(types=False)
            except Exception as exc:  # noqa: BLE001 - every failure names the pass
                for inst in self.instruments:
                    inst.run_after_failure(spec, index, total, work, exc)
                raise _pass_error(spec, done, exc, stage) from exc
            for inst in self.instruments:
                inst.run_after_pass(spec, index, total, work, ctx)
            if ctx.statistics:
                log.info("pass %s: %s", spec, ctx.statistics)
            stats.append((str(spec), dict(ctx.statistics)))
            done.append(spec.name)
        if not self._resolved:
            check_graph(work)
        work.nodes = post_order(e.node for e in work.outputs)
        removed = store.prune(work, original_inputs)
        return PipelineResult(None, store.args, store.aux, work, stats, dict(store.allocated),
                              removed)


def check_graph(graph: Graph) -> None:
    """Restore a topological node order (stably), then verify; raises GraphError.

    Passes may append nodes anywhere; only a list holding every node it
    refers to is re-sorted, so dangling entries are still reported.
    """
    restore_order(graph)
    graph.verify(types=False)   # as after each pass: the structure


_NODE_RE = re.compile(r"node '((?:[^'\\]|\\.)*)'")


def _pass_error(spec: PassSpec, done: list[str], exc: BaseException, what: str) -> PassError:
    where = f"after {', '.join(done)}" if done else "the first pass of the pipeline"
    node = getattr(exc, "node", None)
    if node is None and isinstance(exc, GraphError):
        found = _NODE_RE.search(str(exc))
        node = found.group(1) if found else None
    detail = str(exc) if isinstance(exc, MxcError) else f"{type(exc).__name__}: {exc}"
    err = PassError(f"pass {spec.name!r} ({where}) {what}: {detail}")
    err.pass_name = spec.name
    err.previous = tuple(done)
    err.node = node
    return err


def run(sym, pipeline: Pipeline | str | Iterable, args: Mapping | None = None,
        aux: Mapping | None = None, *, shapes: Mapping[str, Sequence[int]] | None = None,
        instruments: Sequence[PassInstrument] = (), verify_each: bool = True) -> PipelineResult:
    """Run *pipeline* on *sym*: ``sym, args, aux = run(sym, "dce", args, aux)``.

    Returns a :class:`PipelineResult` that unpacks to the new Symbol and new
    ``args``/``aux`` dicts (the inputs are not modified).  Raises
    :class:`~.pipeline.PipelineError` for a bad pipeline and
    :class:`~mxc.errors.PassError` when a pass fails.
    """
    manager = PassManager(pipeline, instruments=instruments, verify_each=verify_each)
    return manager.run(sym, args, aux, shapes=shapes)


def run_graph(graph: Graph, pipeline: Pipeline | str | Iterable, args: Mapping | None = None,
              aux: Mapping | None = None, **kwargs: Any) -> PipelineResult:
    """Like :func:`run` for a :class:`~mxc.compiler.ir.Graph` (``result.graph``)."""
    instruments = kwargs.pop("instruments", ())
    verify_each = kwargs.pop("verify_each", True)
    manager = PassManager(pipeline, instruments=instruments, verify_each=verify_each)
    return manager.run_graph(graph, args, aux, **kwargs)
