"""The Triton Python-backend model that runs an ``.mxc`` artifact (copied as ``model.py``).

``mxc export triton`` copies this file, unchanged, next to the artifact::

    model_repository/NAME/config.pbtxt
    model_repository/NAME/1/model.py      <- this file
    model_repository/NAME/1/model.mxc

Triton's Python backend imports it and calls :class:`TritonPythonModel`;
``triton_python_backend_utils`` exists only inside that backend.  The
artifact runs with :mod:`mxc.runtime` (install mxc in the backend's Python
environment).  With dynamic batching Triton hands several requests to one
``execute``: they are concatenated along the batch dimension, run once, and
the outputs are split back per request (:mod:`mxc.runtime.batching`, as
``mxc serve``'s batcher does).  Set
``MXC_VERIFY_KEY`` to a public key file to load only signed artifacts.

numpy 2 is refused where the stub predates it.  The stubs of Triton 2.51 (the
``nvidia-pytriton`` 0.7 wheel) are built with a pybind11 older than 2.12, which
reads numpy 1's dtype struct: under numpy 2 it takes every item size as 0, so
``as_numpy()`` reads each input with stride 0 (every element the first one) and
``pb_utils.Tensor(name, array)`` sends an empty buffer (Triton then answers
"output tensor shape does not match size of output").  Their DLPack path is no
way around it: it renames the consumed capsule ``used_dlpack``, which numpy's
capsule destructor rejects (an "Exception ignored" per output with numpy 2; the
stub stops answering with numpy 1.26).  A stub built with pybind11 >= 2.12
names ``numpy._core`` in its binary; one that does not cannot serve numpy 2.

Triton's Python-backend stub does not pass ``PYTHONPATH`` on to the model, so
where mxc and numpy live is read from the model config's ``MXC_PYTHONPATH``
parameter (``mxc export triton --python-path``) and added to ``sys.path``
before either is imported.
"""

from __future__ import annotations

import json
import os
import sys


def _extend_path(config: dict) -> None:
    entry = (config.get("parameters") or {}).get("MXC_PYTHONPATH") or {}
    for path in reversed(str(entry.get("string_value", "")).split(os.pathsep)):
        if path and path not in sys.path:
            sys.path.insert(0, path)


def _utils():
    import triton_python_backend_utils as pb_utils  # provided by Triton's Python backend
    return pb_utils


def stub_reads_numpy2(exe: str) -> bool | None:
    """Whether the stub binary *exe* was built with a pybind11 that knows numpy 2
    (pybind11 >= 2.12 imports ``numpy._core`` under numpy 2); None if unreadable or
    not a stub (the model imported by another host, such as a test)."""
    if os.path.basename(os.path.realpath(exe)) != "triton_python_backend_stub":
        return None
    try:
        with open(exe, "rb") as f:
            return b"numpy._core" in f.read()
    except OSError:
        return None


def check_numpy(numpy_version: str, exe: str = "/proc/self/exe") -> None:
    """Refuse numpy >= 2 inside a stub that would garble every tensor (see the module's note)."""
    if int(numpy_version.split(".")[0]) < 2 or stub_reads_numpy2(exe) is not False:
        return
    from mxc.errors import DependencyError
    raise DependencyError(
        f"numpy {numpy_version} in Triton's Python-backend stub {os.path.realpath(exe)}: the stub "
        f"was built for numpy 1 (its pybind11 predates numpy 2) and would read every input with "
        f"stride 0 and send every output empty; install numpy<2 in the Python environment the "
        f"stub runs (the first python3 on tritonserver's PATH), or use a Triton release whose "
        f"stub supports numpy 2")


class TritonPythonModel:
    """Triton's entry points: ``initialize``, ``execute``, ``finalize``."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        _extend_path(config)
        import numpy
        check_numpy(numpy.__version__)
        import mxc.runtime
        here = os.path.join(args["model_repository"], args["model_version"])
        self.session = mxc.runtime.load(os.path.join(here, "model.mxc"),
                                        verify_key=os.environ.get("MXC_VERIFY_KEY") or None)
        self.inputs = [t.name for t in self.session.inputs]
        self.outputs = [t.name for t in self.session.outputs]
        self.batching = int(config.get("max_batch_size", 0)) > 0

    def execute(self, requests):
        import numpy as np
        pb_utils = _utils()
        # Triton's tensors are read-only views of its shared memory: the runtime
        # stages read-only inputs itself
        feeds = [{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs}
                 for r in requests]
        if self.batching and len(feeds) > 1:
            from mxc.runtime.batching import concat, request_batch, split
            outs = self.session.run(concat(feeds))
            per_request = split(outs, [request_batch(f) for f in feeds])
        else:
            per_request = [self.session.run(f) for f in feeds]
        return [pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor(n, np.ascontiguousarray(o)) for n, o in zip(self.outputs, outs)])
                for outs in per_request]

    def finalize(self):
        self.session = None
