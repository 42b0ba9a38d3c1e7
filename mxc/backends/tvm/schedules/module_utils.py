"""Small helpers the CPU pipeline's passes share: static tensor types, function rewrites."""

from __future__ import annotations

from typing import Callable

import tvm
from tvm import relax


def static_shape(expr) -> tuple[int, ...] | None:
    """The static shape of a Relax tensor expression, else None (unknown or symbolic)."""
    sinfo = getattr(expr, "ty", None)
    if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
        return None
    try:
        return tuple(int(d) for d in sinfo.shape)
    except (TypeError, ValueError):
        return None


def tensor_dtype(expr) -> str | None:
    """The dtype of a Relax tensor expression, else None."""
    sinfo = getattr(expr, "ty", None)
    return str(sinfo.dtype) if isinstance(sinfo, relax.TensorType) else None


def rewrite_functions(mod: tvm.IRModule, rewrite: Callable) -> tvm.IRModule:
    """*mod* with every function ``rewrite(gv, func)`` returns a replacement for (None:
    unchanged) replaced; *mod* itself when nothing changes."""
    updates = {}
    for gv, func in mod.functions_items():
        new = rewrite(gv, func)
        if new is not None:
            updates[gv] = new
    if not updates:
        return mod
    mod = mod.clone()
    for gv, func in updates.items():
        mod.update_func(gv, func)
    return mod
