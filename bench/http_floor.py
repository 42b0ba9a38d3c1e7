"""The loopback HTTP floor: a bare ASGI app on uvicorn that replays one recorded answer.

``bench_served`` asks what a served request costs over an in-process ``run``
(issue 25's target: at most 1 ms at batch 1 on REST).  Part of that cost is the
HTTP transport itself -- the client library, loopback TCP, uvicorn's parser and
asyncio event loop reading a 600 KB image body -- which mxc cannot remove while
it serves through KServe's uvicorn server.  This app measures that part in the
same run: it reads the whole request body, as ``mxc serve`` does, and answers
with the bytes a real ``mxc serve`` answer had (status, V2 headers, binary
tensor), so the same tritonclient call parses it.  No model, no KServe.

Same event loop as ``mxc serve`` (the standard asyncio loop: ``serve_async``
runs under ``asyncio.run``, which uvicorn's ``--loop auto`` would replace by
uvloop when installed).

    python -m bench.http_floor --port 8095 --answer answer.json
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path


def make_app(headers: list[tuple[bytes, bytes]], body: bytes):
    """An ASGI app answering every request with *headers* and *body* once it read the request."""
    start = {"type": "http.response.start", "status": 200, "headers": headers}
    answer = {"type": "http.response.body", "body": body}

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if not message.get("more_body", False):
                break
        await send(start)
        await send(answer)
    return app


def save_answer(path: Path, headers: dict[str, str], body: bytes) -> None:
    """Record an answer (its V2 headers and body) for :func:`main` to replay."""
    keep = {k.lower(): v for k, v in headers.items()
            if k.lower() in ("content-type", "inference-header-content-length")}
    keep["content-length"] = str(len(body))
    path.write_text(json.dumps({"headers": keep, "body": base64.b64encode(body).decode()}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--answer", required=True, help="a file written by save_answer()")
    args = ap.parse_args(argv)
    import uvicorn
    recorded = json.loads(Path(args.answer).read_text())
    headers = [(k.encode(), v.encode()) for k, v in recorded["headers"].items()]
    app = make_app(headers, base64.b64decode(recorded["body"]))
    uvicorn.run(app, host="127.0.0.1", port=args.port, loop="asyncio", log_level="warning",
                lifespan="off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
