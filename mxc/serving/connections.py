"""Accepting REST connections with bounds: a cap, a header timeout, backoff on EMFILE.

uvicorn accepts connections through asyncio's ``create_server``, which has no cap
and no header timeout: a client that opens sockets and never sends a byte holds
each one forever, and once the process runs out of descriptors CPython's accept
loop logs and retries in a tight loop (one error per backlog slot per wake-up:
98 % CPU and 225,000 log lines in 20 s in issue 35).  This module replaces that
accept path:

* :func:`accept_loop` accepts with ``loop.sock_accept`` and, on ``EMFILE``,
  ``ENFILE``, ``ENOBUFS`` or ``ENOMEM``, backs off (10 ms doubling to 1 s) and
  logs once per episode;
* at ``max_connections`` it first closes the *idle* connection that has waited
  longest (no request in progress: a keep-alive or one that never sent a
  request), as nginx reuses idle keep-alive connections when it runs out, and
  only when every connection is busy answers the newcomer 503 with
  ``Retry-After`` and closes it;
* :func:`bounded_protocol` makes uvicorn's HTTP protocol close a connection
  whose request headers are not complete within ``header_timeout_s`` of its
  opening (or of its previous response), so sockets that never send a byte, or
  send headers a byte at a time, are reclaimed; and answer what its HTTP parser
  refuses with a JSON error like every other refusal.

The cap itself is derived from the descriptor limit by :func:`connection_cap`,
so it binds before ``EMFILE`` does.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import resource
import socket
from typing import Any, Callable

log = logging.getLogger(__name__)

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: descriptors kept out of the REST cap: gRPC, model files, logs, the runtime's own
DESCRIPTOR_RESERVE = 32
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                 b"retry-after: 1\r\nconnection: close\r\ncontent-length: 62\r\n\r\n"
                 b'{"error": "the server is at its connection limit; retry soon"}')


def raise_descriptor_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (as servers do); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 16


def connection_cap(requested: int, soft_limit: int, in_use: int, grpc: bool) -> int:
    """The REST connection cap: *requested*, at most what the descriptor limit leaves
    after those *in_use*, a reserve, and (with gRPC) an equal share for gRPC."""
    spare = soft_limit - in_use - DESCRIPTOR_RESERVE
    if grpc:
        spare //= 2
    return max(1, min(requested, spare))


def _idle(protocol: Any) -> bool:
    cycle = getattr(protocol, "cycle", None)
    return cycle is None or bool(getattr(cycle, "response_complete", False))


def bounded_protocol(base: type, header_timeout_s: float) -> type:
    """A subclass of uvicorn's HTTP protocol *base* with the header timeout."""

    class Bounded(base):  # type: ignore[misc, valid-type]
        _mxc_timer = None
        idle_since = 0.0

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self._mxc_timer is not None:
                self._mxc_timer.cancel()
            self.idle_since = self.loop.time()
            self._mxc_timer = self.loop.call_later(header_timeout_s, self._expire, self.cycle)

        def _expire(self, cycle_then) -> None:
            self._mxc_timer = None
            if self.cycle is cycle_then and _idle(self) and not self.transport.is_closing():
                log.debug("closing a connection that sent no complete request in %ss",
                          header_timeout_s)
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def send_400_response(self, msg: str) -> None:
            """A request the HTTP parser refuses (a Content-Length of 10**30, a bad request
            line) gets a JSON error like every other refusal, not uvicorn's plain text."""
            body = json.dumps({"error": f"malformed HTTP request: {msg}"}).encode()
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                                 % (len(body), body))
            self.transport.close()

        def connection_lost(self, exc) -> None:
            if self._mxc_timer is not None:
                self._mxc_timer.cancel()
                self._mxc_timer = None
            super().connection_lost(exc)

    Bounded.__name__ = Bounded.__qualname__ = f"Bounded{base.__name__}"
    return Bounded


def _evict_idle(connections: set) -> bool:
    """Close the idle connection that has waited longest; False when all are busy."""
    idle = [c for c in connections if _idle(c) and not c.transport.is_closing()]
    if not idle:
        return False
    oldest = min(idle, key=lambda c: getattr(c, "idle_since", 0.0))
    oldest.transport.close()
    connections.discard(oldest)
    return True


def _refuse(conn: socket.socket) -> None:
    try:
        conn.setblocking(False)
        conn.send(BUSY_RESPONSE)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        conn.close()


async def accept_loop(sock: socket.socket, make_protocol: Callable[[], asyncio.Protocol],
                      connections: set, max_connections: int) -> None:
    """Accept on *sock* until cancelled (see the module docstring)."""
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    backoff = 0.0
    while True:
        try:
            conn, _ = await loop.sock_accept(sock)
        except OSError as exc:
            if exc.errno in _OUT_OF_RESOURCES:
                if backoff == 0.0:
                    log.warning("accepting connections: %s; backing off (%d connections open)",
                                exc.strerror, len(connections))
                backoff = min(1.0, backoff * 2 or 0.01)
                _evict_idle(connections)
                await asyncio.sleep(backoff)
                continue
            if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                continue
            raise
        backoff = 0.0
        if len(connections) >= max_connections and not _evict_idle(connections):
            _refuse(conn)
            continue
        try:
            await loop.connect_accepted_socket(make_protocol, conn)
        except OSError as exc:  # the client went away during setup
            log.debug("connection setup failed: %s", exc)
            conn.close()


async def accept_backlog(sock: socket.socket, make_protocol: Callable[[], asyncio.Protocol]) -> int:
    """Accept every connection already queued on *sock*, then close it; the number accepted.

    Closing a listening socket resets the connections the kernel has completed but
    the server has not accepted yet -- requests their clients sent before the server
    began to stop.  Draining starts here: those are taken on and answered, and a
    connection arriving after the close is refused (its client can go elsewhere)."""
    loop = asyncio.get_running_loop()
    taken = 0
    while True:
        try:
            conn, _ = sock.accept()
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        conn.setblocking(False)
        try:
            await loop.connect_accepted_socket(make_protocol, conn)
            taken += 1
        except OSError:
            conn.close()
    sock.close()
    return taken
