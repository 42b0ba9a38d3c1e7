"""MXNet attribute-value strings (re-export).

The codec moved to :mod:`mxc.compiler.ir.attrs`: the compiler's op schemas
parse attributes with it, and the compiler may not import the frontend.
"""

from ..compiler.ir.attrs import format_attr_value, parse_attr_value

__all__ = ["format_attr_value", "parse_attr_value"]
