"""Inferred shapes and dtypes kept on the graph, valid until the graph changes.

torch.fx keeps a node's value in ``node.meta["val"]`` and Relax keeps a
``struct_info`` on every expression; mxc keeps the result of its whole-graph
inference (:mod:`mxc.compiler.infer`) on the :class:`~.graph.Graph`, so that
the stages of a compile -- passes, partitioning, lowering, conversion -- ask
the graph instead of each sweeping it again.

What the answer depends on, and how a change of it is seen:

* the nodes reachable from the outputs (op, name, attributes, inputs,
  subgraphs, control dependencies): every edit of a node moves the version of
  the node list holding its links (:meth:`Node._edited`, :mod:`.watched`);
  when some reachable node's edits do not reach this graph's list (it sits in
  several lists, or is not listed at all) the stamp also holds the global
  :attr:`Node.edits`, which any edit moves;
* the output entries and the graph's ``is_np_shape`` attribute, read afresh
  on each ask (a few entries);
* nested graphs: each one's own stamp, recorded when the answer was computed;
* the operator registry: any (re)registration moves :func:`ops_generation`;
* the question: the kind (shape or dtype) and the given values by input name.

Each question's answer is computed once per graph state; re-ordering the node
list (``graph.nodes = ...``) keeps answers, since it edits no node.
:meth:`Graph.verify` compares every current answer with a fresh inference.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

from .node import Entry, Node

# "Graph" in annotations is .graph.Graph, named as a string and never imported: the
# graph module builds on this one.  Inference (mxc.compiler.infer, above the IR: it
# needs the operator registry) comes in as an argument of TypeCache.answer.

__all__ = ["GraphTypes", "TypeCache", "Key", "ops_generation"]

#: an entry's identity in inference results: ``(node, output index)`` (:attr:`Entry.key`)
Key = tuple[Node, int]
#: a question: ``(kind, ((input name, given value), ...))``, names sorted
Question = tuple[str, tuple[tuple[str, Any], ...]]

_GENERATION = itertools.count(1)
_generation = 0
_subscribed = False


def ops_generation() -> int:
    """A number that moves whenever an operator is registered, replaced or removed."""
    global _subscribed
    if not _subscribed:
        from ..ops.registry import OPS

        def moved(*_: Any) -> None:
            global _generation
            _generation = next(_GENERATION)
        OPS.subscribe(moved)
        _subscribed = True
    return _generation


@dataclass(frozen=True)
class GraphTypes:
    """Shapes and dtypes of every entry reachable from a graph's outputs.

    Both map :attr:`Entry.key` to a value, ``None`` where inference could not
    tell; they are read-only views of the graph's cache.
    """

    shapes: Mapping[Key, tuple | None]
    dtypes: Mapping[Key, str | None]

    def shape(self, entry: Entry | Node) -> tuple | None:
        """The shape of *entry* (a node stands for its output 0)."""
        return self.shapes.get(_key(entry))

    def full_shape(self, entry: Entry | Node) -> tuple | None:
        """The shape if every dimension is known, else None."""
        s = self.shape(entry)
        return s if s is not None and None not in s else None

    def dtype(self, entry: Entry | Node) -> str | None:
        """The dtype name of *entry* (a node stands for its output 0)."""
        return self.dtypes.get(_key(entry))


def _key(entry: Entry | Node) -> Key:
    return (entry, 0) if isinstance(entry, Node) else entry.key


class _Answer:
    """One question's inferred values and the graph state they hold for."""

    __slots__ = ("values", "stamp", "nested")

    def __init__(self, values: Mapping[Key, Any], stamp: tuple,
                 nested: tuple[tuple["Graph", tuple], ...]):
        self.values = values
        self.stamp = stamp
        self.nested = nested


def _reachable_owned(graph: "Graph", order: list[Node]) -> bool:
    """True when every edit of a reachable node moves this graph's list version."""
    nodes = graph._nodes
    return nodes.sees_every_edit and all(n._owner is nodes for n in order)


