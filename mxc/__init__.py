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
from .passes import register_pass, rewrite
from .compiler.custom_op import CustomOp, register_custom_op  # also makes mxc.library available
from .backends.tvm.compile import compile  # noqa: A001 - imports TVM on first call only

__version__ = "0.1.0"

__all__ = ["errors", "nd", "sym", "MxcError", "load_checkpoint", "save_checkpoint", "__version__"]
