"""A kazoo client that records every ZooKeeper request a consumer makes, and never waits forever.

The herd experiment counts each consumer's ZooKeeper reads and writes per
membership change, so every call goes through `TracedZk`, which records a
`zk_read` or `zk_write` event (operation and path) before sending it. Nothing
else in `legacy_zk` calls kazoo's request methods. Watches ride on reads
(`watch=`), as in ZooKeeper itself.

Each request waits at most `timeout_s` for its answer (kazoo's own
synchronous calls would wait for a reconnection indefinitely, like 0.8's
`ZkClient.retryUntilConnected`); a request that times out raises
`KazooTimeoutError`, which the rebalance treats as a failed attempt.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from lab_cluster.trace import TraceRecorder


class TracedZk:
    def __init__(self, client: KazooClient, trace: TraceRecorder, timeout_s: float):
        self.client = client
        self.trace = trace
        self.timeout_s = timeout_s

    def _read(self, op: str, path: str) -> None:
        self.trace.record("zk_read", op=op, path=path)

    def _write(self, op: str, path: str) -> None:
        self.trace.record("zk_write", op=op, path=path)

    def get(self, path: str, watch=None):
        self._read("getData", path)
        return self.client.get_async(path, watch=watch).get(timeout=self.timeout_s)

    def get_children(self, path: str, watch=None, include_data: bool = False):
        self._read("getChildren", path)
        return self.client.get_children_async(path, watch=watch, include_data=include_data).get(timeout=self.timeout_s)

    def exists(self, path: str, watch=None):
        self._read("exists", path)
        return self.client.exists_async(path, watch=watch).get(timeout=self.timeout_s)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False):
        self._write("create", path)
        return self.client.create_async(path, value, ephemeral=ephemeral, makepath=makepath).get(timeout=self.timeout_s)

    def set(self, path: str, value: bytes):
        self._write("setData", path)
        return self.client.set_async(path, value).get(timeout=self.timeout_s)

    def delete(self, path: str):
        self._write("delete", path)
        return self.client.delete_async(path).get(timeout=self.timeout_s)

    def ensure_path(self, path: str):
        self._write("ensurePath", path)
        return self.client.ensure_path_async(path).get(timeout=self.timeout_s)
