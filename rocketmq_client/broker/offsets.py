"""A RocketMQ broker's consumer offsets: whatever any client sends is stored, as RocketMQ 4.9.8 does.

After `broker/offset/ConsumerOffsetManager.java` and the handlers of
`ConsumerManageProcessor.java`, without I/O. Offsets are kept per
``topic@group`` and queue id. `commit_offset` (UPDATE_CONSUMER_OFFSET, and
the offset a PULL_MESSAGE carries) is a plain put: no owner, lock or generation is
checked, and an offset smaller than the stored one is accepted (RocketMQ only
logs "[NOTIFYME] update consumer offset less than store"). This is the
difference from Kafka's coordinator that the zombie experiment shows: a
consumer that lost its queue can still move its offset, even backwards.

`query_offset` (QUERY_CONSUMER_OFFSET) answers the stored offset or None
(QUERY_NOT_FOUND). The broker's first-time quirk (offset 0 rather than
not-found for a young queue still in memory) is not modelled (`service.py`
states it).

    >>> offsets = ConsumerOffsetManager()
    >>> offsets.commit_offset("g", "t", 0, 42)
    >>> offsets.commit_offset("g", "t", 0, 17)   # another client, an older position: accepted
    >>> offsets.query_offset("g", "t", 0), offsets.query_offset("g", "t", 1)
    (17, None)

What a flush writes is what was committed since the last one, never an
offset read back from the flushed file (`loader`)::

    >>> offsets.take_committed("t", 0), offsets.take_committed("t", 0)
    ({'g': 17}, {})
    >>> loaded = ConsumerOffsetManager(loader=lambda topic, queue_id: {"g": 5})
    >>> loaded.query_offset("g", "t", 0), loaded.take_committed("t", 0)
    (5, {})
"""

from __future__ import annotations

import threading
from collections.abc import Callable

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    """`loader(topic, queue_id)`: {group: offset} as last flushed for the queue (`lab_cluster/partition_offsets.py`),
    read for a group this broker holds no offset for; None: memory only."""

    def __init__(self, loader: Callable[[str, int], dict[str, int]] | None = None):
        self.offsets: dict[str, dict[int, int]] = {}  # "topic@group" -> {queue id: offset}
        self.loader = loader
        self._dirty: set[tuple[str, int]] = set()  # ("topic@group", queue id) committed since the last flush
        self._lock = threading.Lock()

    @staticmethod
    def key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.offsets.setdefault(self.key(group, topic), {})[queue_id] = offset
            self._dirty.add((self.key(group, topic), queue_id))

    def query_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            stored = self.offsets.get(self.key(group, topic), {}).get(queue_id)
        if stored is None and self.loader is not None:
            stored = self.loader(topic, queue_id).get(group)
            if stored is not None:
                with self._lock:
                    stored = self.offsets.setdefault(self.key(group, topic), {}).setdefault(queue_id, stored)
        return stored

    def take_committed(self, topic: str, queue_id: int) -> dict[str, int]:
        """{group: offset} of one queue committed since the last call (what a flush writes: never an offset
        read from the file, which may be older than the file is by now)."""
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        with self._lock:
            taken = {(k, q) for k, q in self._dirty if k.startswith(prefix) and q == queue_id}
            self._dirty -= taken
            return {k[len(prefix):]: self.offsets[k][queue_id] for k, _ in taken}

    def forget(self, topic: str, queue_id: int) -> None:
        """Drop what memory holds of one queue (its leadership moved: the file is the truth)."""
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        with self._lock:
            for k, q in self.offsets.items():
                if k.startswith(prefix):
                    q.pop(queue_id, None)
                    self._dirty.discard((k, queue_id))
