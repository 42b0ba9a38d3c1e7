"""MXNet operator definitions, one module per family.

Importing :mod:`mxc.compiler.ops` registers nothing by itself; the registry
imports every family module on first lookup (:mod:`._load_all`), so adding a
family is adding a file.
"""

from .registry import (REQUIRED, Attr, ForwardContext, OpDef, Params, check_supported, get_op,
                       has_op, register_op, registered_ops)

__all__ = ["REQUIRED", "Attr", "ForwardContext", "OpDef", "Params", "check_supported", "get_op",
           "has_op", "register_op", "registered_ops"]
