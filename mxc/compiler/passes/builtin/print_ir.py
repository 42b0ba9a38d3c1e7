"""``print-ir``: print the graph (like the ``myPass`` example of MXNet's lib_pass)."""

from __future__ import annotations

import sys

from ...ir.text import print_graph
from ..registry import Option, register_pass


@register_pass("print-ir", options={
    "label": Option(str, "", "a comment line printed before the graph"),
})
def print_ir(graph, ctx):
    """Print the graph in the textual IR to stderr (as mlir-opt prints its IR dumps: stdout
    may be the pipeline's output, ``mxc opt ... -o -``); the graph is unchanged."""
    if ctx["label"]:
        print(f"// {ctx['label']}", file=sys.stderr)
    print(print_graph(graph), file=sys.stderr)
