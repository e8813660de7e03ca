"""The consumer's ZooKeeper client: kazoo, with every request recorded and zkclient 0.3's retry rule.

Kafka 0.8.2.2 talks to ZooKeeper through zkclient 0.3 (`org.I0Itec.zkclient.ZkClient`).
Two of its rules shape what a consumer does when its connection fails, and
`TracedZk` keeps both:

- **every request is recorded**: `zk_read` or `zk_write` (operation and path)
  before it is sent, each time it is sent. The herd experiment counts them
  per change; nothing else in `legacy_zk` calls kazoo's request methods;
- **`retryUntilConnected`**: a request that fails with ConnectionLoss or
  SessionExpired is sent again once the client is connected, forever (ZkClient
  L669-692: `while (true)`, no time limit). While the connection is down the
  caller simply waits: a rebalance in progress stalls, and an auto-commit
  blocks, then writes the positions it took before the outage, on the new
  session if the old one expired. (kazoo queues a request made while it is
  reconnecting and fails it on loss or expiry, which is what the loop needs.)

Departure, stated: the wait ends when the consumer stops (`stopping` set, or
kazoo closed), raising `Stopping`, so that stopping never hangs; 0.8's
`shutdown` waited for a blocked auto-commit for up to a day.
"""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError

from lab_cluster.trace import TraceRecorder


class Stopping(Exception):
    """The consumer is stopping: a request waiting for a connection gives up."""


class TracedZk:
    def __init__(self, client: KazooClient, trace: TraceRecorder, stopping: threading.Event):
        self.client = client
        self.trace = trace
        self.stopping = stopping

    def _request(self, kind: str, op: str, path: str, send, **why):
        while True:
            if self.stopping.is_set():
                raise Stopping(op)
            self.trace.record(kind, op=op, path=path, **why)
            try:
                return send().get()
            except ConnectionClosedError:  # kazoo was closed (a subclass of SessionExpiredError: first)
                raise Stopping(op) from None
            except (ConnectionLoss, SessionExpiredError) as exc:
                self.trace.record("zk_retry", op=op, path=path, error=type(exc).__name__)
                self.wait_until_connected()

    def wait_until_connected(self) -> None:
        """zkclient's `waitUntilConnected`, until the consumer stops."""
        while not self.client.connected:
            if self.stopping.wait(0.05):
                raise Stopping("waiting for a connection")

    def get(self, path: str, watch=None, **why):
        return self._request("zk_read", "getData", path, lambda: self.client.get_async(path, watch=watch), **why)

    def get_children(self, path: str, watch=None, include_data: bool = False, **why):
        return self._request("zk_read", "getChildren", path,
                             lambda: self.client.get_children_async(path, watch=watch, include_data=include_data),
                             **why)

    def exists(self, path: str, watch=None, **why):
        return self._request("zk_read", "exists", path, lambda: self.client.exists_async(path, watch=watch), **why)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False):
        return self._request("zk_write", "create", path,
                             lambda: self.client.create_async(path, value, ephemeral=ephemeral, makepath=makepath))

    def set(self, path: str, value: bytes):
        return self._request("zk_write", "setData", path, lambda: self.client.set_async(path, value))

    def delete(self, path: str):
        return self._request("zk_write", "delete", path, lambda: self.client.delete_async(path))

    def ensure_path(self, path: str):
        return self._request("zk_write", "ensurePath", path, lambda: self.client.ensure_path_async(path))
