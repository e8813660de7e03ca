"""The TCP fault proxy: each mode does what its name says, and modes switch on open connections."""

import socket
import socketserver
import threading
import time

import pytest

from lab_cluster.errors import LabError
from lab_cluster.faultproxy import FaultProxy, Mode, open_proxies
from lab_cluster.ports import free_port, held_ports


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            try:
                data = self.request.recv(65536)
            except ConnectionResetError:  # the RESET mode's doing, which the test expects: not an error to print
                return
            if not data:
                return
            self.request.sendall(data)


@pytest.fixture
def echo_port():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo_port):
    p = FaultProxy(echo_port, name="test echo")
    yield p
    p.close()


def _connect(proxy, timeout=5.0):
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def _recv_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_pass_forwards_both_ways(proxy):
    with _connect(proxy) as s:
        s.sendall(b"hello")
        assert _recv_exactly(s, 5) == b"hello"
    assert proxy in open_proxies()


def test_delay_holds_every_chunk_and_keeps_order(proxy):
    with _connect(proxy) as s:
        s.sendall(b"warm")
        _recv_exactly(s, 4)
        proxy.set_mode(Mode.DELAY, delay_ms=200)
        t0 = time.monotonic()
        payload = b"".join(b"%04d" % i for i in range(200))
        for i in range(0, len(payload), 40):
            s.sendall(payload[i:i + 40])
        echoed = _recv_exactly(s, len(payload))
        elapsed = time.monotonic() - t0
    assert echoed == payload  # nothing lost, nothing reordered
    # Held once on the way in and once on the way out: it cannot be back sooner.
    assert elapsed >= 0.4


def test_blackhole_drops_bytes_but_keeps_the_connection(proxy):
    with _connect(proxy, timeout=0.5) as s:
        proxy.set_mode(Mode.BLACKHOLE)
        s.sendall(b"lost")
        with pytest.raises(socket.timeout):
            s.recv(10)  # no answer and no close: a partition, as TCP sees it
        proxy.set_mode(Mode.PASS)
        s.settimeout(5)
        s.sendall(b"back")
        assert _recv_exactly(s, 4) == b"back"  # the dropped bytes never arrive


def test_blackhole_starves_new_connections_too(proxy):
    proxy.set_mode(Mode.BLACKHOLE)
    with _connect(proxy, timeout=0.5) as s:
        s.sendall(b"anyone?")
        with pytest.raises(socket.timeout):
            s.recv(10)


def test_reset_kills_open_connections_and_refuses_new_ones(proxy):
    s = _connect(proxy)
    s.sendall(b"x")
    _recv_exactly(s, 1)
    proxy.set_mode(Mode.RESET)
    with pytest.raises((ConnectionResetError, ConnectionError)):
        s.sendall(b"y")
        if not s.recv(10):
            raise ConnectionError("closed")
    s.close()
    # A new connection is reset as soon as it is accepted: during connect() or at the first read.
    with pytest.raises((ConnectionResetError, ConnectionError)):
        with _connect(proxy) as s2:
            if not s2.recv(10):
                raise ConnectionError("closed")


def test_close_is_idempotent_and_stops_listening(echo_port):
    p = FaultProxy(echo_port)
    port = p.port
    p.close()
    p.close()
    assert p not in open_proxies()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)


def test_delay_needs_a_positive_delay(proxy):
    with pytest.raises(ValueError):
        proxy.set_mode(Mode.DELAY)


def test_a_proxy_given_the_port_it_forwards_to_refuses_to_start():
    port = free_port()
    before = len(open_proxies())
    with pytest.raises(LabError, match="the port it forwards to"):
        FaultProxy(port, port=port, name="loop")
    assert len(open_proxies()) == before
    with pytest.raises(OSError):  # and it does not listen
        socket.create_connection(("127.0.0.1", port), timeout=2)


def test_held_ports_are_never_handed_out_while_held():
    with held_ports(16) as held:
        assert len(set(held)) == 16
        proxies = [FaultProxy(p, name=f"held {p}") for p in held]
        try:
            assert set(held).isdisjoint(p.port for p in proxies)
        finally:
            for p in proxies:
                p.close()
