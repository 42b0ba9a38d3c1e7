"""``mx.library.load``: load an extension library, with MXNet's path checks.

MXNet's Python ``load`` refuses a path that does not exist, is not absolute,
or does not name a shared library (``.so``, ``.dll``, ``.dylib``) before the
library is opened; the rest (opening it, checking its lib_api version,
``initialize``, registering its operators, partitioners and passes, the
verbose report) is :func:`mxc.library.load`.  Errors are
:class:`~mxc.mxnet.base.MXNetError`.
"""

from __future__ import annotations

import os

from ..errors import MxcError
from .base import MXNetError, mxnet_error

__all__ = ["load", "compiled_with_gcc_cxx11_abi"]

_LIBRARY_SUFFIXES = (".so", ".dll", ".dylib")


def load(path: str, verbose: bool = True) -> None:
    """Load the library at *path* (absolute) and register what it provides."""
    if not os.path.exists(path):
        raise MXNetError(f"load path {path} does NOT exist")
    if not os.path.isabs(path):
        raise MXNetError(f"load path {path} is not an absolute path")
    if not os.path.splitext(path)[1] in _LIBRARY_SUFFIXES:
        raise MXNetError(f"load path {path} is NOT a library file")
    from .. import library
    try:
        library.load(path, verbose=verbose)
    except MxcError as exc:
        raise mxnet_error(exc) from exc


def compiled_with_gcc_cxx11_abi() -> int:
    """MXNet asks this to pick the ABI of libraries it builds; mxc has no C++ ABI: 1."""
    return 1
