"""``mx.library.load``: load an extension library, with MXNet's path checks.

MXNet's Python ``load`` refuses a path that does not exist, is not absolute,
or does not name a shared library (``.so``, ``.dll``, ``.dylib``) before the
library is opened; the rest (opening it, checking its lib_api version,
``initialize``, registering its operators, partitioners and passes, the
verbose report) is :func:`mxc.library.load`.  Errors are
:class:`~mxc.mxnet.base.MXNetError`.

Which libraries load: by default every lib_api version mxc supports (7, 8,
10, 11), with ``initialize`` receiving MXNet 1.9.1's version number.  A real
MXNet release accepts only its own lib_api version and passes its own
number; :func:`emulate` (or the environment variable
``MXC_MXNET_EMULATE=1.7.0``) makes ``load`` behave as that release does,
refusal of other versions included.
"""

from __future__ import annotations

import os

from ..errors import MxcError
from .base import RELEASES, MXNetError, emulate, emulated, mxnet_error

__all__ = ["load", "emulate", "emulated", "compiled_with_gcc_cxx11_abi"]

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
    options = {}
    release = emulated()
    if release is not None:
        number, lib_api = RELEASES[release]
        options = {"mxnet_version": number, "lib_api_versions": (lib_api,)}
    try:
        library.load(path, verbose=verbose, **options)
    except MxcError as exc:
        raise mxnet_error(exc) from exc


def compiled_with_gcc_cxx11_abi() -> int:
    """MXNet asks this to pick the ABI of libraries it builds; mxc has no C++ ABI: 1."""
    return 1
