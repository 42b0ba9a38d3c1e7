"""``NodeList``: the ordered node container behind :attr:`Graph.nodes`.

Passes insert and erase nodes in the middle of 100k-node graphs, so the
container must make those edits O(1) (as torch.fx's linked node list does)
while still reading like the plain list existing code iterates, indexes and
assigns.  It is a doubly linked list kept in one dict (``node -> [prev, next]``,
so membership is a dict lookup and a link edit touches few entries), plus:

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
    """The sentinel that closes the ring (before the first, after the last node)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<end>"


_END = _End()


class NodeList(MutableSequence):
    """An ordered set of nodes with O(1) insert-before/after, erase and membership."""

    __slots__ = ("_links", "_cache", "_names", "_names_epoch", "_dup_names",
                 "_counters", "full_walks")

    def __init__(self, nodes: Iterable[Node] = ()):
        self._links: dict = {_END: [_END, _END]}  # node -> [prev, next]
        self._cache: list[Node] | None = []
        self._names: dict[str, Node] | None = None
        self._names_epoch = -1
        self._dup_names = False
        self._counters: dict[str, int] = {}
        #: O(n) walks made so far (materializing the order, rebuilding the name index)
        self.full_walks = 0
        for node in nodes:
            self._link(node, self._links[_END][0], _END)

    # -- linking ------------------------------------------------------------------------
    def _link(self, node: Node, prev, nxt, prev_link: list | None = None) -> None:
        """Put *node* between *prev* and *nxt* (*prev_link*: prev's entry, when known)."""
        links = self._links
        if node in links:
            raise GraphError(f"node {node.name!r} is already in this graph")
        if not isinstance(node, Node):
            raise TypeError(f"a graph holds Node objects, got {node!r}")
        links[node] = [prev, nxt]
        (links[prev] if prev_link is None else prev_link)[1] = node
        links[nxt][0] = node
        self._cache = None
        names = self._names
        if names is not None and names.setdefault(node._name, node) is not node:
            self._dup_names = True

    def _unlink(self, node: Node) -> None:
        links = self._links
        prev, nxt = links.pop(node)
        links[prev][1] = nxt
        links[nxt][0] = prev
        self._cache = None
        names = self._names
        if names is not None and names.get(node.name) is node:
            del names[node.name]
            if self._dup_names:  # another node may carry the name: rebuild on demand
                self._names = None

    def _reset(self, nodes: Iterable[Node]) -> None:
        fresh = NodeList(nodes)
        self._links, self._cache = fresh._links, fresh._cache
        self._names = None

    def _anchor(self, anchor: Node) -> list:
        link = self._links.get(anchor) if anchor is not _END else None
        if link is None:
            raise GraphError(f"node {getattr(anchor, 'name', anchor)!r} is not in this graph")
        return link

    def insert_before(self, anchor: Node, node: Node) -> Node:
        """Insert *node* just before *anchor* (O(1))."""
        self._link(node, self._anchor(anchor)[0], anchor)
        return node

    def insert_after(self, anchor: Node, node: Node) -> Node:
        """Insert *node* just after *anchor* (O(1))."""
        link = self._anchor(anchor)
        self._link(node, anchor, link[1], link)
        return node

    def next_of(self, node: Node) -> Node | None:
        """The node after *node* (None at the end)."""
        nxt = self._anchor(node)[1]
        return None if nxt is _END else nxt

    def prev_of(self, node: Node) -> Node | None:
        """The node before *node* (None at the start)."""
        prev = self._anchor(node)[0]
        return None if prev is _END else prev

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
            append, links = cache.append, self._links
            n = links[_END][1]
            while n is not _END:
                append(n)
                n = links[n][1]
            self._cache = cache
        return cache

    def __len__(self) -> int:
        return len(self._links) - 1

    def __contains__(self, node) -> bool:
        try:
            return node is not _END and node in self._links
        except TypeError:  # unhashable: cannot be a node
            return False

    def __iter__(self) -> Iterator[Node]:
        return iter(self._list())

    def __reversed__(self) -> Iterator[Node]:
        return reversed(self._list())

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> list[Node]: ...

    def __getitem__(self, i):
        if self._cache is None and len(self):
            if i == 0:
                return self._links[_END][1]
            if i == -1:
                return self._links[_END][0]
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
        if i == 0:
            self._link(node, _END, self._links[_END][1])
        elif i >= n:
            self._link(node, self._links[_END][0], _END)
        else:
            self.insert_before(self._list()[i], node)

    def append(self, node: Node) -> None:
        self._link(node, self._links[_END][0], _END)

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
