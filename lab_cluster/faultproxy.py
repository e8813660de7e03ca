"""A TCP fault proxy on loopback, in the spirit of Toxiproxy.

A `FaultProxy` listens on a loopback port and forwards every connection to an
upstream address. Its mode can be switched while connections are open:

- `PASS`: bytes flow both ways untouched.
- `DELAY`: every chunk is held for `delay_ms` before it is forwarded, in both
  directions, in order. A follower whose quorum link is delayed lags its
  leader; a client whose link is delayed sees its requests answered late.
- `BLACKHOLE`: connections stay open but every byte is dropped, and new
  connections are accepted and then starved the same way. This is a network
  partition as a TCP peer sees it: no error, no answer (Toxiproxy's `timeout`).
- `RESET`: every open connection is closed with a TCP reset, and new ones are
  reset as soon as they are accepted (Toxiproxy's `reset_peer`).

Transitions: any mode to any mode, at any time, with `set_mode`. Switching
from DELAY to PASS lets the chunks already held drain first, so order is kept.
Switching to BLACKHOLE drops chunks still held by DELAY.

All proxies of a process share one asyncio event loop, run by a daemon thread
that starts with the first proxy. Each proxy registers with the reaper, so a
proxy is closed at exit like every other lab resource.

Usage::

    proxy = FaultProxy(upstream_port=2181, name="c1->zk")
    kazoo = KazooClient(hosts=f"127.0.0.1:{proxy.port}")
    proxy.set_mode(Mode.DELAY, delay_ms=500)   # slow link
    proxy.set_mode(Mode.BLACKHOLE)             # partition
    proxy.set_mode(Mode.PASS)                  # heal
    proxy.close()
"""

from __future__ import annotations

import asyncio
import enum
import socket
import struct
import threading
import time
from concurrent.futures import Future

from .cleanup import REAPER
from .errors import LabError
from .ports import LOOPBACK


class Mode(enum.Enum):
    PASS = "pass"
    DELAY = "delay"
    BLACKHOLE = "blackhole"
    RESET = "reset"


class _LoopThread:
    """The one event loop that all proxies of this process run on."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="fault-proxy-loop", daemon=True)
                thread.start()
                cls._loop = loop
            return cls._loop

    @classmethod
    def run(cls, coro, timeout_s: float = 10.0):
        fut: Future = asyncio.run_coroutine_threadsafe(coro, cls.loop())
        return fut.result(timeout_s)


_open_proxies: set[FaultProxy] = set()


def open_proxies() -> list[FaultProxy]:
    """The proxies of this process that are not closed (the leak check uses it)."""
    return list(_open_proxies)


def _abort_with_reset(writer: asyncio.StreamWriter) -> None:
    """Close a connection with RST rather than FIN (SO_LINGER with a zero timeout)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class FaultProxy:
    """Forward `127.0.0.1:port` to `upstream_host:upstream_port`, with faults on demand."""

    def __init__(self, upstream_port: int, *, upstream_host: str = LOOPBACK, port: int = 0, name: str = ""):
        self.upstream = (upstream_host, upstream_port)
        self.name = name or f"proxy->{upstream_host}:{upstream_port}"
        self.mode = Mode.PASS
        self.delay_ms = 0
        self._conns: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.base_events.Server = _LoopThread.run(self._listen(port))
        self.port: int = self._server.sockets[0].getsockname()[1]
        if self.upstream == (LOOPBACK, self.port):
            # Forwarding to itself, each accepted connection would open another
            # one to itself until the process runs out of file descriptors.
            _LoopThread.run(self._shutdown(), timeout_s=5)
            raise LabError(f"Fault proxy {self.name} was given port {self.port}, the port it forwards to.",
                           "Pick the upstream's port so that it stays bound while proxies bind theirs "
                           "(`ports.held_ports`), or give the proxy a fixed port.")
        self.closed = False
        _open_proxies.add(self)
        self._reaper_token = REAPER.register(f"fault proxy {self.name}", self.close)

    # -- control (called from any thread) ------------------------------------

    def set_mode(self, mode: Mode, *, delay_ms: int = 0) -> None:
        """Switch the fault; applies at once to open connections and new ones."""
        if mode is Mode.DELAY and delay_ms <= 0:
            raise ValueError("DELAY needs delay_ms > 0")
        _LoopThread.run(self._apply(mode, delay_ms))

    def close(self) -> None:
        """Stop listening and close every connection. Idempotent."""
        if self.closed:
            return
        self.closed = True
        _open_proxies.discard(self)
        REAPER.unregister(self._reaper_token)
        try:
            _LoopThread.run(self._shutdown(), timeout_s=5)
        except Exception:
            pass

    @property
    def connection_count(self) -> int:
        return len(self._conns) // 2

    def __repr__(self) -> str:
        return f"FaultProxy({self.name}, :{self.port} -> {self.upstream[1]}, {self.mode.value})"

    # -- on the loop ---------------------------------------------------------

    async def _listen(self, port: int):
        return await asyncio.start_server(self._on_client, LOOPBACK, port)

    async def _apply(self, mode: Mode, delay_ms: int) -> None:
        self.mode, self.delay_ms = mode, delay_ms
        if mode is Mode.RESET:
            for writer in list(self._conns):
                _abort_with_reset(writer)
            self._conns.clear()

    async def _shutdown(self) -> None:
        self._server.close()
        for writer in list(self._conns):
            writer.transport.abort()
        self._conns.clear()
        for task in list(self._tasks):
            task.cancel()

    async def _on_client(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        if self.mode is Mode.RESET or self.closed:
            _abort_with_reset(c_writer)
            return
        try:
            u_reader, u_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            # Upstream down: the client sees what it would see without the proxy.
            _abort_with_reset(c_writer)
            return
        self._conns.update((c_writer, u_writer))
        pumps = [
            asyncio.ensure_future(self._pump(c_reader, u_writer)),
            asyncio.ensure_future(self._pump(u_reader, c_writer)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._tasks.difference_update(pumps)
            for w in (c_writer, u_writer):
                self._conns.discard(w)
                w.transport.abort() if self.mode is Mode.RESET else w.close()

    async def _pump(self, reader, writer) -> None:
        """Copy one direction. Chunks go through a queue so DELAY keeps order."""
        queue: asyncio.Queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, writer))
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.mode is Mode.BLACKHOLE:
                    continue
                due = time.monotonic() + (self.delay_ms / 1000 if self.mode is Mode.DELAY else 0)
                queue.put_nowait((due, data))
        except (ConnectionError, OSError):
            pass
        finally:
            queue.put_nowait(None)
            try:
                await sender
            except Exception:
                pass
            # This side closed: pass the close on (a blackhole swallows it too).
            if self.mode is not Mode.BLACKHOLE:
                writer.close()

    async def _send(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.mode is Mode.BLACKHOLE:
                continue
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return
