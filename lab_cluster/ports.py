"""Loopback ports: find free ones, refuse busy ones, wait for one to listen.

Everything the lab runs listens on 127.0.0.1 only. A port picked by
`free_port()` is free when picked; another process could take it before the
server binds it, which is why servers are checked for readiness (and their log
shown) rather than assumed up.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import LabError

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """`count` distinct free ports (held open together so they differ)."""
    with held_ports(count, host) as ports:
        return ports


@contextmanager
def held_ports(count: int, host: str = LOOPBACK) -> Iterator[list[int]]:
    """`count` distinct free ports, kept bound (not listening) until the block ends.

    While they are held, nothing in this process or another can be given one of
    them by a bind to port 0. Use it when the ports are picked for servers that
    start later and, in between, something else binds port 0: a ZooKeeper
    ensemble's quorum proxies would otherwise be able to get the very quorum
    port they forward to, and forward to themselves.
    """
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        yield [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """True when binding `host:port` fails because something holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def require_free(port: int, what: str, host: str = LOOPBACK) -> int:
    """Return `port`, or raise a `LabError` naming `what` wanted it."""
    if not 0 < port < 65536:
        raise LabError(f"Port {port} for {what} is not a valid TCP port.", "Choose one between 1 and 65535.")
    if port_in_use(port, host):
        raise LabError(
            f"Port {port} on {host}, asked for {what}, is already in use.",
            f"Stop whatever listens there (`ss -ltnp | grep :{port}` shows it) or choose another port, "
            "or leave the port out and the lab picks a free one.",
        )
    return port


def wait_listening(port: int, timeout_s: float, host: str = LOOPBACK) -> bool:
    """Poll until something accepts on `host:port`; False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False
