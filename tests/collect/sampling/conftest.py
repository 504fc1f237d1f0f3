"""Fixtures of the sampler tests."""
from __future__ import annotations

import contextlib
import socket

import pytest


@contextlib.contextmanager
def connected_pairs(n: int):
    """``n`` connected loopback TCP pairs ``(client, server side)``, all closed on exit."""
    srv = socket.create_server(("127.0.0.1", 0))
    pairs = []
    try:
        for _ in range(n):
            a = socket.create_connection(srv.getsockname())
            b, _ = srv.accept()
            pairs.append((a, b))
        srv.close()
        yield pairs
    finally:
        srv.close()
        for a, b in pairs:
            a.close()
            b.close()


@pytest.fixture
def socket_pairs():
    """Context manager ``socket_pairs(n)``: ``n`` loopback TCP pairs, closed on exit."""
    return connected_pairs
