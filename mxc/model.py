"""Checkpoints: ``prefix-symbol.json`` + ``prefix-%04d.params``, as MXNet writes them."""

from __future__ import annotations

import os

import numpy as np

from .symbol import Symbol, load
from .frontend.params import load_params, save_params, split_arg_aux

__all__ = ["load_checkpoint", "save_checkpoint"]


def load_checkpoint(prefix: str | os.PathLike, epoch: int
                    ) -> tuple[Symbol, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(symbol, arg_params, aux_params)`` like ``mx.model.load_checkpoint``."""
    sym = load(f"{prefix}-symbol.json")
    params = load_params(f"{prefix}-{epoch:04d}.params")
    arg, aux = split_arg_aux(params if isinstance(params, dict) else {})
    return sym, arg, aux


def save_checkpoint(prefix: str | os.PathLike, epoch: int, symbol: Symbol,
                    arg_params: dict[str, np.ndarray], aux_params: dict[str, np.ndarray]) -> None:
    symbol.save(f"{prefix}-symbol.json")
    data = {f"arg:{k}": v for k, v in arg_params.items()}
    data.update({f"aux:{k}": v for k, v in aux_params.items()})
    save_params(f"{prefix}-{epoch:04d}.params", data)
