"""MXNet operator definitions, one module per family.

Importing :mod:`mxc.compiler.ops` registers nothing by itself; the registry
imports every family module (each public module of this package) on first
lookup (:func:`mxc.registry.builtin_modules`), so adding a family is adding a
file.
"""

from .registry import (REQUIRED, Attr, ForwardContext, OpDef, Params, check_supported, get_op,
                       has_op, register_op, registered_ops)

__all__ = ["REQUIRED", "Attr", "ForwardContext", "OpDef", "Params", "check_supported", "get_op",
           "has_op", "register_op", "registered_ops"]
