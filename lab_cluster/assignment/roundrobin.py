"""Kafka's `RoundRobinAssignor` (`roundrobin`): deal every partition of every topic in turn.

All partitions of all subscribed topics are listed sorted by topic then
partition, and dealt one by one to the members in member order, going round;
a member not subscribed to a partition's topic is skipped for that partition
(Kafka's `CircularIterator` with `peek`/`next`).

Worked example: topics t0 and t1 with 3 partitions each, members c0 and c1
both subscribed to both::

    >>> subs = {"c0": Subscription(["t0", "t1"]), "c1": Subscription(["t0", "t1"])}
    >>> RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    {'c0': [('t0', 0), ('t0', 2), ('t1', 1)], 'c1': [('t0', 1), ('t1', 0), ('t1', 2)]}

Three each, where range gave four and two. With different subscriptions the
balance is not guaranteed: c2 subscribed to t1 only is skipped for every t0
partition.
"""

from __future__ import annotations

from .base import Assignor, Subscription, TopicPartition, member_order


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        if not order:
            return out
        topics = sorted({t for s in subscriptions.values() for t in s.topics if t in partitions_per_topic})
        position = 0
        for topic in topics:
            for partition in range(partitions_per_topic[topic]):
                # Every listed topic has at least one subscriber, so this loop ends.
                while topic not in subscriptions[order[position % len(order)]].topics:
                    position += 1
                out[order[position % len(order)]].append((topic, partition))
                position += 1
        return out
