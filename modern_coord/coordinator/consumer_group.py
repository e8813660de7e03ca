"""A KIP-848 consumer group as the coordinator keeps it: members, epochs, the target assignment.

Kafka 4.0's consumer protocol has no JoinGroup/SyncGroup barrier. The
coordinator keeps, per group (Kafka's `modern/consumer/ConsumerGroup.java`):

- the **group epoch**, bumped when a member joins or leaves, or a member's
  subscription (or the subscribed topics' partition counts) changes;
- the **target assignment** and its epoch: what every member should own,
  computed by a server-side assignor (`lab_cluster/assignment/server.py`)
  when the group epoch has moved past the assignment epoch;
- per member its **current assignment** and **member epoch**, which move
  towards the target one member at a time (`next_assignment`, Kafka's
  `CurrentAssignmentBuilder`), and for every partition the epoch of the member
  holding it (`partition_epoch`, -1 when nobody does): a partition is never
  handed to a member while another still holds it.

A member's reconciliation states (Kafka's `modern/MemberState.java`)::

    STABLE                 its epoch is the target's, or it has not been told of a newer one yet
    UNREVOKED_PARTITIONS   it must revoke `pending_revocation` before it may move to the next epoch;
                           it keeps its epoch meanwhile (a rebalance timeout runs)
    UNRELEASED_PARTITIONS  it is at the target epoch but waits for partitions other members
                           have not released yet; it gets them on a later heartbeat

Transitions, on each heartbeat of the member (`next_assignment`):

- STABLE, at the target epoch: nothing changes.
- STABLE behind the target, or UNRELEASED_PARTITIONS: recompute from its
  assigned partitions (below).
- UNREVOKED_PARTITIONS: while its owned partitions (as the heartbeat reports
  them; unknown when not sent) still include one pending revocation, nothing
  changes; once they do not, recompute with epoch + 1.

Recomputing (Kafka's `computeNextAssignment`), per topic::

    assigned           = current ∩ target
    pending_revocation = current − assigned
    pending_assignment = target − assigned − partitions some member holds (epoch ≠ -1)

then: something to revoke that it still owns → UNREVOKED_PARTITIONS at the
given epoch, keeping only `assigned`; else anything to assign → `assigned` +
`pending_assignment` at the target epoch, UNRELEASED_PARTITIONS if some target
partitions were held back, else STABLE; else the target epoch, UNRELEASED or
STABLE likewise.

The group's own state (Kafka's `ConsumerGroupState`) follows from these:
EMPTY (no member), ASSIGNING (group epoch > assignment epoch), RECONCILING
(some member not reconciled to the target epoch), STABLE.

Departures, stated: topics are named, not Kafka's topic ids; no rack-aware
assignment; no regex subscriptions; no classic members inside a consumer group
(Kafka 4.0's online migration).

    >>> m = ConsumerGroupMember("m1", member_epoch=3, previous_member_epoch=2, assigned=frozenset({("t", 0), ("t", 1)}))
    >>> nxt = next_assignment(m, 4, frozenset({("t", 1), ("t", 2)}), owned=None, partition_epoch=lambda tp: -1)
    >>> nxt.state.name, nxt.member_epoch, sorted(nxt.assigned), sorted(nxt.pending_revocation)
    ('UNREVOKED_PARTITIONS', 3, [('t', 1)], [('t', 0)])
    >>> done = next_assignment(nxt, 4, frozenset({("t", 1), ("t", 2)}), owned=[("t", 1)], partition_epoch=lambda tp: -1)
    >>> done.state.name, done.member_epoch, sorted(done.assigned)
    ('STABLE', 4, [('t', 1), ('t', 2)])
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

TopicPartition = tuple[str, int]
Partitions = frozenset[TopicPartition]

#: member epochs with a meaning of their own (Kafka's `ConsumerGroupHeartbeatRequest`)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupMemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member as the coordinator knows it (Kafka's `ConsumerGroupMember`): a value, replaced on change."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: ConsumerGroupMemberState = ConsumerGroupMemberState.STABLE
    rebalance_timeout_ms: int = -1
    subscribed_topics: frozenset[str] = frozenset()
    server_assignor: str | None = None
    assigned: Partitions = frozenset()
    pending_revocation: Partitions = frozenset()

    def reconciled_to(self, target_epoch: int) -> bool:
        return self.state is ConsumerGroupMemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int, **changes) -> ConsumerGroupMember:
        """Kafka's `updateMemberEpoch`: the previous epoch remembers the one it leaves."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch, **changes)


def _still_owns(owned: Iterable[TopicPartition] | None, revoking: Partitions) -> bool:
    """Kafka's `ownsRevokedPartitions`: when the heartbeat did not say what it owns, assume it still does."""
    return owned is None or not revoking.isdisjoint(owned)


