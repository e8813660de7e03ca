"""Offsets in ZooKeeper: `commitOffsets` and `fetchOffsets` of Kafka 0.8's consumer.

The committed offset of a partition is the *next* offset the group will
consume, stored as a decimal string in `/consumers/<group>/offsets/<topic>/<p>`.
ZooKeeper accepts any write: nothing fences a consumer that lost its partitions
(a zombie), so its commit can move a partition's offset backwards. Each commit
is recorded as a `commit` event with `outcome` `accepted` (always, in this era).
"""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from lab_cluster.trace import TraceRecorder

from . import znodes
from .zkclient import TracedZk


def fetch_offset(zk: TracedZk, group: str, topic: str, partition: int) -> int | None:
    try:
        data, _ = zk.get(znodes.offset_path(group, topic, partition))
    except NoNodeError:
        return None
    return int(data.decode()) if data else None


def commit_offset(zk: TracedZk, trace: TraceRecorder, group: str, topic: str, partition: int,
                  offset: int, member: str, why: str = "") -> None:
    """0.8's `updatePersistentPath`: set the offset node, creating it (and its parents) if it is missing."""
    path = znodes.offset_path(group, topic, partition)
    value = str(offset).encode()
    try:
        zk.set(path, value)
    except NoNodeError:
        try:
            zk.create(path, value, makepath=True)
        except NodeExistsError:
            zk.set(path, value)
    trace.record("commit", topic=topic, partition=partition, offset=offset, member=member, outcome="accepted",
                 why=why)
