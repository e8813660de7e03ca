"""A weighted assignor: each member says its weight in its JoinGroup, and the leader shares partitions in
proportion. An example of the assignor plug-in point (`lab_cluster/assignment/plugins.py`).

The idea is the one the Kafka texts give for user data: a fact only the member
knows (here, how many cores its machine has, as a weight) travels to the
leader inside the member's subscription, and the leader's `assign` uses it.
Name it in a consumer's config, with the member's weight:

    partition.assignment.strategy=examples.weighted_assignor:WeightedAssignor
    weighted.assignor.weight=3

Its user data is the weight as a big-endian int32 (Kafka's `ByteBuffer.putInt`),
so that a client in another language can send the same bytes; a member that
sends none counts 1. The leader sorts the members as Kafka's assignors do
(static members first, by `group.instance.id`, then by member id), gives each
the floor of its share of the partitions, and the rest one each to the
largest remainders (ties: member order); each member's partitions are a
contiguous run of the topics' partitions, topic by topic (topics with the same
subscribers are shared as one list, so that loads stay near their shares with
many topics too).

    >>> from lab_cluster.assignment import Subscription
    >>> a, b = Subscription(["t"], user_data=weight_bytes(3)), Subscription(["t"], user_data=weight_bytes(1))
    >>> WeightedAssignor().assign({"t": 8}, {"m-a": a, "m-b": b})
    {'m-a': [('t', 0), ('t', 1), ('t', 2), ('t', 3), ('t', 4), ('t', 5)], 'm-b': [('t', 6), ('t', 7)]}
    >>> shares(7, [2, 1, 1])
    [3, 2, 2]

`KafkaPythonWeightedAssignor` is the same assignor for kafka-python
(`KafkaConsumer(partition_assignment_strategy=[KafkaPythonWeightedAssignor(3)])`):
same name, same bytes, same split, so lab consumers and kafka-python consumers
can share one group and either may lead it.
"""

from __future__ import annotations

import struct

from lab_cluster.assignment import Assignor, Subscription, member_order

NAME = "weighted"
WEIGHT_KEY = "weighted.assignor.weight"


def weight_bytes(weight: int) -> bytes:
    return struct.pack(">i", weight)


def weight_of(user_data: bytes | None) -> int:
    """A member's weight from its user data: 1 if it sent none, or bytes that are not a positive int32."""
    if user_data is None or len(user_data) != 4:
        return 1
    weight = struct.unpack(">i", user_data)[0]
    return weight if weight > 0 else 1


def shares(count: int, weights: list[int]) -> list[int]:
    """How many of `count` partitions each weight gets: floors, then the largest remainders, first in order on
    a tie."""
    total = sum(weights)
    exact = [count * w / total for w in weights]
    out = [int(e) for e in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in by_remainder[:count - sum(out)]:
        out[i] += 1
    return out


def weighted_split(partitions_per_topic: dict[str, int], members: list[tuple[str, list[str], int]]):
    """{member id: [(topic, partition)]} for members given in order as (id, topics, weight).

    Topics with the same subscribers are shared as one list, topic by topic: split each topic on its own, as
    Kafka's range does, and every topic's remainder goes to the same first members (with three topics of four
    partitions and weights 3, 1, 1, 1, the last member would get none at all)."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m, _, _ in members}
    by_takers: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for topic in sorted(partitions_per_topic):
        takers = tuple(m for m, topics, _ in members if topic in topics)
        if takers:
            by_takers.setdefault(takers, []).extend((topic, p) for p in range(partitions_per_topic[topic]))
    weight = {m: w for m, _, w in members}
    for takers, partitions in by_takers.items():
        start = 0
        for member, n in zip(takers, shares(len(partitions), [weight[m] for m in takers]), strict=True):
            out[member] += partitions[start:start + n]
            start += n
    return out


class WeightedAssignor(Assignor):
    """The lab's consumers: `weighted.assignor.weight` from the consumer's config (Kafka's `configure`)."""

    name = NAME
    #: the settings this assignor reads from the consumer's config (`ConsumerConfig` accepts them for it)
    config_keys = (WEIGHT_KEY,)

    def __init__(self, weight: int = 1):
        self.weight = weight

    def configure(self, config: dict) -> None:
        raw = config.get(WEIGHT_KEY, self.weight)
        try:
            self.weight = int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{WEIGHT_KEY}={raw!r} is not a whole number") from None
        if self.weight < 1:
            raise ValueError(f"{WEIGHT_KEY}={raw!r} must be at least 1")

    def subscription_user_data(self, topics: list[str]) -> bytes | None:
        return weight_bytes(self.weight)

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[tuple[str, int]]]:
        members = [(m, subscriptions[m].topics, weight_of(subscriptions[m].user_data))
                   for m in member_order(subscriptions)]
        return weighted_split(partitions_per_topic, members)


def _kafka_python_base():
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor

    return AbstractPartitionAssignor


class KafkaPythonWeightedAssignor(_kafka_python_base()):
    """The same assignor for kafka-python 3.x (`AbstractPartitionAssignor`): an instance per consumer, with
    its weight."""

    name = NAME

    def __init__(self, weight: int = 1):
        self.weight = weight

    def metadata(self, topics):
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

        return ConsumerProtocolSubscription(0, sorted(topics), weight_bytes(self.weight))

    def assign(self, cluster, members):
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

        subscriptions = {m.member_id: Subscription(list(m.metadata.topics), group_instance_id=m.group_instance_id,
                                                   user_data=m.metadata.user_data) for m in members}
        topics = {t for s in subscriptions.values() for t in s.topics}
        counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}
        split = WeightedAssignor().assign(counts, subscriptions)  # the lab's leader's split, to the byte
        return {m: ConsumerProtocolAssignment(0, [(t, [p for tt, p in tps if tt == t])
                                                  for t in sorted({tt for tt, _ in tps})], b"")
                for m, tps in split.items()}

    def on_assignment(self, assignment, generation):
        pass
