"""Kafka's `RangeAssignor` (`range`): per topic, contiguous ranges over the members subscribed to it.

For each topic, its subscribers are put in member order (`base.member_order`)
and split its partitions with the range arithmetic both eras share
(`lab_cluster.assignment.range_split`). Topics are independent, so with several
topics the first members collect the extra partition of every topic.

Worked example: topics t0 and t1 with 3 partitions each, members c0 and c1
both subscribed to both::

    >>> subs = {"c0": Subscription(["t0", "t1"]), "c1": Subscription(["t0", "t1"])}
    >>> RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    {'c0': [('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1)], 'c1': [('t0', 2), ('t1', 2)]}

c0 gets two of each topic, c1 one: range's known imbalance across topics.
(Kafka's rack-aware variant is not implemented: the lab has no racks.)
"""

from __future__ import annotations

from .base import Assignor, Subscription, TopicPartition, member_order
from .shares import range_split


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions_per_topic: dict[str, int],
               subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = member_order(subscriptions)
        for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue  # a topic nobody has metadata for is skipped, as in Kafka
            members = [m for m in order if topic in subscriptions[m].topics]
            for member, share in range_split([(topic, p) for p in range(count)], members).items():
                out[member].extend(share)
        return out
