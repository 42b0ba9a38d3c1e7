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
the outputs are split back per request, as ``mxc serve`` does.  Set
``MXC_VERIFY_KEY`` to a public key file to load only signed artifacts.

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


class TritonPythonModel:
    """Triton's entry points: ``initialize``, ``execute``, ``finalize``."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        _extend_path(config)
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
            sizes = [len(f[self.inputs[0]]) for f in feeds]
            outs = self.session.run({n: np.concatenate([f[n] for f in feeds]) for n in self.inputs})
            bounds = np.cumsum([0] + sizes)
            per_request = [[o[a:b] for o in outs] for a, b in zip(bounds[:-1], bounds[1:])]
        else:
            per_request = [self.session.run(f) for f in feeds]
        return [pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor(n, np.ascontiguousarray(o)) for n, o in zip(self.outputs, outs)])
                for outs in per_request]

    def finalize(self):
        self.session = None