def next_assignment(member: ConsumerGroupMember, target_epoch: int, target: Partitions,
                    owned: Iterable[TopicPartition] | None,
                    partition_epoch: Callable[[TopicPartition], int]) -> ConsumerGroupMember:
    """Kafka's `CurrentAssignmentBuilder.build`: the member one step closer to `target` (see the module docstring)."""
    if member.state is ConsumerGroupMemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _compute_next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if member.state is ConsumerGroupMemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        return _compute_next(member, member.member_epoch + 1, target_epoch, target, owned, partition_epoch)
    return _compute_next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)


def _compute_next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Partitions,
                  owned: Iterable[TopicPartition] | None,
                  partition_epoch: Callable[[TopicPartition], int]) -> ConsumerGroupMember:
    assigned = member.assigned & target
    revoking = member.assigned - assigned
    wanted = target - assigned
    free = frozenset(tp for tp in wanted if partition_epoch(tp) == -1)
    unreleased = free != wanted
    if revoking and _still_owns(owned, revoking):
        return member.with_epoch(epoch, state=ConsumerGroupMemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                                 pending_revocation=revoking)
    state = ConsumerGroupMemberState.UNRELEASED_PARTITIONS if unreleased else ConsumerGroupMemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=assigned | free, pending_revocation=frozenset())


@dataclass
class ConsumerGroup:
    """One consumer group's records, as `__consumer_offsets` holds them (Kafka's `ConsumerGroup`)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)  # member id -> its target assignment
    #: the partitions' count per subscribed topic when the group epoch was last bumped (Kafka's subscription metadata)
    subscription_metadata: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def copy(self) -> ConsumerGroup:
        """A copy to change (members are values; only the maps are copied)."""
        return replace(self, members=dict(self.members), target=dict(self.target),
                       subscription_metadata=dict(self.subscription_metadata))

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def partition_epoch(self, tp: TopicPartition) -> int:
        """The epoch of the member holding `tp` (assigned or pending revocation), -1 if nobody holds it."""
        for m in self.members.values():
            if tp in m.assigned or tp in m.pending_revocation:
                return m.member_epoch
        return -1

    def subscribed_topics(self) -> set[str]:
        return set().union(*(m.subscribed_topics for m in self.members.values())) if self.members else set()

    def put(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        self.target.pop(member_id, None)
        return self.members.pop(member_id, None)

    def replace(self, old_id: str, new: ConsumerGroupMember) -> None:
        """Kafka's `replaceMember`: a static member's new member id takes the old one's place and target."""
        target = self.target.pop(old_id, frozenset())
        self.members.pop(old_id, None)
        self.members[new.member_id] = new
        self.target[new.member_id] = target

    def to_record(self) -> dict:
        """The group as one `__consumer_offsets` record (Kafka writes one record per member and per kind)."""
        def tps(parts: Partitions) -> list[list]:
            return [list(tp) for tp in sorted(parts)]
        return {"type": "consumer_group", "group": self.group_id, "group_epoch": self.group_epoch,
                "assignment_epoch": self.assignment_epoch, "subscription_metadata": self.subscription_metadata,
                "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                             "client_id": m.client_id, "member_epoch": m.member_epoch,
                             "previous_member_epoch": m.previous_member_epoch, "state": m.state.value,
                             "rebalance_timeout_ms": m.rebalance_timeout_ms,
                             "subscribed_topics": sorted(m.subscribed_topics), "server_assignor": m.server_assignor,
                             "assigned": tps(m.assigned), "pending_revocation": tps(m.pending_revocation),
                             "target": tps(self.target.get(m.member_id, frozenset()))}
                            for m in self.members.values()]}

    @classmethod
    def from_record(cls, record: dict) -> ConsumerGroup:
        def tps(rows) -> Partitions:
            return frozenset((str(t), int(p)) for t, p in rows)
        group = cls(record["group"], group_epoch=record["group_epoch"], assignment_epoch=record["assignment_epoch"],
                    subscription_metadata=dict(record.get("subscription_metadata", {})))
        for m in record.get("members", []):
            group.put(ConsumerGroupMember(m["member_id"], m.get("instance_id"), m.get("rack_id"),
                                          m.get("client_id", ""),
                             m["member_epoch"], m["previous_member_epoch"], ConsumerGroupMemberState(m["state"]),
                             m["rebalance_timeout_ms"], frozenset(m["subscribed_topics"]), m.get("server_assignor"),
                             tps(m["assigned"]), tps(m["pending_revocation"])))
            group.target[m["member_id"]] = tps(m["target"])
        return group
