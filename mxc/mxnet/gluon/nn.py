"""``gluon.nn``: :class:`SymbolBlock` (layers defined in Python are not provided)."""

from __future__ import annotations

from ..base import not_supported
from .block import Block, HybridBlock, SymbolBlock

__all__ = ["Block", "HybridBlock", "SymbolBlock"]


def __getattr__(name: str):
    if name[:1].isupper():
        raise not_supported(f"gluon.nn.{name} (Gluon layers defined in Python); load the model "
                            f"as a symbol and use gluon.nn.SymbolBlock")
    raise AttributeError(f"module 'mxc.mxnet.gluon.nn' has no attribute {name!r}")
