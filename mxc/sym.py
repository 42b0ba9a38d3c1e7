"""``mxc.sym``: build and load symbols the way MXNet's ``mx.sym`` does.

Every registered operator is available as a builder generated from the op
registry (``mxc.sym.Convolution(data=x, kernel=(3, 3), num_filter=8)``,
``mxc.sym.exp(x)``); inputs a builder is not given become variables named
``<node>_<input>`` as in MXNet.
"""

from __future__ import annotations

from .compiler.ops.registry import OPS, has_op, registered_ops
from .symbol import (Group, NameManager, Symbol, Variable, builder, create, load,
                              load_json, var)

__all__ = ["Symbol", "NameManager", "var", "Variable", "Group", "load", "load_json", "create"]


def __getattr__(name: str):
    if not name.startswith("__") and has_op(name):
        fn = builder(name)
        globals()[name] = fn  # cache: later lookups skip __getattr__
        return fn
    raise AttributeError(f"module 'mxc.sym' has no attribute {name!r} (no such operator is "
                         f"registered)")


def __dir__():
    return sorted(set(__all__) | set(registered_ops()))


def _forget_builder(name: str, old, new) -> None:
    """Operator *name* was registered, replaced or removed: its cached builder is stale
    (it is made again from the registry on next use)."""
    cached = globals().get(name)
    if callable(cached) and getattr(cached, "__name__", None) == name and name not in __all__:
        del globals()[name]


OPS.subscribe(_forget_builder)
