"""Model control: who may load and unload models while the server runs.

KServe's repository extension lets any client unload a model
(``POST /v2/repository/models/NAME/unload``, gRPC ``RepositoryModelUnload``),
and nothing brought it back: one request switched a model off for good.  As in
Triton, ``--model-control-mode`` decides:

* ``poll`` (the default): the repository folder is watched and reloaded as its
  files change (:class:`~mxc.serving.repository.RepositoryWatcher`); the load
  and unload requests are refused (403 / ``PERMISSION_DENIED``).  Whoever can
  change the files already controls the models; a network client does not.
* ``none``: what was loaded at start is served until exit; no polling, no
  control requests.
* ``explicit``: no polling; load and unload requests work, over REST and gRPC
  alike.  ``NAME@V`` is one version, ``NAME`` every version of the model (as
  Triton's model-level control); the plain name then serves the highest
  version still loaded.  An unload is undone by a load, which reads the file
  again.  With ``--control-token-file`` the requests must carry
  ``Authorization: Bearer TOKEN`` (gRPC: ``authorization`` metadata).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from typing import Any

from .errors import ControlRefused, RequestError, UnknownModel

log = logging.getLogger(__name__)

MODES = ("none", "poll", "explicit")


class ModelControl:
    """Stands where KServe's ``ModelRepositoryExtension`` stood (same ``index``,
    ``load``, ``unload``), with the mode's rules."""

    def __init__(self, mode: str, watcher: Any, registry: Any, token: str | None = None):
        if mode not in MODES:
            raise ValueError(f"model control mode {mode!r}: one of {', '.join(MODES)}")
        self.mode, self.watcher, self.registry, self.token = mode, watcher, registry, token
        self._lock = asyncio.Lock()

    def check_allowed(self, authorization: str | None) -> None:
        if self.mode != "explicit":
            raise ControlRefused(f"loading and unloading models is off (--model-control-mode "
                                 f"{self.mode}); start the server with --model-control-mode "
                                 f"explicit to allow it")
        if self.token is not None:
            given = (authorization or "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise ControlRefused("model control needs 'Authorization: Bearer <token>' "
                                     "(--control-token-file)", status=401)

    async def index(self, filter_ready: bool | None = False) -> list[dict[str, str]]:
        out = []
        for name in sorted(self.registry.get_models()):
            ready = await self.registry.is_model_ready(name)
            if ready or not filter_ready:
                out.append({"name": name, "state": "Ready" if ready else "NotReady", "reason": ""})
        return out

    async def load(self, model_name: str, authorization: str | None = None) -> dict:
        self.check_allowed(authorization)
        async with self._lock:
            keys = self._keys(model_name)
            self.watcher.disabled.difference_update(keys)
            for key in keys:
                self.watcher.forget_failure(key)
            await asyncio.get_running_loop().run_in_executor(None, self.watcher.sync)
            failed = [k for k in keys if self.watcher.failed(k)]
        if failed:
            raise RequestError(f"model {model_name!r}: could not be loaded (see the server's "
                               f"log)", status=409)
        log.info("model control: loaded %r", model_name)
        return {"name": model_name, "load": True}

    async def unload(self, model_name: str, authorization: str | None = None) -> dict:
        self.check_allowed(authorization)
        async with self._lock:
            keys = self._keys(model_name)
            self.watcher.disabled.update(keys)
            await asyncio.get_running_loop().run_in_executor(None, self.watcher.sync)
        log.info("model control: unloaded %r", model_name)
        return {"name": model_name, "unload": True}

    def _keys(self, model_name: str) -> list:
        keys = self.watcher.keys_of(model_name)
        if not keys:
            raise UnknownModel(f"the repository has no model {model_name!r}")
        return keys


_CONTROL = re.compile(r"/v2/repository/models/([^/]+)/(load|unload)")


def control_route(app, control: ModelControl):
    """ASGI middleware answering ``POST /v2/repository/models/NAME/(load|unload)``
    with *control* (KServe's own routes for them are never reached)."""
    from .refusals import REFUSALS, classify
    from .asgi_guards import send_json

    async def middleware(scope, receive, send):
        match = _CONTROL.fullmatch(scope["path"]) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "POST":
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        name, action = match.groups()
        try:
            answer = await getattr(control, action)(name, authorization)
        except Exception as exc:  # noqa: BLE001 - every refusal answered by its status
            status, message = classify(exc)
            client = (scope.get("client") or ("?",))[0]
            REFUSALS.refused(client, f"POST {scope['path']}", status, message,
                             exc if status == 500 else None)
            return await send_json(send, status, message)
        body = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    return middleware
