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

The master also keeps, per group, the topic metadata its members are given
(`ConsumeGroupInfo.topicMetaInfoMap`: each topic's partition count here, with
`topicMetaInfoId`, the wall-clock time it last changed). It is read from the
brokers only when the group has none yet (`TMaster.consumerGetPartMetaInfoC2M`
calls `freshTopicMetaInfo` while the id is undefined) and then once per
balance pass (`TMaster.balance` -> `processClientBalanceMetaInfo` ->
`freshTopicMetaInfo` -> `updCsmTopicMetaInfo`, which changes the id only if
something changed): a topic that grows reaches a client-balance group at the
master's next pass, not before (`refresh_topic_meta`). A member's master
heartbeat brings the metadata along only when the member has partitions, and
stored none newer for `maxMetaForceUpdatePeriodMs` (3 min, at least 1 min;
`consumerHeartbeatC2MV2`), and then the list only if its id is not the
member's (`heartbeat_meta`).

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

and a topic's growth reaches the group's metadata only when the pass refreshes it::

    >>> counts = {"t": 4}
    >>> groups.topic_meta("g", counts.get)  # the first query reads the brokers
    (30001, {'t': 4})
    >>> counts["t"] = 8; clock[0] = 30_500
    >>> groups.topic_meta("g", counts.get)  # later ones read the group's copy
    (30001, {'t': 4})
    >>> groups.refresh_topic_meta(counts.get), groups.topic_meta("g", counts.get)  # the balance pass
    (['g'], (30500, {'t': 8}))
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lab_cluster.clock import monotonic_ms, wall_clock_ms

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
#: `TBaseConstants.META_VALUE_UNDEFINED`: no sourceCount (or nodeId) given; no topic metadata yet
UNDEFINED = -2
#: `TBaseConstants.CFG_DEF_META_FORCE_UPDATE_PERIOD` and `CFG_MIN_...`: `MasterConfig.maxMetaForceUpdatePeriodMs`
MAX_META_FORCE_UPDATE_PERIOD_MS, MIN_META_FORCE_UPDATE_PERIOD_MS = 180_000, 60_000


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
    topic_meta: dict[str, int] = field(default_factory=dict)  # `topicMetaInfoMap`: topic -> its partition count
    topic_meta_id: int = UNDEFINED  # `topicMetaInfoId`: wall-clock ms of its last change


class GroupTable:
    """The master's client-balance groups; thread-safe."""

    def __init__(self, *, clock: Callable[[], int] = monotonic_ms, timeout_ms: int = CONSUMER_HEARTBEAT_TIMEOUT_MS,
                 wall_clock: Callable[[], int] | None = None,
                 meta_force_update_period_ms: int = MAX_META_FORCE_UPDATE_PERIOD_MS):
        """`clock` times heartbeats; `wall_clock` (by default `clock` if one is given, else the wall clock) stamps
        the topic metadata and is compared with the times members report (TubeMQ: `System.currentTimeMillis`)."""
        self.clock, self.timeout_ms = clock, timeout_ms
        self.wall_clock = wall_clock or (clock if clock is not monotonic_ms else wall_clock_ms)
        self.meta_force_update_period_ms = max(meta_force_update_period_ms, MIN_META_FORCE_UPDATE_PERIOD_MS)
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

    # -- the topic metadata of a group ---------------------------------------------------------------------
    def topic_meta(self, group: str, partition_count: Callable[[str], int | None]) -> tuple[int, dict[str, int]] | None:
        """`ConsumeGroupInfo.getTopicMetaInfo` as `consumerGetPartMetaInfoC2M` reads it: (id, {topic: partitions}),
        read from the brokers (`partition_count(topic)`) first if the group has none yet; None for a group the master
        does not know."""
        with self._lock:
            info = self.groups.get(group)
            if info is None:
                return None
            undefined = info.topic_meta_id == UNDEFINED
        if undefined:
            self._fresh(group, partition_count)
        with self._lock:
            info = self.groups.get(group)
            return None if info is None else (info.topic_meta_id, dict(info.topic_meta))

    def refresh_topic_meta(self, partition_count: Callable[[str], int | None]) -> list[str]:
        """The balance pass's `processClientBalanceMetaInfo`: every group's metadata read from the brokers again;
        the groups whose metadata changed (a new `topicMetaInfoId`)."""
        with self._lock:
            names = sorted(self.groups)
        return [g for g in names if self._fresh(g, partition_count)]

    def _fresh(self, group: str, partition_count: Callable[[str], int | None]) -> bool:
        """`freshTopicMetaInfo` then `updCsmTopicMetaInfo`: a topic the brokers do not know is left out; nothing
        read leaves the metadata as it was; a change (another topic set, another count) is written over the old
        (a topic no longer read stays, as `updCsmTopicMetaInfo` only puts) with a new id. True if it changed."""
        with self._lock:
            info = self.groups.get(group)
            topics = sorted(info.topics) if info is not None else []
        read = {t: n for t in topics if (n := partition_count(t) or 0) > 0}
        with self._lock:
            info = self.groups.get(group)
            if info is None or not read:
                return False
            if read.keys() == info.topic_meta.keys() and all(info.topic_meta[t] == n for t, n in read.items()):
                return False
            info.topic_meta.update(read)
            info.topic_meta_id = max(self.wall_clock(), info.topic_meta_id + 1)
            return True

    def heartbeat_meta(self, group: str, consumer_id: str, lst_assigned_ms: int | None) -> int | None:
        """What `consumerHeartbeatC2MV2` adds to a heartbeat's answer: the group's `topicMetaInfoId` (the caller
        sends the list too if the member's id differs) if the member reports partitions and has stored no
        metadata for more than `maxMetaForceUpdatePeriodMs` (`lst_assigned_ms`, its `lstAssignedTime`: when it
        last stored some; None if never); else None."""
        with self._lock:
            info = self.groups.get(group)
            member = info.members.get(consumer_id) if info is not None else None
            if member is None or lst_assigned_ms is None or lst_assigned_ms < 0 or not member.reported:
                return None
            if self.wall_clock() - lst_assigned_ms <= self.meta_force_update_period_ms:
                return None
            return info.topic_meta_id
