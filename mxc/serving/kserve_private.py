"""Every place mxc reaches past KServe 0.21's public API, in one module.

KServe is used through its extension points where they suffice: ``kserve.Model``
(``load``/``predict``), its ``ModelRepository``, ``DataPlane`` (subclassed to
decode binary bodies), ``RESTServer`` (which builds the REST app) and the gRPC
``InferenceServicer`` (subclassed).  ``ModelServer.start`` is not used: it binds
every interface and has no model versions (see :mod:`mxc.serving.server`).
Four things have no public way in KServe 0.21, and are done here only:

* :func:`import_kserve` -- ``kserve.model_server`` parses ``sys.argv`` when it is
  imported (its module-level ``args``), so it is imported with ``argv`` cut to the
  program name: mxc's own options would otherwise be read (or refused) by KServe;
* :func:`rest_app` -- ``RESTServer.create_application`` configures the FastAPI app
  that ``kserve.model_server`` creates at import (the module global ``app``, which
  it imports by the string ``"kserve.model_server:app"``) and returns nothing; the
  app is read from there, and KServe's ``TimingMiddleware`` (two log lines per
  request naming its path as sent, and time on every request) is taken out of
  its ``user_middleware``;
* :func:`hold_raw_input` -- a binary input's bytes are set as
  ``InferInput._raw_data``, what KServe's own ``InferRequest.from_bytes`` and
  ``InferRequest(raw_inputs=...)`` set: the public ways copy every element into
  a Python list (``from_bytes``) or mark the whole request as gRPC-raw
  (``raw_inputs``, which changes how the answer is encoded);
* :func:`answer_infer` -- the infer route (:mod:`mxc.serving.infer_route`)
  answers as KServe's ``V2Endpoints.infer`` does, with the same data-plane calls
  (``infer``, ``encode``) and response model.

``pyproject.toml`` admits kserve 0.21 only; ``tests/serving/dataplane_checks.py``
compares each of these with KServe's own behaviour (the app's routes, the
arrays ``InferRequest(raw_inputs=...)`` gives, KServe's answers to the same
requests).  kserve itself is imported inside the functions, so that importing
this module (through :mod:`mxc.serving.requests`) does not import kserve.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any


def import_kserve() -> None:
    """Import ``kserve`` without letting it read our command line (see the module docs)."""
    saved = sys.argv
    sys.argv = saved[:1]
    # KServe's REST routes answer through FastAPI's ORJSONResponse, which recent FastAPI
    # releases deprecate with a warning on a server's first request: KServe's to change,
    # not the user's, so it is not shown to them
    warnings.filterwarnings("ignore", message="ORJSONResponse is deprecated")
    try:
        import kserve  # noqa: F401
        import kserve.model_server  # noqa: F401
    except ImportError as exc:
        from ..errors import DependencyError
        raise DependencyError(f"mxc serve needs KServe: pip install 'mxc[serve]' ({exc})") from None
    finally:
        sys.argv = saved


def rest_app(dataplane: Any, control: Any, http_port: int, grace_seconds: float = 30.0):
    """KServe's FastAPI app with its V1/V2 routes, exception handlers and middlewares
    (less ``TimingMiddleware``), answering from *dataplane* and *control* (a
    ``ModelRepositoryExtension``); see the module docs."""
    from kserve.protocol.rest.server import RESTServer, TimingMiddleware
    RESTServer("kserve.model_server:app", dataplane, control, http_port,
               grace_period=int(grace_seconds)).create_application()
    from kserve.model_server import app
    app.user_middleware[:] = [m for m in app.user_middleware if m.cls is not TimingMiddleware]
    return app


def hold_raw_input(tensor: Any, raw: bytes) -> None:
    """Make KServe's ``InferInput`` *tensor* hold *raw* as its binary data, uncopied:
    ``tensor.as_numpy()`` then reads it with ``np.frombuffer`` (see the module docs)."""
    tensor._raw_data = raw


async def answer_infer(dataplane: Any, name: str, request: Any, headers: dict):
    """What KServe's ``V2Endpoints.infer`` answers (kserve 0.21), as a Starlette response."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.responses import ORJSONResponse, Response
    from kserve.protocol.rest.v2_datamodels import InferenceResponse

    response, response_headers = await dataplane.infer(model_name=name, request=request,
                                                       headers=headers)
    response, extra = dataplane.encode(model_name=name, response=response, headers=headers,
                                       req_attributes={})
    response_headers.update(extra)
    response_headers.pop("content-length", None)
    response_headers.pop("content-type", None)
    if isinstance(response, bytes):
        return Response(content=response, status_code=200, headers=response_headers)
    return ORJSONResponse(jsonable_encoder(InferenceResponse.model_validate(response)),
                          headers=response_headers)
