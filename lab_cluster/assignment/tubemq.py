"""TubeMQ's client balance: a node takes the partitions whose key hashes to its node id, knowing no one else.

With Apache InLong TubeMQ's `ClientBalanceConsumer` there is no membership at
all: every client is started with the group's node count (`sourceCount`) and
its own `nodeId`, and decides alone which partitions are its own. TubeMQ's own
example (`tubemq-example/.../ClientBalanceConsumerExample.java`) keeps the
partition keys (``brokerId:topic:partitionId``, `Partition.getPartitionKey`)
whose Java `String.hashCode`, read as an unsigned 32-bit number, is
`nodeId` modulo `sourceCount`::

    ((long) key.hashCode() & 0xffffffffL) % sourceCount == nodeId

Nothing ties the nodes' choices together: two nodes started with the same
`nodeId` both pick the same partitions (the broker then refuses the second
registration: PARTITION_OCCUPIED), and a node that stops leaves its
partitions to nobody until the others are restarted with a new
`sourceCount`. Six partitions of `t1` on broker 1, three nodes::

    >>> keys = [f"1:t1:{p}" for p in range(6)]
    >>> {node: modulo(keys, 3, node) for node in range(3)}
    {0: ['1:t1:0', '1:t1:3'], 1: ['1:t1:1', '1:t1:4'], 2: ['1:t1:2', '1:t1:5']}
"""

from __future__ import annotations

from collections.abc import Iterable

from ..java_hash import java_string_hash


def node_of(partition_key: str, source_count: int) -> int:
    """The node id whose share `partition_key` is in."""
    return (java_string_hash(partition_key) & 0xFFFFFFFF) % source_count


def modulo(partition_keys: Iterable[str], source_count: int, node_id: int) -> list[str]:
    """The example's filter: the keys of node `node_id` among `source_count` nodes, sorted (a `TreeSet`)."""
    if source_count < 1 or not 0 <= node_id < source_count:
        raise ValueError(f"nodeId {node_id} must be in [0, sourceCount) with sourceCount {source_count} >= 1")
    return sorted(k for k in set(partition_keys) if node_of(k, source_count) == node_id)
