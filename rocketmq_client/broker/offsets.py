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
"""

from __future__ import annotations

import threading

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self):
        self.offsets: dict[str, dict[int, int]] = {}  # "topic@group" -> {queue id: offset}
        self._lock = threading.Lock()

    @staticmethod
    def key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.offsets.setdefault(self.key(group, topic), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            return self.offsets.get(self.key(group, topic), {}).get(queue_id)
