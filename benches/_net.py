"""Loopback networking shared by the benchmark scripts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """Returns a TCP port free on 127.0.0.1 at the time of the call."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
