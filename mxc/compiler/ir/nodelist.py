"""``NodeList``: the ordered node container behind :attr:`Graph.nodes`.

Passes insert and erase nodes in the middle of 100k-node graphs, so the
container must make those edits O(1) (as torch.fx's linked node list does)
while still reading like the plain list existing code iterates, indexes and
assigns.  It is a doubly linked list whose links live on the nodes themselves
(so an edit touches only the nodes involved and membership is one identity
test; see ``_link`` for nodes that sit in several lists at once), plus:

* a materialized list, rebuilt lazily after a mutation, that iteration,
  indexing and slicing read (iterating is a snapshot: nodes inserted during a
  loop are not visited, so ``for n in graph.nodes: graph.add_node(.., after=n)``
  is safe);
* a name index and per-base fresh-name counters, so ``find(name)`` and
  ``fresh_name(base)`` do not scan the nodes.  Renaming a node
  (``node.name = ...``) bumps :attr:`Node.renames`; the index notices and is
  rebuilt once on its next query.

:attr:`full_walks` counts every O(n) walk the container makes; the tests use
it to check that insert/erase/lookup never walk the list.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Iterable, Iterator, overload

from ...errors import GraphError
from .node import Node

__all__ = ["NodeList"]


class _End:
    """The sentinel that closes one list's ring (before the first, after the last node).

    Each list has its own, so a sentinel's links are always its list's own.
    """

    __slots__ = ("_prev", "_next")

    def __repr__(self) -> str:
        return "<end>"


class NodeList(MutableSequence):
    """An ordered set of nodes with O(1) insert-before/after, erase and membership."""

    __slots__ = ("_end", "_len", "_foreign", "_cache", "_names", "_names_epoch",
                 "_dup_names", "_counters", "full_walks", "version")

    def __init__(self, nodes: Iterable[Node] = ()):
        end = _End()
        end._prev = end._next = end
        self._end = end
        self._len = 0
        #: links of member nodes whose own slots another list holds: node -> [prev, next]
        self._foreign: dict[Node, list] = {}
        self._cache: list[Node] | None = []
        self._names: dict[str, Node] | None = None
        self._names_epoch = -1
        self._dup_names = False
        self._counters: dict[str, int] = {}
        #: O(n) walks made so far (materializing the order, rebuilding the name index)
        self.full_walks = 0
        #: moves on every insert and removal here and on every edit of a node whose
        #: links this list holds (:meth:`Node._edited`); keys the graph's type cache
        self.version = 0
        for node in nodes:
            self._link(node, end._prev, end)

    # -- linking ------------------------------------------------------------------------
    # A node carries the links of the one list that owns it (``Node._owner``,
    # ``_prev``, ``_next``), as torch.fx's nodes do: an insert touches only the
    # nodes involved, with no per-list table to grow.  A node may sit in several
    # lists at once (a graph rebuilt from another's nodes, a view over a subset);
    # the newest list takes the slots, and the list that held them keeps that
    # node's links in its ``_foreign`` table, so every list stays exact.
    def _next_link(self, x):
        if x is self._end or x._owner is self:
            return x._next
        return self._foreign[x][1]

    def _prev_link(self, x):
        if x is self._end or x._owner is self:
            return x._prev
        return self._foreign[x][0]

    def _set_next(self, x, value) -> None:
        if x is self._end or x._owner is self:
            x._next = value
        else:
            self._foreign[x][1] = value

    def _set_prev(self, x, value) -> None:
        if x is self._end or x._owner is self:
            x._prev = value
        else:
            self._foreign[x][0] = value

    def _has(self, node) -> bool:
        return node._owner is self or node in self._foreign

    def _link(self, node: Node, prev, nxt) -> None:
        """Put *node* between *prev* and *nxt*, both already here (or the sentinel)."""
        if node.__class__ is not Node and not isinstance(node, Node):
            raise TypeError(f"a graph holds Node objects, got {node!r}")
        owner = node._owner
        if owner is not None:
            if owner is self or node in self._foreign:
                raise GraphError(f"node {node.ref} is already in this graph")
            owner._foreign[node] = [node._prev, node._next]  # the holder keeps its links aside
            owner.version += 1  # it no longer sees this node's edits (see sees_every_edit)
        elif node in self._foreign:
            raise GraphError(f"node {node.ref} is already in this graph")
        node._owner, node._prev, node._next = self, prev, nxt
        end = self._end
        if prev is end or prev._owner is self:  # the inlined _set_next/_set_prev: the hot path
            prev._next = node
        else:
            self._foreign[prev][1] = node
        if nxt is end or nxt._owner is self:
            nxt._prev = node
        else:
            self._foreign[nxt][0] = node
        self._len += 1
        self._cache = None
        self.version += 1
        names = self._names
        if names is not None and names.setdefault(node._name, node) is not node:
            self._dup_names = True

    def _unlink(self, node: Node) -> None:
        if node._owner is self:
            prev, nxt = node._prev, node._next
            node._owner = node._prev = node._next = None
        else:
            prev, nxt = self._foreign.pop(node)
        self._set_next(prev, nxt)
        self._set_prev(nxt, prev)
        self._len -= 1
        self._cache = None
        self.version += 1
        names = self._names
        if names is not None and names.get(node.name) is node:
            del names[node.name]
            if self._dup_names:  # another node may carry the name: rebuild on demand
                self._names = None

    def _release(self) -> None:
        """Let go of every node (their slots become free for other lists)."""
        for node in self._list():
            if node._owner is self:
                node._owner = node._prev = node._next = None
        end = self._end
        end._prev = end._next = end
        self._foreign, self._len, self._cache = {}, 0, []
        self.version += 1

    @property
    def sees_every_edit(self) -> bool:
        """True when every member's edits move :attr:`version`: this list holds the
        links of all its nodes (none sits here while another list holds them)."""
        return not self._foreign

    def _reset(self, nodes: Iterable[Node]) -> None:
        nodes = list(nodes)
        self._release()
        self._names = None
        end = self._end
        for node in nodes:
            self._link(node, end._prev, end)

    def _anchor(self, anchor: Node) -> None:
        if anchor is self._end or not isinstance(anchor, Node) or not self._has(anchor):
            raise GraphError(f"node {getattr(anchor, 'name', anchor)!r} is not in this graph")

    def insert_before(self, anchor: Node, node: Node) -> Node:
        """Insert *node* just before *anchor* (O(1))."""
        if getattr(anchor, "_owner", None) is self:
            prev = anchor._prev
        else:
            self._anchor(anchor)
            prev = self._prev_link(anchor)
        self._link(node, prev, anchor)
        return node

    def insert_after(self, anchor: Node, node: Node) -> Node:
        """Insert *node* just after *anchor* (O(1))."""
        if getattr(anchor, "_owner", None) is self:
            nxt = anchor._next
        else:
            self._anchor(anchor)
            nxt = self._next_link(anchor)
        self._link(node, anchor, nxt)
        return node

    def next_of(self, node: Node) -> Node | None:
        """The node after *node* (None at the end)."""
        self._anchor(node)
        nxt = self._next_link(node)
        return None if nxt is self._end else nxt

    def prev_of(self, node: Node) -> Node | None:
        """The node before *node* (None at the start)."""
        self._anchor(node)
        prev = self._prev_link(node)
        return None if prev is self._end else prev

    # -- names --------------------------------------------------------------------------
    def _name_index(self) -> dict[str, Node]:
        if self._names is None or self._names_epoch != Node.renames:
            self.full_walks += 1
            names: dict[str, Node] = {}
            dup = False
            for n in self._list():
                if n.name in names:
                    dup = True
                else:
                    names[n.name] = n
            self._names, self._dup_names, self._names_epoch = names, dup, Node.renames
        return self._names

    def find(self, name: str) -> Node | None:
        """The node called *name* (the first in order if several are), or None."""
        return self._name_index().get(name)

    def fresh_name(self, base: str) -> str:
        """*base*, or *base* followed by the smallest counter not yet used as a name."""
        names = self._name_index()
        if base not in names:
            return base
        i = self._counters.get(base, 0)
        while f"{base}{i}" in names:
            i += 1
        self._counters[base] = i
        return f"{base}{i}"

    # -- the list view ------------------------------------------------------------------
    def _list(self) -> list[Node]:
        cache = self._cache
        if cache is None:
            self.full_walks += 1
            cache = []
            append, end, foreign = cache.append, self._end, self._foreign
            n = end._next
            while n is not end:
                append(n)
                n = n._next if n._owner is self else foreign[n][1]
            self._cache = cache
        return cache

    def __len__(self) -> int:
        return self._len

    def __contains__(self, node) -> bool:
        return isinstance(node, Node) and self._has(node)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._list())

    def __reversed__(self) -> Iterator[Node]:
        return reversed(self._list())

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> list[Node]: ...

    def __getitem__(self, i):
        if self._cache is None and self._len:
            if i == 0:
                return self._end._next
            if i == -1:
                return self._end._prev
        return self._list()[i]

    def __setitem__(self, i, value) -> None:
        nodes = list(self._list())
        nodes[i] = value
        self._reset(nodes)

    def __delitem__(self, i) -> None:
        doomed = self._list()[i]
        for node in (doomed if isinstance(i, slice) else [doomed]):
            self._unlink(node)

    def insert(self, i: int, node: Node) -> None:
        """``list.insert`` semantics; O(1) at either end."""
        n = len(self)
        if i < 0:
            i = max(0, n + i)
        end = self._end
        if i == 0:
            self._link(node, end, end._next)
        elif i >= n:
            self._link(node, end._prev, end)
        else:
            self.insert_before(self._list()[i], node)

    def append(self, node: Node) -> None:
        end = self._end
        self._link(node, end._prev, end)

    def extend(self, nodes: Iterable[Node]) -> None:
        for node in list(nodes):
            self.append(node)

    def remove(self, node: Node) -> None:
        """Remove *node* (O(1)); ValueError if it is not here, as for a list."""
        if node not in self:
            raise ValueError(f"{node!r} is not in the node list")
        self._unlink(node)

    def pop(self, i: int = -1) -> Node:
        node = self[i]
        self._unlink(node)
        return node

    def clear(self) -> None:
        self._reset(())

    def reverse(self) -> None:
        self._reset(list(reversed(self._list())))

    def sort(self, *, key=None, reverse: bool = False) -> None:
        self._reset(sorted(self._list(), key=key, reverse=reverse))

    def index(self, node, start: int = 0, stop: int | None = None) -> int:
        if node not in self:
            raise ValueError(f"{node!r} is not in the node list")
        return self._list().index(node, start, len(self) if stop is None else stop)

    def copy(self) -> list[Node]:
        """A plain list of the nodes (what ``list.copy`` gave callers before)."""
        return list(self._list())

    def __eq__(self, other) -> bool:
        if isinstance(other, NodeList):
            return self._list() == other._list()
        if isinstance(other, list):
            return self._list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __add__(self, other: Iterable[Node]) -> list[Node]:
        return self._list() + list(other)

    def __radd__(self, other: Iterable[Node]) -> list[Node]:
        return list(other) + self._list()

    def __repr__(self) -> str:
        return repr(self._list())
