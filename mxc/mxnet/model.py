"""``mx.model``: checkpoints (``prefix-symbol.json`` + ``prefix-%04d.params``)."""

from __future__ import annotations

import logging

import numpy as np

from .. import model as _model
from ..errors import MxcError
from .base import mxnet_error
from .ndarray import NDArray
from .symbol import Symbol, _wrap

__all__ = ["load_checkpoint", "save_checkpoint"]

_log = logging.getLogger("mxc.mxnet")


def load_checkpoint(prefix: str, epoch: int) -> tuple[Symbol, dict, dict]:
    """``(symbol, arg_params, aux_params)`` with NDArray values."""
    try:
        sym, arg, aux = _model.load_checkpoint(prefix, epoch)
    except MxcError as exc:
        raise mxnet_error(exc) from exc
    return (_wrap(sym), {k: NDArray(np.asarray(v)) for k, v in arg.items()},
            {k: NDArray(np.asarray(v)) for k, v in aux.items()})


def save_checkpoint(prefix: str, epoch: int, symbol: Symbol, arg_params: dict,
                    aux_params: dict, remove_amp_cast: bool = True) -> None:
    def raw(params):
        return {k: (v._data if isinstance(v, NDArray) else np.asarray(v))
                for k, v in params.items()}
    _model.save_checkpoint(prefix, epoch, symbol, raw(arg_params), raw(aux_params))
    _log.info('Saved checkpoint to "%s-%04d.params"', prefix, epoch)
