"""``mxc.nd``: MXNet's NDArray file functions, on numpy arrays."""

from __future__ import annotations

import os

import numpy as np

from .frontend.params import load_params, save_params

__all__ = ["load", "save", "array"]


def load(path: str | os.PathLike):
    """Read an MXNet ``.params``/NDArray file: a dict (named) or a list of arrays."""
    return load_params(path)


def save(path: str | os.PathLike, data) -> None:
    """Write arrays in MXNet's NDArray-list format (byte-identical to MXNet)."""
    save_params(path, data)


def array(values, dtype=None) -> np.ndarray:
    """mxc's NDArray is a numpy array; default dtype float32 as in MXNet."""
    return np.asarray(values, dtype=dtype if dtype is not None else np.float32)
