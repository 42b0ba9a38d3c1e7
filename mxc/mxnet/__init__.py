"""``mxc.mxnet``: the MXNet 1.x Python API on mxc.

Scripts written for MXNet run with one changed line::

    import mxc.mxnet as mx

    sym, arg_params, aux_params = mx.model.load_checkpoint("model", 0)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 3, 224, 224))], for_training=False)
    mod.set_params(arg_params, aux_params)

What is here: ``mx.nd`` (NDArray over numpy, every registered operator as a
function, CSR/row-sparse arrays), ``mx.sym`` (mxc's Symbol with executors that
run backward), ``mx.autograd``, contexts, ``mx.name``, ``mx.random.seed``,
``mx.library.load`` (extension libraries), ``mx.model`` checkpoints,
``mx.mod.Module`` for inference, Gluon's ``nn.SymbolBlock`` and MXNet's
Python custom-operator API (``mx.operator``).  What is not (training
optimizers, Python-defined Gluon layers, GPUs, kvstore) raises
:class:`~mxc.mxnet.base.NotSupportedError` naming the feature.

Everything runs on the reference backend (numpy) or in the loaded libraries;
``mxc.compile`` compiles the same symbols ahead of time.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import base
from .base import MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus

__version__ = "1.9.1"

_LAZY = {
    "nd": "mxc.mxnet.ndarray", "ndarray": "mxc.mxnet.ndarray",
    "sym": "mxc.mxnet.symbol", "symbol": "mxc.mxnet.symbol",
    "autograd": "mxc.mxnet.autograd", "name": "mxc.mxnet.name",
    "random": "mxc.mxnet.random", "rnd": "mxc.mxnet.random",
    "library": "mxc.mxnet.library", "model": "mxc.mxnet.model",
    "mod": "mxc.mxnet.module", "module": "mxc.mxnet.module",
    "gluon": "mxc.mxnet.gluon", "operator": "mxc.mxnet.operator",
    "init": "mxc.mxnet.initializer", "initializer": "mxc.mxnet.initializer",
    "io": "mxc.mxnet.io", "executor": "mxc.mxnet.executor", "context": "mxc.mxnet.context",
}

__all__ = ["MXNetError", "Context", "cpu", "gpu", "cpu_pinned", "current_context",
           "num_gpus", "base", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mxc.mxnet' has no attribute {name!r}")
    value = importlib.import_module(module)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
