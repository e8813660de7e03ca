"""The Kafka listener: Kafka's binary framing on a loopback port, beside the broker's JSON listener.

One thread per connection, one request at a time, answered in order (a
Kafka broker mutes a connection until its answer is sent, so a held JoinGroup
holds its connection here too). For each frame:

    4-byte size | api_key int16, api_version int16, correlation_id int32, client_id | body
        -> an API and version this listener serves (`messages.SERVED`)?
              yes: decode with kafka-python's classes, answer through `apis.KafkaApis`
              ApiVersions at a version it does not serve: an ApiVersions v0 answer with
                  UNSUPPORTED_VERSION and the served ranges (KIP-511: the client retries lower)
              any other API or version: log it and close the connection

That last rule is Kafka's own (`SocketServer.parseRequestHeader` throws
InvalidRequestException for an API or version that is not enabled, and the
processor closes the connection): a client only sends what ApiVersions
advertised, so anything else means the byte stream cannot be trusted. A frame
that does not decode, or is larger than `socket.request.max.bytes` (Kafka's
default, 100 MiB), is handled the same way. The broker keeps serving every
other connection. A null where the request's schema allows none is
malformed, as Kafka's parser has it (`messages.Served.decode`). A departure:
a string that is not valid UTF-8 is malformed here too (kafka-python's
decoder refuses it), where Kafka reads it with U+FFFD in place of each bad
byte (`Readable.readString`: `new String(bytes, UTF_8)`) and answers.

Every request is recorded in the broker's trace as a `kafka_request` event
(api, version, client, correlation id, the first error its answer carries);
each closed connection as `kafka_connection_closed` with the reason. The group
APIs are also recorded by the coordinator (`coordinator_request`), as for the
lab's own consumers, because they go through the same handlers.
"""

from __future__ import annotations

import socket
import struct
import sys

from kafka.protocol.api_key import ApiKey

from ..wire import ErrorCode, LoopbackServer, recv_exactly
from .apis import HANDLERS, KafkaApis
from .messages import SERVED, api_name, first_error

MAX_REQUEST_BYTES = 104_857_600  # Kafka's socket.request.max.bytes
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id: the same in every header version


class ConnectionMustClose(Exception):
    """The request cannot be answered in Kafka's protocol: log, record and close the connection."""


class KafkaListener(LoopbackServer):
    def __init__(self, broker, port: int = 0, max_request_bytes: int = MAX_REQUEST_BYTES):
        super().__init__(port, name=f"broker-{broker.broker_id}-kafka")
        self.broker = broker
        self.apis = KafkaApis(broker)
        self.max_request_bytes = max_request_bytes

    # -- one connection ------------------------------------------------------------------
    def _serve_connection(self, sock: socket.socket, peer: tuple) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                frame = self._read_frame(sock)
                if frame is None:
                    return
                answer = self.answer(frame)
                if answer is not None:
                    sock.sendall(answer)
        except ConnectionMustClose as exc:
            print(f"broker {self.broker.broker_id}: Kafka listener: closing the connection from "
                  f"{peer[0]}:{peer[1]}: {exc}", file=sys.stderr, flush=True)
            self.broker.record("kafka_connection_closed", peer=f"{peer[0]}:{peer[1]}", reason=str(exc))
        except OSError:
            return
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _read_frame(self, sock: socket.socket) -> bytes | None:
        head = recv_exactly(sock, 4)
        if not head:
            return None
        if len(head) < 4:
            raise ConnectionMustClose("the connection ended inside a frame's size")
        (size,) = _SIZE.unpack(head)
        if size < 0 or size > self.max_request_bytes:
            raise ConnectionMustClose(f"a frame of {size} bytes (socket.request.max.bytes is "
                                      f"{self.max_request_bytes})")
        body = recv_exactly(sock, size)
        if body is None or len(body) < size:
            raise ConnectionMustClose("the connection ended inside a frame")
        return body

    # -- one request -----------------------------------------------------------------------
    def answer(self, frame: bytes) -> bytes | None:
        """The framed answer to one request frame, None when the request wants none (Produce with acks=0);
        raises ConnectionMustClose when the request cannot be answered."""
        if len(frame) < _HEADER.size:
            raise ConnectionMustClose(f"a frame of {len(frame)} bytes is shorter than a request header")
        key, version, correlation_id = _HEADER.unpack_from(frame)
        served = SERVED.get(key)
        if served is None:
            raise ConnectionMustClose(f"API key {key} ({api_name(key)}) is not served by the lab")
        if not served.serves(version):
            if key == ApiKey.ApiVersions:  # with its own range only, to retry within (ApiVersionsRequest)
                return self._encode(served, 0, correlation_id, self._api_versions(ErrorCode.UNSUPPORTED_VERSION,
                                                                                  only=served),
                                    "ApiVersions", version, "")
            raise ConnectionMustClose(f"{served.name} v{version} is not served "
                                      f"(this listener serves v{served.min_version}-{served.max_version})")
        try:
            request, client_id = served.decode(frame, version)
        except Exception as exc:
            raise ConnectionMustClose(f"a malformed {served.name} v{version} request "
                                      f"({exc.__class__.__name__}: {exc})") from None
        try:
            values = (self._api_versions(ErrorCode.NONE) if key == ApiKey.ApiVersions
                      else HANDLERS[served.name](self.apis, request, version, client_id))
            if values is None:
                self._record(served.name, version, client_id, correlation_id, {})
                return None
            return self._encode(served, version, correlation_id, values, served.name, version, client_id)
        except ConnectionMustClose:
            raise
        except Exception as exc:  # a bug in a translation: the client reconnects; the broker goes on
            raise ConnectionMustClose(f"{served.name} v{version} failed in the lab "
                                      f"({exc.__class__.__name__}: {exc})") from None

    def _encode(self, served, version: int, correlation_id: int, values: dict, api: str, asked: int,
                client_id: str) -> bytes:
        encoded = served.encode(values, version, correlation_id)
        self._record(api, asked, client_id, correlation_id, values)
        return encoded

    @staticmethod
    def _api_versions(error: ErrorCode, only=None) -> dict:
        served = [only] if only is not None else sorted(SERVED.values(), key=lambda s: s.key)
        return {"error_code": error, "throttle_time_ms": 0,
                "api_keys": [{"api_key": s.key, "min_version": s.min_version, "max_version": s.max_version}
                             for s in served]}

    def _record(self, api: str, version: int, client_id: str, correlation_id: int, values: dict) -> None:
        self.broker.record("kafka_request", api=api, version=version, client=client_id,
                           correlation_id=correlation_id, error=_error_name(first_error(values)))


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
