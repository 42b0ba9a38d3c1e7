"""mxc: an ahead-of-time compiler for Apache MXNet models, built on Apache TVM.

Quick tour::

    import mxc
    sym, args, aux = mxc.load_checkpoint("examples/mlp/mlp", 0)
    exe = sym.bind(args={**args, "data": x}, aux_states=aux)
    out = exe.forward()[0]
"""

from __future__ import annotations

from . import errors, nd, sym
from .errors import MxcError
from .model import load_checkpoint, save_checkpoint
from .compiler.custom_op import CustomOp, register_custom_op
from .compiler.partition import (SubgraphProperty, SubgraphSelector, register_partitioner,
                                 register_subgraph_property)
from .passes import register_pass, rewrite
from . import library

__version__ = "0.1.0"

__all__ = [
    "errors", "nd", "sym", "library", "MxcError", "load_checkpoint", "save_checkpoint",
    "register_custom_op", "CustomOp", "register_partitioner", "register_subgraph_property",
    "SubgraphProperty", "SubgraphSelector", "register_pass", "rewrite", "__version__",
]
