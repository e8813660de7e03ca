"""A RocketMQ broker's queue locks, for orderly consumers: held by one client id, expiring after 60 s.

After RocketMQ 4.9.8's `broker/client/rebalance/RebalanceLockManager.java`,
without I/O. An orderly consumer locks a queue (LOCK_BATCH_MQ) before it
consumes it and renews its locks every 20 s; the broker grants a lock that is
free, already the asker's (renewed), or expired, i.e. not renewed for more
than `REBALANCE_LOCK_MAX_LIVE_TIME` (60 s), in which case the asker takes it
over. Nothing else releases a lock: not a closed connection, not an
unregister, not the channel scan. Only its holder's UNLOCK_BATCH_MQ does, and
an unlock by anyone else is ignored.

This is RocketMQ's own answer to double consumption for orderly consumers: a
queue two consumers both allocated to themselves is consumed by one, and a
dead holder's queue is free again 60 s after its last renewal::

    >>> clock = [0]
    >>> locks = RebalanceLockManager(clock=lambda: clock[0])
    >>> locks.try_lock_batch("g", {"q0", "q1"}, "c1") == {"q0", "q1"}
    True
    >>> locks.try_lock_batch("g", {"q1", "q2"}, "c2")       # q1 is c1's
    {'q2'}
    >>> clock[0] = 60_001; locks.try_lock_batch("g", {"q1"}, "c2")  # c1 stopped renewing: c2 takes it over
    {'q1'}
    >>> locks.unlock_batch("g", {"q1"}, "c1"); locks.holder("g", "q1")  # c1 wakes up: q1 is not its to unlock
    'c2'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from lab_cluster.clock import monotonic_ms

#: `rocketmq.broker.rebalance.lockMaxLiveTime`, default 60000
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


@dataclass
class LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, *, clock: Callable[[], int] = monotonic_ms,
                 max_live_time_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS):
        self.clock = clock
        self.max_live_time_ms = max_live_time_ms
        self.table: dict[str, dict[Hashable, LockEntry]] = {}  # group -> {message queue: entry}
        self._lock = threading.Lock()

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update_ms > self.max_live_time_ms

    def try_lock_batch(self, group: str, queues: Iterable[Hashable], client_id: str) -> set:
        """`tryLockBatch`: the queues now locked by `client_id` (renewed, newly granted or taken over)."""
        now, granted = self.clock(), set()
        with self._lock:
            entries = self.table.setdefault(group, {})
            for queue in queues:
                entry = entries.get(queue)
                if entry is None:
                    entries[queue] = LockEntry(client_id, now)
                elif entry.client_id == client_id and not self._expired(entry, now):
                    entry.last_update_ms = now  # renewed
                elif self._expired(entry, now):
                    entry.client_id, entry.last_update_ms = client_id, now  # "lock expired, I got it"
                else:
                    continue  # "locked by other client"
                granted.add(queue)
        return granted

    def unlock_batch(self, group: str, queues: Iterable[Hashable], client_id: str) -> None:
        """`unlockBatch`: release the queues `client_id` holds; anyone else's stay (RocketMQ logs a warning)."""
        with self._lock:
            entries = self.table.get(group, {})
            for queue in queues:
                entry = entries.get(queue)
                if entry is not None and entry.client_id == client_id:
                    del entries[queue]

    def holder(self, group: str, queue: Hashable) -> str | None:
        """Who holds `queue` now (None if nobody, or if the lock expired)."""
        with self._lock:
            entry = self.table.get(group, {}).get(queue)
            return entry.client_id if entry is not None and not self._expired(entry, self.clock()) else None
