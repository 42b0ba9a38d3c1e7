"""Compiled MXNet extension libraries (``lib_api.h``) driven from Python.

``mxc.library.load("libgemm_lib.so")`` lands here (:func:`.loader.load_native`).
The package is split by what crosses the C boundary:

* :mod:`.signatures` -- the per-version signature tables of the flat C entry points;
* :mod:`.abi` -- a library's entry points bound with those tables (through :mod:`.guard`,
  which catches C++ exceptions);
* :mod:`.handle` -- an opened library and its error reporting;
* :mod:`.marshal`, :mod:`.sparse` -- arrays (dense and sparse) and allocator callbacks;
* :mod:`.calls` -- the ``_opCall*`` trampolines with Python values;
* :mod:`.ops` -- library operators as mxc custom operators, and one-off calls;
* :mod:`.partitioners`, :mod:`.passes` -- library partitioners and graph passes;
* :mod:`.graph_json` -- graphs as the JSON the library reads and writes;
* :mod:`.loader` -- ``MXLoadLib``: validate, open, initialize, register, report.
"""

from .handle import NativeLibrary, sha256_of
from .loader import NATIVE_SUFFIXES, is_native_path, load_native, op_entry, open_library
from .ops import NativeState, invoke, invoke_backward
from .sparse import CSRArray, RowSparseArray

__all__ = ["NativeLibrary", "sha256_of", "NATIVE_SUFFIXES", "is_native_path", "load_native",
           "op_entry", "open_library", "NativeState", "invoke", "invoke_backward", "CSRArray",
           "RowSparseArray"]
