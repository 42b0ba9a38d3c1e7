"""V2 paths and the binary-extension question, answered in one place
(``mxc.serving.requests``; issue 36): the infer route, the version rewrite and the
data plane all ask these functions.  Importing ``mxc.serving.requests`` imports no
kserve (its gRPC protos clash with tritonclient's in one pytest process).

Oracle: the V2 protocol's URL forms written out by hand, and the rewritten paths
``mxc.serving.asgi_guards.v2_compat`` hands on, observed by an inner ASGI app.
"""

from __future__ import annotations

import asyncio

import pytest

from mxc.serving.asgi_guards import v2_compat
from mxc.serving.requests import MODEL_PATH_KEY, binary_header_length, model_path


@pytest.mark.parametrize("path, want", [
    ("/v2/models/mlp/infer", ("mlp", "infer")),
    ("/v2/models/mlp/versions/2/infer", ("mlp@2", "infer")),
    ("/v2/models/mlp/versions/2", ("mlp@2", "")),
    ("/v2/models/mlp/ready", ("mlp", "ready")),
    ("/v2/models/mlp", ("mlp", "")),
    ("/v2/models/", None),
    ("/v2/models", None),
    ("/v2/health/ready", None),
    ("/v1/models/mlp:predict", None),
])
def test_model_path(path, want):
    assert model_path(path) == want


def test_binary_requests_are_told_by_their_header_alone():
    assert binary_header_length({"inference-header-content-length": "12"}) == "12"
    assert binary_header_length({"content-type": "application/octet-stream"}) is None


@pytest.mark.parametrize("path, rewritten, parsed", [
    ("/v2/models/mlp/versions/2/infer", "/v2/models/mlp@2/infer", ("mlp@2", "infer")),
    ("/v2/models/mlp/versions/2/", "/v2/models/mlp@2/", ("mlp@2", "")),
    ("/v2/models/mlp/versions/2", "/v2/models/mlp@2", ("mlp@2", "")),
    ("/v2/models/mlp/infer", "/v2/models/mlp/infer", ("mlp", "infer")),
    ("/v2/health/live", "/v2/health/live", None),
])
def test_the_version_rewrite_parses_the_path_once_for_the_layers_inside(path, rewritten, parsed):
    seen = {}

    async def inner(scope, receive, send):
        seen.update(scope)
    scope = {"type": "http", "path": path, "raw_path": path.encode()}
    asyncio.run(v2_compat(inner)(scope, None, None))
    assert seen["path"] == rewritten and seen["raw_path"] == rewritten.encode()
    assert seen.get(MODEL_PATH_KEY) == parsed
