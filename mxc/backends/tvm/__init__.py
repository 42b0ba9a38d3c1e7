"""mxc's TVM backend: lower mxc graphs to TVM Relax, compile and run them.

This is the only package of mxc that imports :mod:`tvm`, and it does so
lazily: importing :mod:`mxc.backends.tvm` is free, the names below load
their module (and TVM) on first use.

* :func:`lower_graph` -- a graph (with shapes/dtypes, optionally its params)
  to a shape-specialised Relax ``IRModule`` whose ``main`` returns a tuple of
  the graph outputs; :class:`ModuleBuilder` puts several graphs into one
  module (one Relax function each) so they compile together.
* :func:`unsupported_nodes` / :func:`is_supported` -- which nodes the backend
  can lower (and why not), for the partitioner's ``tvm`` property.
* :func:`register_converter` / :class:`Lowering` -- the converter registry;
  one converter per MXNet operator, grouped by family in
  ``mxc/backends/tvm/ops/<family>.py`` mirroring ``mxc/compiler/ops/``.
* :func:`lower_model` (``lower.py``) -- a model through passes, partitioning and
  lowering to the one ``IRModule`` :func:`mxc.compile` builds and ``mxc tune`` tunes;
  :class:`CompileOptions` / :class:`TuneOptions` (``options.py``) -- their settings.
* :func:`build_module` (``build.py``) and :func:`run_module` (``run.py``).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "lower_graph": "converter",
    "ModuleBuilder": "converter",
    "FunctionInfo": "converter",
    "Lowering": "converter",
    "register_converter": "converter",
    "get_converter": "converter",
    "registered_converters": "converter",
    "register_host_only": "converter",
    "host_only_ops": "converter",
    "unsupported_nodes": "converter",
    "is_supported": "converter",
    "support_reason": "converter",
    "function_input_names": "converter",
    "lower_model": "lower",
    "LoweredModel": "lower",
    "CompileOptions": "options",
    "TuneOptions": "options",
    "build_module": "build",
    "host_target": "build",
    "resolve_target": "build",
    "run_module": "run",
    "load_vm": "run",
}

__all__ = [
    "CompileOptions",
    "FunctionInfo",
    "LoweredModel",
    "Lowering",
    "ModuleBuilder",
    "TuneOptions",
    "build_module",
    "function_input_names",
    "get_converter",
    "host_only_ops",
    "host_target",
    "is_supported",
    "load_vm",
    "lower_graph",
    "lower_model",
    "register_converter",
    "register_host_only",
    "registered_converters",
    "resolve_target",
    "run_module",
    "support_reason",
    "unsupported_nodes",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
