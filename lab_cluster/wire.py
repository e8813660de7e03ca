"""The lab's wire protocol: length-prefixed, versioned JSON frames with Kafka's error codes.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON. A request names its API and version and carries a correlation id; the
answer echoes the correlation id and carries an error code (0 = NONE)::

    -> {"api": "Fetch", "version": 1, "correlation_id": 7, "client_id": "c1",
        "topic": "t", "partition": 0, "offset": 42, "max_records": 100, "max_wait_ms": 500}
    <- {"correlation_id": 7, "error_code": 0, "error": "NONE", "records": [...], "high_watermark": 57}

JSON rather than Kafka's binary encoding so that a student can read a capture
(`tcpdump -A -i lo port P`); the API names and error codes are Kafka's.

Rules a server follows (`WireServer`):
- a frame longer than `max_frame_bytes`, or one that is not a JSON object with
  an `api`, gets an INVALID_REQUEST answer (correlation id -1 when unknown) and
  its connection is closed: the byte stream can no longer be trusted;
- an unknown API or version gets INVALID_REQUEST or UNSUPPORTED_VERSION and the
  connection stays open;
- a handler raises `WireError(code, message)` to answer with an error;
  an unexpected exception answers UNKNOWN_SERVER_ERROR. Either way the server
  keeps serving every other connection.

Each connection is a `Channel`: an API registered `with_channel` gets it with
the request (a RocketMQ broker keys a consumer's registration by it), the
server tells `on_channel_closed` listeners when one ends, and a server may
`push` a frame nobody asked for on it (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED).
A pushed frame has a `push` field and no correlation id; a `DuplexClient`
hands it to its `on_push` while it goes on answering its requests.
"""

from __future__ import annotations

import enum
import itertools
import json
import socket
import socketserver
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .ports import LOOPBACK

MAX_FRAME_BYTES = 1 << 20
_LENGTH = struct.Struct(">I")


