"""mxc: an ahead-of-time compiler for Apache MXNet models, built on Apache TVM.

Quick tour::

    import mxc
    sym, args, aux = mxc.load_checkpoint("examples/mlp/mlp", 0)
    exe = sym.bind(args={**args, "data": x}, aux_states=aux)
    out = exe.forward()[0]

The package imports its parts lazily (PEP 562): ``import mxc.runtime`` in a
deployment loads the small runtime alone, not the frontend, lark or the
compiler.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import MxcError

__version__ = "0.1.0"

# public name -> (module, attribute or None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "errors": ("mxc.errors", None),
    "nd": ("mxc.nd", None),
    "sym": ("mxc.sym", None),
    "library": ("mxc.library", None),
    "passes": ("mxc.passes", None),
    "runtime": ("mxc.runtime", None),
    "load_checkpoint": ("mxc.model", "load_checkpoint"),
    "save_checkpoint": ("mxc.model", "save_checkpoint"),
    "CustomOp": ("mxc.compiler.custom_op", "CustomOp"),
    "register_custom_op": ("mxc.compiler.custom_op", "register_custom_op"),
    "SubgraphProperty": ("mxc.compiler.partition", "SubgraphProperty"),
    "SubgraphSelector": ("mxc.compiler.partition", "SubgraphSelector"),
    "register_partitioner": ("mxc.compiler.partition", "register_partitioner"),
    "register_subgraph_property": ("mxc.compiler.partition", "register_subgraph_property"),
    "register_pass": ("mxc.passes", "register_pass"),
    "rewrite": ("mxc.passes", "rewrite"),
    "compile": ("mxc.backends.tvm.compile", "compile"),
}

__all__ = ["MxcError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mxc' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
