"""A TubeMQ broker's consume offsets: stored per group and partition, moved by the broker itself.

After Apache InLong TubeMQ's `tubemq-server/.../broker/offset/DefaultOffsetManager.java`,
without I/O. A TubeMQ consumer never sends an offset value when it confirms a
batch: the broker keeps, beside each stored offset, the *in-flight* delta of
the batch it last handed out (`bookOffset`), and a confirm either adds it to
the stored offset (the batch was consumed) or drops it (rolled back: the next
fetch reads the same records again). Only a registration can set the stored
offset, and only if the client asks (`connect2Partition` with a bootstrap
offset >= 0).

- `load_offset` (`loadOffset`, on register): a group with no record for the
  partition starts at the log's start for READ_NORMAL, at its end otherwise;
  a requested offset >= 0 (or READ_FROM_MAX_ALWAYS) overwrites the stored one,
  clamped to the log; the in-flight delta is reset.
- `book` (a fetch, `getOffset` then `bookOffset`, auto-commit mode): a fetch
  with `last_pack_consumed` first commits the previous batch; the fetch reads
  from the stored offset, and the records it hands out *replace* the
  in-flight delta, so a batch never confirmed is read again.
- `commit` (`commitOffset`): consumed: stored += in-flight; else dropped.

    >>> o = OffsetManager()
    >>> o.load_offset("g", "t", 0, READ_NORMAL, -1, min_offset=0, max_offset=100)
    0
    >>> o.fetch_offset("g", "t", 0, last_pack_consumed=False); o.book("g", "t", 0, 32)  # records 0..31 out
    0
    >>> o.commit("g", "t", 0, consumed=True), o.position("g", "t", 0)
    (32, 32)
    >>> o.fetch_offset("g", "t", 0, last_pack_consumed=False); o.book("g", "t", 0, 10)
    32
    >>> o.commit("g", "t", 0, consumed=False)  # rolled back: 32..41 will be read again
    32
    >>> o.fetch_offset("g", "t", 0, last_pack_consumed=False); o.book("g", "t", 0, 10)
    32
    >>> o.fetch_offset("g", "t", 0, last_pack_consumed=True)  # the next fetch confirms the last batch
    42
    >>> o.take_committed("t", 0), o.take_committed("t", 0)  # what a flush writes: what moved since the last
    ({'g': 42}, {})
"""

from __future__ import annotations

import threading
from collections.abc import Callable

# `TBaseConstants.CONSUME_MODEL_READ_*`
READ_NORMAL, READ_FROM_MAX, READ_FROM_MAX_ALWAYS = 0, 1, 2


class OffsetManager:
    """Stored offsets and in-flight deltas per (group, topic, partition); thread-safe. `loader(topic, partition)`:
    {group: offset} as last flushed for the partition (`lab_cluster/partition_offsets.py`), read when a group
    registers a partition this broker holds no offset for; None: memory only."""

    def __init__(self, loader: Callable[[str, int], dict[str, int]] | None = None):
        self.stored: dict[tuple[str, str, int], int] = {}
        self.in_flight: dict[tuple[str, str, int], int] = {}
        self.loader = loader
        self._dirty: set[tuple[str, str, int]] = set()  # keys whose stored offset moved since the last flush
        self._lock = threading.Lock()

    def load_offset(self, group: str, topic: str, partition: int, read_status: int, req_offset: int, *,
                    min_offset: int, max_offset: int) -> int:
        key = (group, topic, partition)
        flushed = None
        if self.loader is not None and key not in self.stored:
            flushed = self.loader(topic, partition).get(group)
        with self._lock:
            if key not in self.stored:
                if flushed is not None:
                    self.stored[key] = min(max(flushed, min_offset), max_offset)
                else:
                    self.stored[key] = min_offset if read_status == READ_NORMAL else max_offset
                    self._dirty.add(key)
            if req_offset >= 0 or read_status == READ_FROM_MAX_ALWAYS:
                wanted = max_offset if read_status == READ_FROM_MAX_ALWAYS and req_offset < 0 else req_offset
                self.stored[key] = min(max(wanted, min_offset), max_offset)
                self._dirty.add(key)
            self.in_flight[key] = 0
            return self.stored[key]

    def position(self, group: str, topic: str, partition: int) -> int:
        """Where the stored offset is (the next fetch reads from it, after committing if asked)."""
        with self._lock:
            return self.stored.get((group, topic, partition), 0)

    def fetch_offset(self, group: str, topic: str, partition: int, *, last_pack_consumed: bool) -> int:
        """`getOffset` (auto-commit mode): commit the previous batch if the client says it was consumed; the
        offset this fetch reads from."""
        key = (group, topic, partition)
        with self._lock:
            if last_pack_consumed:
                self.stored[key] = self.stored.get(key, 0) + self.in_flight.get(key, 0)
                self.in_flight[key] = 0
                self._dirty.add(key)
            return self.stored.setdefault(key, 0)

    def book(self, group: str, topic: str, partition: int, count: int) -> None:
        """`bookOffset` (auto-commit mode): the `count` records this fetch handed out are the in-flight delta."""
        if count:
            with self._lock:
                self.in_flight[(group, topic, partition)] = count

    def take_committed(self, topic: str, partition: int) -> dict[str, int]:
        """{group: stored offset} of one partition, for the groups whose offset moved since the last call (what a
        flush writes; in-flight deltas are not offsets, and an offset read from the file is not written back)."""
        with self._lock:
            taken = {k for k in self._dirty if k[1:] == (topic, partition)}
            self._dirty -= taken
            return {k[0]: self.stored[k] for k in taken}

    def forget(self, topic: str, partition: int) -> None:
        """Drop what memory holds of one partition (its leadership moved: the file is the truth)."""
        with self._lock:
            for table in (self.stored, self.in_flight):
                for key in [k for k in table if k[1:] == (topic, partition)]:
                    del table[key]
            self._dirty = {k for k in self._dirty if k[1:] != (topic, partition)}

    def commit(self, group: str, topic: str, partition: int, *, consumed: bool) -> int:
        """`commitOffset`: add the in-flight delta to the stored offset (consumed) or drop it; the stored offset."""
        key = (group, topic, partition)
        with self._lock:
            if consumed:
                self.stored[key] = self.stored.get(key, 0) + self.in_flight.get(key, 0)
                self._dirty.add(key)
            self.in_flight[key] = 0
            return self.stored.get(key, 0)
