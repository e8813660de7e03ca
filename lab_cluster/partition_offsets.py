"""Consumer offsets kept with their partition, for the designs whose brokers store them (RocketMQ, TubeMQ).

RocketMQ's and TubeMQ's brokers hold consumer offsets in memory and flush
them to disk every 5 s (RocketMQ's `flushConsumerOffsetInterval`, TubeMQ's
`offsetStgCacheFlushMs`). A RocketMQ queue or a TubeMQ partition belongs to
one broker: when that broker dies, its queues wait for it, and come back with
it and with the offsets it had flushed.

A lab partition instead outlives its broker: its log is a shared file and its
leadership moves (`partition_log.py`), and the RocketMQ and TubeMQ designs
name a queue after its current leader. So the offsets are kept the same way
as the log, beside it: `<logs_dir>/<topic>-<partition>.<system>-offsets.json`,
{group: offset}. The broker that leads the partition writes it every 5 s
(`OffsetFlusher`), once more when it stops leading it and when it shuts down,
each time only the offsets committed to it since its last write (an offset it
read from the file is never written back over a fresher one); a broker that
starts leading it forgets what it held of that partition and, for a group it
has no offset for, reads the file (`load`). Two brokers write one file only
while its leadership moves: a lock file makes each write whole. A broker that dies loses what it had not
flushed, as a real one's crash does, and nothing more: the new leader goes on
from the offsets of at most 5 s before. This is the lab's departure: the real
systems' offsets come back when the broker does, the lab's move with the
leader.

    >>> import tempfile
    >>> store = PartitionOffsets(tempfile.mkdtemp(), "rocketmq")
    >>> store.load("t", 0)
    {}
    >>> store.save("t", 0, {"g": 17}); store.save("t", 0, {"h": 3}); store.load("t", 0)
    {'g': 17, 'h': 3}
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Protocol

#: RocketMQ's `flushConsumerOffsetInterval` and TubeMQ's `offsetStgCacheFlushMs`, both 5 000 ms by default
FLUSH_INTERVAL_MS = 5_000


class PartitionOffsets:
    """The offsets files of one system's consumer groups, in a trial's logs directory."""

    def __init__(self, logs_dir: str | Path, system: str):
        self.logs_dir = Path(logs_dir)
        self.system = system
        self._lock = threading.Lock()

    def path(self, topic: str, partition: int) -> Path:
        return self.logs_dir / f"{topic}-{partition}.{self.system}-offsets.json"

    def load(self, topic: str, partition: int) -> dict[str, int]:
        """{group: offset} as last flushed for the partition ({} if never)."""
        try:
            return {str(g): int(o) for g, o in json.loads(self.path(topic, partition).read_text()).items()}
        except (OSError, ValueError):
            return {}

    def save(self, topic: str, partition: int, offsets: dict[str, int]) -> None:
        """Write `offsets` over the file's (groups not given keep theirs); atomically, so a reader or a crash
        never sees half a file."""
        if not offsets:
            return
        path = self.path(topic, partition)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another broker's write of this file (a leadership moving) waits
            merged = {**self.load(topic, partition), **offsets}
            temp = path.with_suffix(f".{os.getpid()}.tmp")
            temp.write_text(json.dumps(merged, sort_keys=True))
            temp.replace(path)


class CommittedOffsets(Protocol):
    """What a plug-in's offset store gives the flusher (`rocketmq_client/broker/offsets.py`,
    `tubemq_client/broker/offsets.py`)."""

    def take_committed(self, topic: str, partition: int) -> dict[str, int]: ...

    def forget(self, topic: str, partition: int) -> None: ...


class OffsetFlusher:
    """Writes a plug-in's committed offsets beside the logs of the partitions its broker leads: `first_ms` after
    the start (default: one interval), then every `FLUSH_INTERVAL_MS`, when the broker stops leading a partition,
    and at `stop()`; a partition whose leadership moves is forgotten (the file is then the truth)."""

    def __init__(self, broker, files: PartitionOffsets, offsets: CommittedOffsets, *, first_ms: int | None = None):
        self.broker, self.files, self.offsets = broker, files, offsets
        self._stop = threading.Event()
        broker.on_leadership(self._leadership)
        threading.Thread(target=self._run, args=(first_ms,), name=f"{files.system}-offsets-flush",
                         daemon=True).start()

    def flush(self, only: tuple[str, int] | None = None) -> None:
        for topic, partition in ([only] if only else self.broker.led_partitions()):
            self.files.save(topic, partition, self.offsets.take_committed(topic, partition))

    def stop(self) -> None:
        """The broker shuts down: a last flush (RocketMQ's and TubeMQ's brokers persist theirs on shutdown)."""
        self._stop.set()
        self.flush()

    def _leadership(self, topic: str, partition: int, leads: bool) -> None:
        if not leads:
            self.flush((topic, partition))  # what it held goes to the next leader
        self.offsets.forget(topic, partition)

    def _run(self, first_ms: int | None) -> None:
        wait_ms = FLUSH_INTERVAL_MS if first_ms is None else first_ms
        while not self._stop.wait(wait_ms / 1000):
            self.flush()
            wait_ms = FLUSH_INTERVAL_MS