def _stamp(graph: "Graph", exact: bool) -> tuple:
    nodes = graph._nodes
    return (id(nodes), nodes.version, None if exact else Node.edits,
            tuple(e.key for e in graph.outputs), graph.is_np_shape)


class TypeCache:
    """The answers cached on one graph (``Graph._types``), at most :attr:`LIMIT` questions."""

    LIMIT = 8
    __slots__ = ("_answers", "_lock")

    def __init__(self) -> None:
        self._answers: dict[Question, _Answer] = {}
        self._lock = threading.Lock()    # two threads may ask one graph (a shared input)

    def __len__(self) -> int:
        return len(self._answers)

    # -- asking ---------------------------------------------------------------------------
    def answer(self, graph: "Graph", question: Question,
               infer: Callable[["Graph", str, dict], dict]) -> Mapping[Key, Any]:
        """The values for *question* on *graph*: cached when still current, else inferred
        by *infer* (:func:`mxc.compiler.infer.infer_fresh`)."""
        found = self._answers.get(question)
        if found is not None and self._current(graph, found):
            return found.values
        kind, given = question
        values = infer(graph, kind, dict(given))
        self._store(graph, question, MappingProxyType(values))
        return self._answers[question].values

    def _store(self, graph: "Graph", question: Question, values: Mapping[Key, Any]) -> None:
        order = graph.topo_order()
        nested = tuple((sub, _stamp(sub, _reachable_owned(sub, sub.topo_order())))
                       for sub in _nested_graphs(order))
        stamp = _stamp(graph, _reachable_owned(graph, order)) + (ops_generation(),)
        with self._lock:
            answers = self._answers
            answers.pop(question, None)
            while len(answers) >= self.LIMIT:
                del answers[next(iter(answers))]   # the oldest question goes
            answers[question] = _Answer(values, stamp, nested)

    @staticmethod
    def _current(graph: "Graph", found: _Answer) -> bool:
        exact = found.stamp[2] is None
        if found.stamp != _stamp(graph, exact) + (ops_generation(),):
            return False
        return all(stamp == _stamp(sub, stamp[2] is None) for sub, stamp in found.nested)

    # -- what verify() and copies use ------------------------------------------------------
    def current(self, graph: "Graph") -> Iterator[tuple[Question, Mapping[Key, Any]]]:
        """The questions whose cached answers still hold for *graph*, with the answers."""
        with self._lock:
            answers = list(self._answers.items())
        for question, found in answers:
            if self._current(graph, found):
                yield question, found.values

    def relisted(self, graph: "Graph", held: list[tuple[Question, Mapping[Key, Any]]]) -> None:
        """Keep the answers *held* (current before ``graph.nodes`` was replaced).

        A new node list edits no node, so the values still hold; only the
        stamps, which name the list, are taken again.
        """
        for question, values in held:
            self._store(graph, question, values)

    def copied_to(self, graph: "Graph", mapping: Mapping[int, Node],
                  held: list[tuple[Question, Mapping[Key, Any]]]) -> None:
        """Give *graph* (a copy, ``mapping``: ``{id(original node): copy}``) the answers
        *held* for the original, re-keyed to the copied nodes.

        Answers of graphs with nested graphs are not carried: the copy's nested
        graphs are new objects whose own answers start empty.
        """
        if any(n.subgraphs for n in mapping.values()):
            return
        for question, values in held:
            moved = {}
            for (node, index), value in values.items():
                new = mapping.get(id(node))
                if new is None:
                    break
                moved[(new, index)] = value
            else:
                graph._types._store(graph, question, MappingProxyType(moved))


def _nested_graphs(order: list[Node]) -> list["Graph"]:
    """Every graph nested in the nodes of *order*, at any depth."""
    found: list["Graph"] = []
    stack = [sub for n in order for sub in n.subgraphs]
    while stack:
        sub = stack.pop()
        found.append(sub)
        stack.extend(s for n in sub.topo_order() for s in n.subgraphs)
    return found
