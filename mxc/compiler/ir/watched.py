"""A node's attribute dict and lists that report every in-place change to their node.

Inferred types are cached on the graph (:mod:`.types`) and must be dropped
whenever anything they were computed from changes.  Passes edit nodes in
place -- ``node.attrs["axis"] = "1"``, ``node.subgraphs[0] = g`` -- so the
node cannot learn of an edit from its own setters alone: these containers
tell it (:meth:`Node._edited`) on every mutating call.  Reads are the plain
``dict``/``list`` ones, so lookups cost what they did before.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol


class Node(Protocol):
    """What a watched container needs of its node (:class:`.node.Node`); not imported,
    so this module stays below ``node.py``."""

    def _edited(self) -> None: ...

__all__ = ["WatchedDict", "WatchedList", "watched_attribute"]


def _reporting(base: type, name: str) -> Callable:
    method = getattr(base, name)

    def mutate(self, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        node = getattr(self, "_node", None)  # unset while a copy is being rebuilt
        if node is not None:
            node._edited()
        return result

    mutate.__name__ = name
    mutate.__doc__ = method.__doc__
    return mutate


def _watched_type(base: type, mutators: tuple[str, ...], doc: str) -> type:
    """A subclass of *base* whose *mutators* report to the node given to its constructor."""
    def __init__(self, node: "Node | None", items: Any = ()) -> None:
        base.__init__(self, items)
        self._node = node

    namespace: dict[str, Any] = {"__slots__": ("_node",), "__doc__": doc,
                                 "__init__": __init__, "__module__": __name__}
    namespace.update({name: _reporting(base, name) for name in mutators})
    return type(f"Watched{base.__name__.capitalize()}", (base,), namespace)


WatchedDict = _watched_type(
    dict, ("__setitem__", "__delitem__", "__ior__", "clear", "pop", "popitem", "setdefault",
           "update"),
    "``Node.attrs``: a dict that reports each change to its node.")
WatchedList = _watched_type(
    list, ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend", "insert",
           "pop", "remove", "clear", "reverse", "sort"),
    "``Node.subgraphs`` and ``Node.control_deps``: a list that reports each change.")


class watched_attribute:  # noqa: N801 - used like ``property``
    """A node attribute kept in a watched container (slot ``_<name>``).

    Reading returns the container; assigning any iterable wraps it in a new
    one and reports the edit, so both ``node.attrs = {...}`` and
    ``node.attrs[k] = v`` are seen.
    """

    def __init__(self, container: type, doc: str):
        self.container = container
        self.__doc__ = doc
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, node: Any, owner: type | None = None) -> Any:
        if node is None:
            return self
        return getattr(node, self.slot)

    def __set__(self, node: "Node", value: Any) -> None:
        setattr(node, self.slot, self.container(node, value))
        node._edited()
