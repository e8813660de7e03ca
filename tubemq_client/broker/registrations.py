"""A TubeMQ broker's partition registrations: one holder per group and partition, fenced at the broker.

After Apache InLong TubeMQ's `tubemq-server/.../broker/BrokerServiceServer.java`
(client-balance consumers), without I/O. A client-balance consumer chooses
its partitions alone (`lab_cluster/assignment/tubemq.py`), and the broker is
what stops two of them from consuming one partition: it keeps one
registration per ``group:topic:partitionId``, and refuses whoever does not
hold it. Unlike RocketMQ's, this broker fences.

| request | no holder | held by the asker | held by another |
|---|---|---|---|
| register | granted | granted again | PARTITION_OCCUPIED (410) |
| unregister | HB_NO_NODE (411) | released (commit or roll back) | DUPLICATE_PARTITION (412) |
| heartbeat (per partition) | HB_NO_NODE | refreshed | DUPLICATE_PARTITION |
| fetch | HB_NO_NODE | served; counts as a heartbeat | DUPLICATE_PARTITION |
| commit | UNAUTHORIZED (401) | committed | UNAUTHORIZED |

A registration whose holder sent no heartbeat and no fetch for
`consumerRegTimeoutMs` (30 s, checked every second) is released and its
in-flight batch rolled back (`expire`). A register that finds another's
*stale* registration removes it but is still answered PARTITION_OCCUPIED: the
client's second attempt, a second later, gets it. A heartbeat's refusals come
back per partition inside a successful answer (the client then drops those
partitions), not as an error of the request.

    >>> clock = [0]
    >>> regs = Registrations(clock=lambda: clock[0])
    >>> regs.register("g", "t", 0, "node-a"), regs.register("g", "t", 0, "node-b")
    (200, 410)
    >>> regs.commit("g", "t", 0, "node-b")
    401
    >>> clock[0] = 30_001; regs.register("g", "t", 0, "node-b")  # node-a went silent: removed, yet refused
    410
    >>> regs.register("g", "t", 0, "node-b")                     # the client's second attempt
    200
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lab_cluster.clock import monotonic_ms

from ..codes import DUPLICATE_PARTITION, HB_NO_NODE, PARTITION_OCCUPIED, SUCCESS, UNAUTHORIZED

#: `BrokerConfig.consumerRegTimeoutMs`
CONSUMER_REG_TIMEOUT_MS = 30_000


@dataclass
class Registration:
    client_id: str
    last_heartbeat_ms: int


class Registrations:
    """One broker's `consumerRegisterMap` with its heartbeat timeouts; thread-safe."""

    def __init__(self, *, clock: Callable[[], int] = monotonic_ms, timeout_ms: int = CONSUMER_REG_TIMEOUT_MS,
                 on_release: Callable[[str, str, int, bool], None] | None = None):
        self.clock, self.timeout_ms = clock, timeout_ms
        #: (group, topic, partition, consumed): the offset manager commits (True) or rolls back (False)
        self.on_release = on_release or (lambda group, topic, partition, consumed: None)
        self.table: dict[tuple[str, str, int], Registration] = {}
        self._lock = threading.Lock()

    def _stale(self, reg: Registration, now: int) -> bool:
        return now - reg.last_heartbeat_ms > self.timeout_ms

    def register(self, group: str, topic: str, partition: int, client_id: str) -> int:
        """`inProcessConsumerRegister`: grant a free partition or the asker's own; else PARTITION_OCCUPIED,
        after removing the holder's registration if it is stale."""
        key, now = (group, topic, partition), self.clock()
        with self._lock:
            held = self.table.get(key)
            if held is None or held.client_id == client_id:
                self.table[key] = Registration(client_id, now)
                return SUCCESS
            if self._stale(held, now):  # "[Duplicated Register] Remove Invalid Consumer Register"
                del self.table[key]
                self.on_release(group, topic, partition, False)
            return PARTITION_OCCUPIED

    def unregister(self, group: str, topic: str, partition: int, client_id: str, consumed: bool = True) -> int:
        """`inProcessConsumerUnregister`: the holder lets go, committing its last batch if it consumed it."""
        key = (group, topic, partition)
        with self._lock:
            code = self._holder_code(key, client_id, HB_NO_NODE)
            if code == SUCCESS:
                del self.table[key]
        if code == SUCCESS:
            self.on_release(group, topic, partition, consumed)
        return code

    def heartbeat(self, group: str, partitions: Iterable[tuple[str, int]], client_id: str) -> dict:
        """`consumerHeartbeatC2B`: {(topic, partition): failure code} for the partitions refused (the answer
        itself succeeds); the others are refreshed."""
        failures, now = {}, self.clock()
        with self._lock:
            for topic, partition in partitions:
                code = self._holder_code((group, topic, partition), client_id, HB_NO_NODE)
                if code == SUCCESS:
                    self.table[(group, topic, partition)].last_heartbeat_ms = now
                else:
                    failures[(topic, partition)] = code
        return failures

    def fetch(self, group: str, topic: str, partition: int, client_id: str) -> int:
        """`getMessage`'s check: only the holder is served, and a fetch refreshes its heartbeat."""
        key = (group, topic, partition)
        with self._lock:
            code = self._holder_code(key, client_id, HB_NO_NODE)
            if code == SUCCESS:
                self.table[key].last_heartbeat_ms = self.clock()
            return code

    def commit(self, group: str, topic: str, partition: int, client_id: str) -> int:
        """`consumerCommitC2B`'s check: UNAUTHORIZED unless the asker holds the partition."""
        with self._lock:
            return SUCCESS if self._holder_code((group, topic, partition), client_id, HB_NO_NODE) == SUCCESS \
                else UNAUTHORIZED

    def expire(self) -> list[tuple[str, str, int]]:
        """The heartbeat manager's timeout: release registrations silent for more than the timeout, rolling
        back their in-flight batch; returns them."""
        now, released = self.clock(), []
        with self._lock:
            for key, reg in list(self.table.items()):
                if self._stale(reg, now):
                    del self.table[key]
                    released.append(key)
        for group, topic, partition in released:
            self.on_release(group, topic, partition, False)
        return released

    def holder(self, group: str, topic: str, partition: int) -> str | None:
        with self._lock:
            reg = self.table.get((group, topic, partition))
            return reg.client_id if reg is not None else None

    def _holder_code(self, key, client_id: str, when_free: int) -> int:
        held = self.table.get(key)
        if held is None:
            return when_free
        return SUCCESS if held.client_id == client_id else DUPLICATE_PARTITION
