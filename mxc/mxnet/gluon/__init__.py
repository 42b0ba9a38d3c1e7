"""``mx.gluon``: ``nn.SymbolBlock`` and its parameters."""

from __future__ import annotations

from . import nn
from .block import Block, HybridBlock, SymbolBlock
from .parameter import DeferredInitializationError, Parameter, ParameterDict

__all__ = ["nn", "Block", "HybridBlock", "SymbolBlock", "Parameter", "ParameterDict",
           "DeferredInitializationError"]
