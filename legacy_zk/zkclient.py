"""A kazoo client that records every ZooKeeper request a consumer makes.

The herd experiment counts each consumer's ZooKeeper reads and writes per
membership change, so every call goes through `TracedZk`, which records a
`zk_read` or `zk_write` event (operation and path) before returning the
answer. Nothing else in `legacy_zk` calls kazoo's request methods directly.
Watch registration rides on reads (`watch=`), as in ZooKeeper itself.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from lab_cluster.trace import TraceRecorder


class TracedZk:
    def __init__(self, client: KazooClient, trace: TraceRecorder):
        self.client = client
        self.trace = trace

    def _read(self, op: str, path: str) -> None:
        self.trace.record("zk_read", op=op, path=path)

    def _write(self, op: str, path: str) -> None:
        self.trace.record("zk_write", op=op, path=path)

    def get(self, path: str, watch=None):
        self._read("getData", path)
        return self.client.get(path, watch=watch)

    def get_children(self, path: str, watch=None, include_data: bool = False):
        self._read("getChildren", path)
        return self.client.get_children(path, watch=watch, include_data=include_data)

    def exists(self, path: str, watch=None):
        self._read("exists", path)
        return self.client.exists(path, watch=watch)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False):
        self._write("create", path)
        return self.client.create(path, value, ephemeral=ephemeral, makepath=makepath)

    def set(self, path: str, value: bytes):
        self._write("setData", path)
        return self.client.set(path, value)

    def delete(self, path: str):
        self._write("delete", path)
        return self.client.delete(path)

    def ensure_path(self, path: str):
        self._write("ensurePath", path)
        return self.client.ensure_path(path)
