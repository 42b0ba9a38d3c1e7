"""The mxc runtime: load an ``.mxc`` artifact and run it.

::

    import mxc.runtime
    sess = mxc.runtime.load("model.mxc")
    print(sess.inputs)          # [TensorInfo(name='data', shape=(4, 784), dtype='float32')]
    probs = sess.run({"data": x})[0]
    outs, prof = sess.run({"data": x}, profile=True)
    print(prof)                 # time per compiled region / host node

The runtime is small on purpose.  Its imports are numpy, the standard
library and ``tvm_ffi`` with TVM's C++ runtime library (``libtvm_runtime``,
loaded directly): running an artifact whose graph is fully compiled imports
neither the ``tvm`` Python package (no compiler, no Relax) nor mxc's
frontend or compiler.  Host-fallback nodes are the exception: an artifact
with host nodes imports the op definitions of :mod:`mxc.compiler.ops` for
their reference kernels when it is loaded (see :mod:`mxc.runtime.host`).

* :func:`load` -- verify and load an artifact, returning a :class:`Session`
  (loading runs the artifact's native code: ``verify_key=`` accepts only
  artifacts signed with a trusted key, see :mod:`mxc.runtime.signing`);
* :class:`Session` -- ``run(feeds)``, ``inputs``/``outputs`` metadata,
  thread-safe, ``profile=True`` for per-step times; ``check_feeds(feeds)`` checks
  feeds once for callers that hand them on (:mod:`mxc.runtime.feeds`; batches are
  joined and split by :mod:`mxc.runtime.batching`);
* :func:`InferenceSession` -- ONNX Runtime's constructor (a path or an artifact's
  bytes, ``providers=[...]``, a :class:`SessionOptions`), with
  :func:`get_available_providers`; sessions also take ORT's ``run(None, feeds)``,
  ``get_inputs()``, ``.type``, ``get_modelmeta()`` (see :mod:`mxc.runtime.ort`);
* :func:`has_cuda` -- whether this machine can run CUDA artifacts (never raises);
* :func:`read_manifest`, :func:`is_artifact` -- look at a file without loading it.
"""

from __future__ import annotations

from ._tvm import has_cuda
from .artifact import FORMAT_VERSION, is_artifact, read_manifest
from .session import Profile, Session, StepTime, TensorInfo, load


#: ONNX Runtime's names, imported from :mod:`mxc.runtime.ort` when first used
_ORT_NAMES = ("InferenceSession", "SessionOptions", "get_available_providers",
              "GraphOptimizationLevel", "ExecutionMode", "ModelMetadata")


def __getattr__(name: str):
    """ONNX Runtime's names (``InferenceSession`` ...) are imported when first used."""
    if name in _ORT_NAMES:
        from . import ort
        return getattr(ort, name)
    raise AttributeError(f"module 'mxc.runtime' has no attribute {name!r}")

__all__ = ["load", "Session", "TensorInfo", "Profile", "StepTime", "has_cuda", "is_artifact",
           "read_manifest", "FORMAT_VERSION", *_ORT_NAMES]