class ErrorCode(enum.IntEnum):
    """Kafka's error codes (names and numbers), those the lab uses."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6  # Kafka 0.8 called it NotLeaderForPartition
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    INVALID_TOPIC_EXCEPTION = 17  # e.g. a client's Produce to an internal topic
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    INVALID_RECORD = 87  # a produced record the broker will not store (the lab: one its logs cannot hold)
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82  # a static member's group.instance.id is now held by another member id
    # KIP-848's consumer protocol (Kafka 3.7+, GA in 4.0): member epochs instead of generations
    FENCED_MEMBER_EPOCH = 110  # the member must give up all its partitions and rejoin with epoch 0
    UNRELEASED_INSTANCE_ID = 111  # a static member's instance id is still held by a member that has not left
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113  # a commit under an epoch other than the member's current one: retry with the new one


class WireError(Exception):
    """An error answer: raised by handlers, and by clients that get one."""

    def __init__(self, code: ErrorCode, message: str = ""):
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)


class ProtocolViolation(Exception):
    """The byte stream is broken (bad length or bad JSON): the connection must close."""


def encode(obj: dict) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _LENGTH.pack(len(body)) + body


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """`n` bytes from `sock`; fewer if the stream ended inside them, None if it ended before any."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None if not buf else bytes(buf)
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, max_frame_bytes: int = MAX_FRAME_BYTES) -> dict | None:
    """One decoded frame, or None at a clean end of stream."""
    head = recv_exactly(sock, 4)
    if head is None:
        return None
    if len(head) < 4:
        raise ProtocolViolation("the connection ended inside a frame header")
    (length,) = _LENGTH.unpack(head)
    if length > max_frame_bytes:
        raise ProtocolViolation(f"frame of {length} bytes is over the limit of {max_frame_bytes}")
    body = recv_exactly(sock, length) if length else b""
    if body is None or len(body) < length:
        raise ProtocolViolation("the connection ended inside a frame")
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolViolation(f"frame is not JSON ({exc.__class__.__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolViolation("frame is not a JSON object")
    return obj


Handler = Callable[..., dict]  # (request) -> answer, or (request, channel) -> answer for an API `with_channel`


class Channel:
    """One client connection, as the server sees it: an identity that lives as long as the connection, and
    the way to send its client a frame it did not ask for."""

    _ids = itertools.count(1)

    def __init__(self, sock: socket.socket, peer: tuple):
        self.id = next(Channel._ids)
        self.peer = peer
        self.closed = False
        self._sock = sock
        self._send_lock = threading.Lock()  # answers (the connection's thread) and pushes (any thread) interleave

    def send(self, frame: dict) -> bool:
        with self._send_lock:
            try:
                self._sock.sendall(encode(frame))
                return True
            except OSError:
                return False

    def push(self, kind: str, **body) -> bool:
        """A frame its client did not ask for: `{"push": kind, ...}`; False if the connection is gone."""
        return not self.closed and self.send({"push": kind, **body})

    def close(self) -> None:
        """End the connection from the server's side (its thread then ends, and the listeners are told)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"Channel({self.id}, {self.peer[0]}:{self.peer[1]})"


@dataclass(frozen=True)
class Api:
    name: str
    versions: tuple[int, ...]
    handler: Handler
    with_channel: bool = False


class LoopbackServer:
    """A threaded TCP server on loopback, one daemon thread per connection: what the lab's two listeners share
    (this module's `WireServer` and the Kafka listener, `lab_cluster/kafka_listener/server.py`). A subclass
    serves one connection in `_serve_connection(sock, peer)`."""

    def __init__(self, port: int = 0, name: str = "wire"):
        self.name = name
        outer = self

        class _Conn(socketserver.BaseRequestHandler):
            def handle(self):
                outer._serve_connection(self.request, self.client_address)

        class _Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 1024  # listen backlog: 256 members connecting at once must not be reset

            def handle_error(self, request, client_address):
                # A peer that vanished mid-connection (killed, reset) is normal in this lab: no traceback.
                if not isinstance(sys.exc_info()[1], OSError):
                    super().handle_error(request, client_address)

        self._server = _Server((LOOPBACK, port), _Conn)
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def _serve_connection(self, sock: socket.socket, peer: tuple) -> None:
        raise NotImplementedError

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"{self.name}-accept", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        # shutdown() waits for serve_forever() to return: only ask if it ever ran.
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()


class WireServer(LoopbackServer):
    """The lab's JSON listener: dispatches frames to API handlers.

    `add_api(name, versions, handler)` is the plug-in point: a broker registers
    Produce, Fetch, ListOffsets and Metadata, and a group coordinator hosted by
    the broker registers JoinGroup, SyncGroup and the rest.
    """

    def __init__(self, port: int = 0, max_frame_bytes: int = MAX_FRAME_BYTES, name: str = "wire"):
        super().__init__(port, name)
        self.apis: dict[str, Api] = {}
        self.max_frame_bytes = max_frame_bytes
        self._closed_listeners: list[Callable[[Channel], None]] = []

    def add_api(self, name: str, versions: tuple[int, ...], handler: Handler, *, with_channel: bool = False) -> None:
        """Register an API; `with_channel`: its handler is called as `handler(request, channel)`."""
        if name in self.apis:
            raise ValueError(f"API {name} is already registered")
        self.apis[name] = Api(name, versions, handler, with_channel)

    def on_channel_closed(self, listener: Callable[[Channel], None]) -> None:
        """Call `listener(channel)` when a connection ends, whoever ended it (RocketMQ's channel close event)."""
        self._closed_listeners.append(listener)

    def dispatch(self, request: dict, channel: Channel | None = None) -> dict:
        """Answer one well-formed frame (never raises)."""
        cid = request.get("correlation_id", -1)
        api = self.apis.get(request.get("api")) if isinstance(request.get("api"), str) else None
        try:
            _unicode_only(request)
            if api is None:
                raise WireError(ErrorCode.INVALID_REQUEST, f"unknown api {request.get('api')!r}; "
                                f"this server has {sorted(self.apis)}")
            if request.get("version") not in api.versions:
                raise WireError(ErrorCode.UNSUPPORTED_VERSION,
                                f"{api.name} version {request.get('version')!r}; supported: {list(api.versions)}")
            answer = api.handler(request, channel) if api.with_channel else api.handler(request)
            return {"correlation_id": cid, "error_code": 0, "error": "NONE", **answer}
        except WireError as exc:
            return {"correlation_id": cid, "error_code": int(exc.code), "error": exc.code.name,
                    "message": exc.message}
        except Exception as exc:  # a bug in a handler must not take the server down
            return {"correlation_id": cid, "error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR),
                    "error": "UNKNOWN_SERVER_ERROR", "message": f"{exc.__class__.__name__}: {exc}"}

    def _serve_connection(self, sock: socket.socket, peer: tuple) -> None:
        channel = Channel(sock, peer)
        try:
            while True:
                try:
                    request = read_frame(sock, self.max_frame_bytes)
                except ProtocolViolation as exc:
                    channel.send({"correlation_id": -1, "error_code": int(ErrorCode.INVALID_REQUEST),
                                  "error": "INVALID_REQUEST", "message": f"{exc}; closing the connection"})
                    return
                except OSError:
                    return
                if request is None or not channel.send(self.dispatch(request, channel)):
                    return
        finally:
            channel.closed = True
            for listener in self._closed_listeners:
                try:
                    listener(channel)
                except Exception as exc:  # a listener's bug must not take the server down
                    print(f"{self.name}: channel-closed listener failed: {exc!r}", file=sys.stderr)


def _unicode_only(request: dict) -> None:
    """INVALID_REQUEST for a request holding a lone surrogate: JSON's `\\udcff` escape decodes to one, but it is
    no Unicode text, and once in a group's state it could not be sent to a Kafka client (whose strings are UTF-8)."""
    try:
        json.dumps(request, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        raise WireError(ErrorCode.INVALID_REQUEST, f"the request holds text that is not valid Unicode ({exc.reason}: "
                        f"{exc.object[exc.start:exc.end]!r})") from None


def _open(address: tuple[str, int], timeout_s: float) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Client:
    """What both clients share: `call`, which is `request` that raises `WireError` for an error answer."""

    def request(self, api: str, version: int = 1, **body) -> dict:
        raise NotImplementedError

    def call(self, api: str, version: int = 1, **body) -> dict:
        answer = self.request(api, version, **body)
        if answer.get("error_code", 0) != 0:
            raise WireError(answer["error_code"], answer.get("message", ""))
        return answer


def fields_checked(api: str, handler: Callable, where: str) -> Callable:
    """`handler` with a request that lacks a field, or carries one of the wrong type, answered
    INVALID_REQUEST naming the API and `where` each request's body is described (the connection stays open),
    never an unknown server error. For plug-ins whose handlers read the request's fields directly."""
    def handle(*args):
        try:
            return handler(*args)
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(ErrorCode.INVALID_REQUEST,
                            f"{api}: bad or missing field ({exc.__class__.__name__}: {exc}); see {where} for "
                            "each request's body") from None
    return handle


class Shape:
    """What a request's field must hold, checked before a handler reads it (`Fields.require`, `shape_checked`):
    the lab's JSON has no schema of its own, so this is what Kafka's generated request classes do when they
    parse a request. A shape is a Python type (`str`, `int` (a bool is not one), `bool`, `dict`, `list`,
    `object`: anything), or one of the shapes below."""

    def check(self, value, where: str) -> str | None:
        raise NotImplementedError


def _check(shape, value, where: str) -> str | None:
    """None where `value` has `shape`, else why not (naming the field as `where`)."""
    if isinstance(shape, Shape):
        return shape.check(value, where)
    if shape is object:
        return None
    if shape is int and isinstance(value, bool) or not isinstance(value, shape):
        return f"{where} must be {'an' if shape is int else 'a'} {shape.__name__}, not {json.dumps(value)[:40]}"
    return None


@dataclass(frozen=True)
class Maybe(Shape):
    """Absent, null, or `of`."""

    of: object

    def check(self, value, where):
        return None if value is None else _check(self.of, value, where)


@dataclass(frozen=True)
class Absent(Shape):
    """Absent, or `of` (a null is refused: the handler reads the field with a default of its own)."""

    of: object

    def check(self, value, where):
        return _check(self.of, value, where)


@dataclass(frozen=True)
class ListOf(Shape):
    of: object

    def check(self, value, where):
        if not isinstance(value, list):
            return f"{where} must be a list, not {json.dumps(value)[:40]}"
        return next((why for i, v in enumerate(value) if (why := _check(self.of, v, f"{where}[{i}]"))), None)


@dataclass(frozen=True)
class Pair(Shape):
    """A list of exactly two: `[first, second]` (a partition as `[topic, partition]`)."""

    first: object
    second: object

    def check(self, value, where):
        if not isinstance(value, list) or len(value) != 2:
            return f"{where} must be a pair [{getattr(self.first, '__name__', '?')}, ...], not {json.dumps(value)[:40]}"
        return _check(self.first, value[0], f"{where}[0]") or _check(self.second, value[1], f"{where}[1]")


@dataclass(frozen=True)
class Fields(Shape):
    """An object with these fields (each required unless `Maybe`); others are ignored, as Kafka ignores
    tagged fields it does not know."""

    fields: dict

    def check(self, value, where):
        if not isinstance(value, dict):
            return f"{where} must be an object, not {json.dumps(value)[:40]}"
        for name, shape in self.fields.items():
            if name not in value:
                if isinstance(shape, (Maybe, Absent)):
                    continue
                return f"{where}.{name} is missing" if where else f"{name} is missing"
            why = _check(shape, value.get(name), f"{where}.{name}" if where else name)
            if why:
                return why
        return None

    def require(self, api: str, request: dict) -> None:
        """Raise INVALID_REQUEST naming the first field of `api`'s `request` that does not have its shape."""
        why = self.check(request, "")
        if why:
            raise WireError(ErrorCode.INVALID_REQUEST, f"{api}: {why}")


def shape_checked(api: str, handler: Callable, shape: Fields) -> Callable:
    """`handler`, called only for a request whose fields have `shape`; any other is answered INVALID_REQUEST
    naming the first field that does not (the connection stays open), before the handler changes anything."""
    def handle(request, *rest):
        shape.require(api, request)
        return handler(request, *rest)
    return handle


class WireClient(_Client):
    """A blocking client for one server; one request at a time (thread-safe).

    `request()` returns the answer; `call()` also raises `WireError` for an error answer.
    Connection problems raise `ConnectionError` (the caller decides whether to retry
    elsewhere, e.g. after finding the new leader).
    """

    def __init__(self, host: str, port: int, *, client_id: str = "", timeout_s: float = 10.0):
        self.address = (host, port)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._next_cid = 0
        self._retired = False  # `close(retire=True)`: no request is sent any more

    def request(self, api: str, version: int = 1, *, timeout_s: float | None = None, **body) -> dict:
        if self._retired:
            raise ConnectionError(f"{api} to {self.address[0]}:{self.address[1]}: this client was closed for good")
        with self._lock:
            self._next_cid += 1
            frame = {"api": api, "version": version, "correlation_id": self._next_cid,
                     "client_id": self.client_id, **body}
            try:
                sock = self._connect()
                sock.settimeout(timeout_s or self.timeout_s)
                sock.sendall(encode(frame))
                answer = read_frame(sock)
            except (OSError, ProtocolViolation) as exc:
                self.close_locked()
                raise ConnectionError(f"{api} to {self.address[0]}:{self.address[1]} failed: {exc}") from None
            if answer is None:
                self.close_locked()
                raise ConnectionError(f"{api} to {self.address[0]}:{self.address[1]}: connection closed")
            return answer


    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = _open(self.address, self.timeout_s)
        return self._sock

    def close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self, *, retire: bool = False) -> None:
        """Close the connection at once: a request waiting for its answer on another thread fails now (as a
        Java client's disconnect fails its in-flight requests), not when its timeout runs out. `retire`: and
        refuse every later request (ConnectionError) rather than connect again, for a server that is no longer
        the one to ask (a coordinator marked unknown): a thread that took the client before cannot reach it."""
        self._retired = self._retired or retire
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reader; it closes the socket under the lock
            except OSError:
                pass
        with self._lock:
            self.close_locked()


class DuplexClient(_Client):
    """A client that reads its connection all the time, as RocketMQ's (Netty) remoting client does.

    Answers go to the request that waits for them (several may be in flight,
    from several threads); a pushed frame goes to `on_push(frame)`, on the
    reader thread; a lost connection fails every waiting request with
    `ConnectionError` and calls `on_close()`. A request with no answer in time
    closes its connection too, as RocketMQ's `invokeSync` does
    (`closeSocketIfTimeout`, true by default): a half-dead link is not kept.
    The next request connects again (a new connection is a new channel to the
    server).

    Two ways of RocketMQ's remoting that do not close on a timeout:
    `request(..., close_on_timeout=False)` as `invokeAsync` (a timed-out
    answer fails only its caller, `NettyRemotingAbstract.scanResponseTable`),
    and `send_oneway` as `invokeOneway` (nothing waits, so nothing times out).
    """

    def __init__(self, host: str, port: int, *, client_id: str = "", timeout_s: float = 10.0,
                 on_push: Callable[[dict], None] | None = None, on_close: Callable[[], None] | None = None):
        self.address = (host, port)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.on_push = on_push or (lambda frame: None)
        self.on_close = on_close or (lambda: None)
        self._cids = itertools.count(1)
        self._lock = threading.Lock()  # the socket and the pending requests
        self._send_lock = threading.Lock()
        self._sock: socket.socket | None = None
        #: correlation id -> [threading.Event, the answer (None: the connection closed), the socket it went on,
        #: the oneway callback or None]
        self._pending: dict[int, list] = {}

    def request(self, api: str, version: int = 1, *, timeout_s: float | None = None, close_on_timeout: bool = True,
                **body) -> dict:
        """Send and wait for the answer. No answer within `timeout_s`: ConnectionError, and the connection is
        closed (RocketMQ's `invokeSync`), unless `close_on_timeout` is False (its `invokeAsync`: the late
        answer, if it comes, is dropped and the connection stays)."""
        slot = [threading.Event(), None, None, None]
        cid, sock, where = self._send(api, version, slot, body)
        if not slot[0].wait(timeout_s or self.timeout_s):
            with self._lock:
                self._pending.pop(cid, None)
                stale = self._sock is sock
            if stale and close_on_timeout:  # `invokeSync` closes a channel whose answer timed out
                self._close_socket(sock)
            raise ConnectionError(f"{where}: no answer within {timeout_s or self.timeout_s:g} s")
        if slot[1] is None:
            raise ConnectionError(f"{where}: connection closed")
        return slot[1]

    def send_oneway(self, api: str, version: int = 1, *, on_answer: Callable[[dict | None], None] | None = None,
                    **body) -> None:
        """Send and return at once, as RocketMQ's `invokeOneway`: nothing waits, so nothing times out or closes
        the connection. Raises ConnectionError only if it cannot be sent. The lab's servers answer every
        request anyway: the answer goes to `on_answer(frame)` on the reader thread, or `on_answer(None)` if
        the connection ends first (RocketMQ's broker sends no answer to a oneway request)."""
        self._send(api, version, [threading.Event(), None, None, on_answer or (lambda frame: None)], body)

    def _send(self, api: str, version: int, slot: list, body: dict) -> tuple[int, socket.socket, str]:
        """Put `slot` in the pending table and the frame on the connection: (correlation id, socket, where)."""
        cid = next(self._cids)
        frame = {"api": api, "version": version, "correlation_id": cid, "client_id": self.client_id, **body}
        where = f"{api} to {self.address[0]}:{self.address[1]}"
        try:
            with self._lock:
                sock = slot[2] = self._connect_locked()
                self._pending[cid] = slot
            with self._send_lock:
                sock.sendall(encode(frame))
        except OSError as exc:
            with self._lock:
                self._pending.pop(cid, None)
            raise ConnectionError(f"{where} failed: {exc}") from None
        return cid, sock, where


    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            self._close_socket(sock)

    def _close_socket(self, sock: socket.socket) -> None:
        """End one connection: its reader sees the end, fails what still waits on it and calls `on_close`;
        the next request opens a new one."""
        with self._lock:
            if self._sock is sock:
                self._sock = None
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _connect_locked(self) -> socket.socket:
        if self._sock is None:
            sock = _open(self.address, self.timeout_s)
            sock.settimeout(None)  # the reader blocks until a frame or the end; requests time out on their own
            self._sock = sock
            threading.Thread(target=self._read, args=(sock,), name=f"duplex-{self.client_id or 'client'}",
                             daemon=True).start()
        return self._sock

    def _read(self, sock: socket.socket) -> None:
        try:
            while True:
                try:
                    frame = read_frame(sock)
                except (OSError, ProtocolViolation):
                    frame = None
                if frame is None:
                    return
                if "push" in frame:
                    try:
                        self.on_push(frame)
                    except Exception as exc:  # the reader must go on reading
                        print(f"duplex client: on_push failed: {exc!r}", file=sys.stderr)
                    continue
                with self._lock:
                    slot = self._pending.pop(frame.get("correlation_id"), None)
                if slot is not None:
                    self._answered(slot, frame)
        finally:
            with self._lock:
                if self._sock is sock:
                    self._sock = None
                lost = [cid for cid, slot in self._pending.items() if slot[2] is sock]
                waiting = [self._pending.pop(cid) for cid in lost]
            for slot in waiting:
                self._answered(slot, None)  # the connection closed
            try:
                sock.close()
            except OSError:
                pass
            self.on_close()

    @staticmethod
    def _answered(slot: list, frame: dict | None) -> None:
        if slot[3] is None:
            slot[1] = frame
            slot[0].set()
            return
        try:
            slot[3](frame)
        except Exception as exc:  # the reader must go on reading
            print(f"duplex client: on_answer failed: {exc!r}", file=sys.stderr)
