"""Serving ``.mxc`` artifacts on existing engines: KServe's ModelServer, Triton, Ray.

This package sits *above* the runtime: it imports :mod:`mxc.runtime`, and
nothing in the runtime, backends or compiler imports it (see
``tools/import_graph.py``).  Its dependencies are the ``[serve]`` extra
(``kserve``, ``tritonclient``) and the ``[ray]`` extra (``ray[serve]``), imported only by the modules
that need them, so ``import mxc.serving`` and the batcher work without it.

* :mod:`mxc.serving.server` -- ``mxc serve``: the V2 protocol over REST and gRPC;
* :mod:`mxc.serving.model` -- one artifact as a ``kserve.Model``;
* :mod:`mxc.serving.batcher` -- adaptive batching over a session's batch range;
* :mod:`mxc.serving.repository` -- model repositories and reloading;
* :mod:`mxc.serving.metrics` -- Prometheus metrics;
* :mod:`mxc.serving.ray_serve` -- ``mxc serve --ray``: the models as Ray Serve deployments;
* :mod:`mxc.serving.triton` -- ``mxc export triton``.
"""
