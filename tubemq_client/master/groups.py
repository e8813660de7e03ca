"""What a TubeMQ master knows of client-balance groups: who registered, with which node id, and who went silent.

After Apache InLong TubeMQ's `tubemq-server/.../master/nodemanage/nodeconsumer/ConsumeGroupInfo.java`
(`addConsumer`, `validConsumerInfo`) and the master's heartbeat timeout
(`MasterConfig.consumerHeartbeatTimeoutMs`, 30 s, scanned every second), without
I/O. The master assigns nothing to a client-balance group and tells its
members nothing; it only checks that they can coexist:

- the first consumer of an empty group fixes its topic set and, if it gave
  one (> 0), its `sourceCount`;
- a later consumer must subscribe the same topics
  (CLIENT_INCONSISTENT_TOPICSET, 425) and, where the group has a `sourceCount`,
  give the same one (CLIENT_INCONSISTENT_SOURCECOUNT, 429) and a `nodeId` no
  *other* consumer id holds (CLIENT_DUPLICATE_INDEXID, 430);
- a `nodeId` outside ``[0, sourceCount)`` is BAD_REQUEST (400) (`TMaster.consumerRegisterC2MV2`);
- a heartbeat from a consumer it does not know is HB_NO_NODE (411): the client
  registers again;
- a consumer silent for 30 s is removed (`ReleaseConsumer`); a group left
  empty is removed, so its next first consumer may bring another `sourceCount`.

So a node that crashes and restarts with its old `nodeId` (and a new consumer
id) is refused until the master times out the old one::

    >>> clock = [0]
    >>> groups = GroupTable(clock=lambda: clock[0])
    >>> groups.add_consumer("g", "a-1", ["t"], source_count=2, node_id=0)
    200
    >>> groups.add_consumer("g", "b-1", ["t"], source_count=3, node_id=1)
    429
    >>> groups.add_consumer("g", "a-2", ["t"], source_count=2, node_id=0)  # a restarted: a-1 still holds 0
    430
    >>> clock[0] = 30_001; groups.expire(); groups.add_consumer("g", "a-2", ["t"], source_count=2, node_id=0)
    ['g#a-1']
    200
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lab_cluster.clock import monotonic_ms

from ..codes import (
    BAD_REQUEST,
    CLIENT_DUPLICATE_INDEXID,
    CLIENT_INCONSISTENT_SOURCECOUNT,
    CLIENT_INCONSISTENT_TOPICSET,
    HB_NO_NODE,
    SUCCESS,
)

#: `MasterConfig.consumerHeartbeatTimeoutMs`
CONSUMER_HEARTBEAT_TIMEOUT_MS = 30_000
#: `TBaseConstants.META_VALUE_UNDEFINED`: no sourceCount (or nodeId) given
UNDEFINED = -2


@dataclass
class Member:
    node_id: int
    last_heartbeat_ms: int
    reported: list[str] = field(default_factory=list)  # the partition keys it last said it holds


@dataclass
class Group:
    topics: frozenset[str]
    source_count: int  # UNDEFINED: the first consumer gave none, and no check applies
    members: dict[str, Member] = field(default_factory=dict)


class GroupTable:
    """The master's client-balance groups; thread-safe."""

    def __init__(self, *, clock: Callable[[], int] = monotonic_ms, timeout_ms: int = CONSUMER_HEARTBEAT_TIMEOUT_MS):
        self.clock, self.timeout_ms = clock, timeout_ms
        self.groups: dict[str, Group] = {}
        self._lock = threading.Lock()

    def add_consumer(self, group: str, consumer_id: str, topics: Iterable[str], *, source_count: int,
                     node_id: int) -> int:
        """`consumerRegisterC2MV2` for a client-balance consumer: SUCCESS or why it is refused."""
        topics = frozenset(topics)
        if source_count > 0 and not 0 <= node_id < source_count:
            return BAD_REQUEST
        source_count = source_count if source_count > 0 else UNDEFINED
        with self._lock:
            info = self.groups.get(group)
            if info is None or not info.members:
                info = self.groups[group] = Group(topics, source_count)
            elif info.topics != topics:
                return CLIENT_INCONSISTENT_TOPICSET
            elif info.source_count > 0:
                if source_count != info.source_count:
                    return CLIENT_INCONSISTENT_SOURCECOUNT
                if any(m.node_id == node_id for cid, m in info.members.items() if cid != consumer_id):
                    return CLIENT_DUPLICATE_INDEXID
            info.members[consumer_id] = Member(node_id, self.clock())
            return SUCCESS

    def heartbeat(self, group: str, consumer_id: str, reported: list[str] | None = None) -> int:
        """`consumerHeartbeatC2MV2`: refresh, and record the partitions it reports; HB_NO_NODE if unknown."""
        with self._lock:
            member = self.groups.get(group, Group(frozenset(), UNDEFINED)).members.get(consumer_id)
            if member is None:
                return HB_NO_NODE
            member.last_heartbeat_ms = self.clock()
            if reported is not None:
                member.reported = sorted(reported)
            return SUCCESS

    def remove(self, group: str, consumer_id: str) -> bool:
        """`consumerCloseClientC2M` (a clean shutdown), or a timeout: the consumer leaves; an empty group goes."""
        with self._lock:
            info = self.groups.get(group)
            if info is None or info.members.pop(consumer_id, None) is None:
                return False
            if not info.members:
                del self.groups[group]
            return True

    def expire(self) -> list[str]:
        """The heartbeat manager's scan: remove consumers silent for more than the timeout; their `group#id`."""
        now = self.clock()
        with self._lock:
            gone = [(g, cid) for g, info in self.groups.items() for cid, m in info.members.items()
                    if now - m.last_heartbeat_ms > self.timeout_ms]
        for g, cid in gone:
            self.remove(g, cid)
        return [f"{g}#{cid}" for g, cid in gone]
