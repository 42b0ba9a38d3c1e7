"""The REST listening socket: loopback, reusable by several workers, no Nagle delay.

Without ``TCP_NODELAY`` a response written as headers then body waits for the
client's delayed ACK (about 40 ms a request on Linux loopback); accepted
connections inherit the option from the listening socket, checked here.
"""

from __future__ import annotations

import socket

import pytest

from mxc.errors import MxcError
from mxc.serving.server import _listen_socket


def test_accepted_connections_have_nodelay_and_the_port_is_shared():
    a = _listen_socket("127.0.0.1", 0, reuse_port=True)
    port = a.getsockname()[1]
    b = _listen_socket("127.0.0.1", port, reuse_port=True)  # a second worker on the same port
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        a.settimeout(0.2)
        b.settimeout(0.2)
        conn = None
        for listener in (a, b):
            try:
                conn, _ = listener.accept()
                break
            except TimeoutError:
                continue
        assert conn is not None
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        conn.close()
        client.close()
    finally:
        a.close()
        b.close()


def test_a_port_in_use_is_a_typed_error():
    a = _listen_socket("127.0.0.1", 0, reuse_port=False)
    try:
        with pytest.raises(MxcError, match="cannot listen on 127.0.0.1"):
            _listen_socket("127.0.0.1", a.getsockname()[1], reuse_port=False)
    finally:
        a.close()
