"""What a server-side assignor takes and gives (KIP-848): the coordinator computes the assignment.

Under Kafka 4.0's consumer group protocol no member runs an assignor. The
group coordinator keeps, for each member, its subscription and its current
*target assignment*, and whenever the group epoch moves it asks the group's
assignor (`group.consumer.assignors`, default `uniform`) for a new target
assignment. This module is that interface:

- `MemberSpec` is Kafka's `MemberSubscriptionAndAssignmentImpl`: the topic
  names a member subscribes to, its current target assignment (what a sticky
  assignor tries to keep), its `group.instance.id` and rack.
- `ServerAssignor` is Kafka's `ConsumerGroupPartitionAssignor`: `assign` maps
  every member id to its new partitions.

Two things Kafka's coordinator does before it calls an assignor are done here
for the assignors, so that they read like Kafka's:

- `subscription_type`: `HOMOGENEOUS` when every member subscribes to the
  same topic *names*, as `ModernGroup.subscriptionType` counts them (topics
  that do not exist included), else `HETEROGENEOUS`.
- `resolve`: Kafka hands an assignor topic ids, and a name with no topic in
  the metadata image has no id, so it is silently left out of the member's
  subscription (`TopicIds`). The lab's metadata is `partitions_per_topic`: a
  subscribed topic missing from it is ignored, and partitions of such a
  topic in a member's `assigned` are dropped (Kafka: the topic is no longer
  subscribed, so the assignor removes it). Kafka's coordinator also
  guarantees that the target assignments it passes name only existing
  partitions, each at most once; the lab checks that and raises `ValueError`.

    >>> members = {"m1": MemberSpec(frozenset({"t", "gone"}), frozenset({("t", 0), ("gone", 3)})),
    ...            "m2": MemberSpec(frozenset({"t"}))}
    >>> subscription_type(members)
    'HETEROGENEOUS'
    >>> resolved = resolve(members, {"t": 2})
    >>> sorted(resolved["m1"].topics), sorted(resolved["m1"].assigned)
    (['t'], [('t', 0)])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

TopicPartition = tuple[str, int]

HOMOGENEOUS = "HOMOGENEOUS"
HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(frozen=True)
class MemberSpec:
    """Kafka's `MemberSubscriptionAndAssignmentImpl`: what the coordinator knows of one member."""

    topics: frozenset[str]  # subscribed topic names
    assigned: frozenset[tuple[str, int]] = frozenset()  # its current target assignment (stickiness)
    instance_id: str | None = None
    rack_id: str | None = None


class ServerAssignor(ABC):
    """Kafka's `ConsumerGroupPartitionAssignor`, run by the group coordinator."""

    name: str  # "uniform" / "range", as in group.consumer.assignors

    @abstractmethod
    def assign(self, members: dict[str, MemberSpec],
               partitions_per_topic: dict[str, int]) -> dict[str, frozenset[tuple[str, int]]]:
        """{member id: partitions}, every member listed."""


def subscription_type(members: dict[str, MemberSpec]) -> str:
    """`ModernGroup.subscriptionType`: homogeneous when all members subscribe to the same topic names."""
    subscriptions = {m.topics for m in members.values()}
    return HOMOGENEOUS if len(subscriptions) <= 1 else HETEROGENEOUS


def resolve(members: dict[str, MemberSpec], partitions_per_topic: dict[str, int]) -> dict[str, MemberSpec]:
    """The members as Kafka's assignor sees them: only topics in the metadata, valid current assignments."""
    owners: dict[TopicPartition, str] = {}
    resolved = {}
    for member_id, spec in members.items():
        assigned = set()
        for topic, partition in spec.assigned:
            if topic not in partitions_per_topic:
                continue
            if not 0 <= partition < partitions_per_topic[topic]:
                raise ValueError(f"member {member_id!r} is assigned {topic}-{partition}, but {topic} has "
                                 f"{partitions_per_topic[topic]} partitions")
            if (topic, partition) in owners:
                raise ValueError(f"{topic}-{partition} is assigned to both {owners[topic, partition]!r} and "
                                 f"{member_id!r}; a target assignment gives each partition to one member")
            owners[topic, partition] = member_id
            assigned.add((topic, partition))
        resolved[member_id] = replace(spec, topics=frozenset(t for t in spec.topics if t in partitions_per_topic),
                                      assigned=frozenset(assigned))
    return resolved
