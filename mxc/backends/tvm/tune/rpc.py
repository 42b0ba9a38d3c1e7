"""Ask a TVM RPC tracker, once and with a deadline, whether ``mxc tune --rpc`` can measure.

TVM's tracker client retries a refused connection every 5 seconds, and a
request for a key no server registered waits in the tracker's queue forever,
while the progress line says "searching and measuring".  :func:`check_tracker`
asks before any work: it connects with a timeout, speaks the tracker's
protocol (magic number, then one ``SUMMARY`` request) and looks for a server
registered under the key.  Unreachable, not a tracker, or no device of that
key: a :class:`~mxc.errors.BackendError` that says which and what to run.
"""

from __future__ import annotations

import socket
import struct

from ....errors import BackendError

#: seconds to connect to the tracker and for its answer
TRACKER_TIMEOUT_S = 5.0


def _how_to(host: str, port: int, key: str) -> str:
    return (f"start a tracker with `python -m tvm.exec.rpc_tracker --host {host} --port {port}` "
            f"and register a device with `python -m tvm.exec.rpc_server --tracker "
            f"{host}:{port} --key {key}` (see docs/performance.md)")


def tracker_keys(host: str, port: int, timeout: float = TRACKER_TIMEOUT_S) -> dict[str, int]:
    """The device keys registered with the tracker at *host*:*port* and how many servers
    each has; :class:`BackendError` when it cannot be reached or does not answer as one."""
    from tvm.rpc import base
    where = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise BackendError(f"cannot reach an RPC tracker at {where} ({reason})") \
            from None
    try:
        with sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", base.recvall(sock, 4))[0]
            if magic != base.RPC_TRACKER_MAGIC:
                raise BackendError(f"{where} answered, but not as a TVM RPC tracker")
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            answer = base.recvjson(sock)
    except BackendError:
        raise
    except (OSError, ValueError, struct.error, RuntimeError) as exc:  # timeout, reset, junk
        raise BackendError(f"{where} did not answer as a TVM RPC tracker within "
                           f"{timeout:g} s ({type(exc).__name__}: {exc})") from None
    if not (isinstance(answer, list) and len(answer) == 2
            and answer[0] == base.TrackerCode.SUCCESS and isinstance(answer[1], dict)):
        raise BackendError(f"{where} answered its summary request with {answer!r:.200}")
    keys: dict[str, int] = {}
    for server in answer[1].get("server_info") or ():
        role, _, key = str(server.get("key", "")).partition(":")
        if role == "server" and key:
            keys[key] = keys.get(key, 0) + 1
    return keys


def check_tracker(host: str, port: int, key: str, timeout: float = TRACKER_TIMEOUT_S) -> int:
    """How many devices the tracker has under *key*; :class:`BackendError` when it cannot
    be reached, is not a tracker, or has none."""
    try:
        keys = tracker_keys(host, port, timeout)
    except BackendError as exc:
        raise BackendError(f"{exc}; {_how_to(host, port, key)}") from None
    if not keys.get(key):
        have = ", ".join(f"{k} ({n})" for k, n in sorted(keys.items())) or "none"
        raise BackendError(f"the RPC tracker at {host}:{port} has no device registered "
                           f"under key {key!r} (registered keys: {have}); register one with "
                           f"`python -m tvm.exec.rpc_server --tracker {host}:{port} --key {key}`")
    return keys[key]
