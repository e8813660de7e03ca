"""Kafka's server-side `RangeAssignor` (`range` in `group.consumer.assignors`): contiguous ranges per topic.

Not the client's `RangeAssignor` (`range.py`), though it computes the same
thing by different means. The coordinator sorts the members once: static
members first, by `group.instance.id`, then dynamic members by member id.
Each topic's partitions are cut into contiguous ranges, ``P // N`` each and
one more for the first ``P % N`` subscribers, handed out in that order.

Kafka walks member by member and, for each member, topic by topic, taking
the next range of each topic it subscribes to (a `TopicMetadata` per topic
remembers where the next range starts). Its homogeneous path counts every
member as a subscriber of every topic and its heterogeneous path counts each
topic's subscribers; both are each topic's subscriber count, so one path
serves here.

It reads no member's current assignment: since KAFKA-16944 (Kafka 3.9 and
4.0) it is sticky only through the member order. A static member that
restarts with a new member id keeps its `group.instance.id`, hence its place,
hence its ranges, as long as the members, their subscriptions and the
partition counts stay the same. A member joining or leaving shifts every
range after it.

Worked example (Kafka's `testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions`):
A subscribes to t1 and t2, B to t3, C to t2 and t3, with 3, 3 and 2
partitions::

    >>> from lab_cluster.assignment.server import MemberSpec
    >>> members = {"A": MemberSpec(frozenset({"t1", "t2"})), "B": MemberSpec(frozenset({"t3"})),
    ...            "C": MemberSpec(frozenset({"t2", "t3"}))}
    >>> out = ServerRangeAssignor().assign(members, {"t1": 3, "t2": 3, "t3": 2})
    >>> {m: sorted(p) for m, p in out.items()}
    {'A': [('t1', 0), ('t1', 1), ('t1', 2), ('t2', 0), ('t2', 1)], 'B': [('t3', 0)], 'C': [('t2', 2), ('t3', 1)]}

Departures: none in the result (racks are not read by Kafka's either; member
and instance ids compare as Python strings, which differ from Java's
`String.compareTo` only outside the Basic Multilingual Plane).
"""

from __future__ import annotations

from .server import MemberSpec, ServerAssignor, TopicPartition


def member_order(members: dict[str, MemberSpec]) -> list[str]:
    """`RangeAssignor.sortMemberIds`: static members by instance id, then dynamic members by member id."""
    return sorted(members, key=lambda m: (0, members[m].instance_id) if members[m].instance_id is not None
                  else (1, m))


class ServerRangeAssignor(ServerAssignor):
    name = "range"

    def assign(self, members: dict[str, MemberSpec],
               partitions_per_topic: dict[str, int]) -> dict[str, frozenset[TopicPartition]]:
        order = member_order(members)
        # Kafka sees only the topics in its metadata (`server.resolve`); the current assignments are not read.
        subscribed = {m: sorted(t for t in members[m].topics if t in partitions_per_topic) for m in order}
        subscribers: dict[str, int] = {}
        for topics in subscribed.values():
            for topic in topics:
                subscribers[topic] = subscribers.get(topic, 0) + 1
        # Per topic: where the next range starts, and how many ranges still get one partition extra.
        next_start = dict.fromkeys(subscribers, 0)
        extra = {t: partitions_per_topic[t] % n for t, n in subscribers.items()}
        out: dict[str, frozenset[TopicPartition]] = {}
        for member in order:
            mine: list[TopicPartition] = []
            for topic in subscribed[member]:
                quota = partitions_per_topic[topic] // subscribers[topic]
                if extra[topic] > 0:
                    quota += 1
                    extra[topic] -= 1
                start = next_start[topic]
                end = min(start + quota, partitions_per_topic[topic])
                next_start[topic] = end
                mine += [(topic, p) for p in range(start, end)]
            out[member] = frozenset(mine)
        return {m: out[m] for m in members}
