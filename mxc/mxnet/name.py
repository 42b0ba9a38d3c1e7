"""``mx.name``: automatic node names (``exp0``, ``_plus1``) and their scopes.

The manager is mxc's own (:class:`mxc.symbol.NameManager`), so
``with mx.name.NameManager():`` restarts the counters of every builder, and
:class:`Prefix` prepends a string to every generated name, as in MXNet.
"""

from __future__ import annotations

from ..symbol import NameManager

__all__ = ["NameManager", "Prefix", "current"]


class Prefix(NameManager):
    """``with mx.name.Prefix('net_'):`` names nodes ``net_exp0``, ..."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint) if not name else name


def current() -> NameManager:
    return NameManager.current()
