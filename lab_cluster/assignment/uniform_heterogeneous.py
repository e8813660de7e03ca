"""Kafka's `UniformHeterogeneousAssignmentBuilder`: the uniform assignor when subscriptions differ.

Members are numbered in member order (`uniform.py`); ties between members
always go to the lower number. Three steps:

1. **Revoke** from each member's current assignment the topics it no longer
   subscribes to; keep everything else, however unbalanced.
2. **Assign** the partitions nobody holds, topic by topic, to the least
   loaded subscribers of the topic. Topics go in order of partitions per
   subscriber (most first), then fewer subscribers, then topic name (Kafka:
   topic id), so that the topics with the least choice are placed while the
   members are still even.
3. **Balance**: for each topic with two or more subscribers, in the same
   order, move the topic's partitions from its most loaded subscribers (by
   *total* partitions, all topics counted) to its least loaded ones until
   their counts differ by at most one or the most loaded have none of the
   topic left. Repeat the round of topics until a whole round moves nothing,
   at most 16 rounds (`MAX_ITERATION_COUNT`).

When overlapping subscriptions differ, step 3 can stop short of a perfect
balance (Kafka's example: A on topic 1, B on both, C on topic 2 can end at
9, 10 and 11 partitions, each topic balanced among its own subscribers).

`_Balancer` is Kafka's `MemberAssignmentBalancer`: the subscribers sorted by
load, a *least loaded range* growing rightwards that receives partitions one
member at a time and level by level, and a *most loaded range* growing
leftwards that gives them up the same way, skipping members that hold
nothing of the topic.

Worked example (Kafka's `testFirstAssignmentTwoMembersTwoTopics`): A takes
topics `a` (3 partitions) and `b` (6), B only `b`. Topic `a` (3 per
subscriber) goes first, all to A; then `b`'s six go to the least loaded, B
taking five and A one::

    >>> from lab_cluster.assignment.server import MemberSpec
    >>> members = {"A": MemberSpec(frozenset({"a", "b"})), "B": MemberSpec(frozenset({"b"}))}
    >>> out = HeterogeneousBuilder(members, {"a": 3, "b": 6}, ["A", "B"]).build()
    >>> {m: sorted(p) for m, p in out.items()}
    {'A': [('a', 0), ('a', 1), ('a', 2), ('b', 4)], 'B': [('b', 0), ('b', 1), ('b', 2), ('b', 3), ('b', 5)]}
"""

from __future__ import annotations

from .server import MemberSpec, TopicPartition

#: Kafka's bound on the rounds of the balancing step.
MAX_ITERATION_COUNT = 16


class HeterogeneousBuilder:
    """One run of the builder over resolved members (`server.resolve`), numbered in `order`."""

    def __init__(self, members: dict[str, MemberSpec], partitions_per_topic: dict[str, int], order: list[str]):
        self.members = members
        self.order = order
        self.counts = partitions_per_topic
        self.subscribers: dict[str, list[int]] = {}  # topic -> member numbers, ascending
        for index, member in enumerate(order):
            for topic in sorted(members[member].topics):
                self.subscribers.setdefault(topic, []).append(index)
        self.sizes = [0] * len(order)  # partitions each member holds in the target assignment
        self.owner = {t: [-1] * partitions_per_topic[t] for t in self.subscribers}  # -1: unassigned
        self.target: dict[str, set[TopicPartition]] = {}

    def build(self) -> dict[str, set[TopicPartition]]:
        if not self.subscribers:
            return {}
        self._revoke_unsubscribed()
        self._assign_remaining()
        self._balance()
        return self.target

    def _sorted_topics(self, topics) -> list[str]:
        """Partitions per subscriber descending (as Java's doubles), subscribers ascending, then name."""
        return sorted(topics, key=lambda t: (-(self.counts[t] / len(self.subscribers[t])),
                                             len(self.subscribers[t]), t))

    def _revoke_unsubscribed(self) -> None:
        for index, member in enumerate(self.order):
            spec = self.members[member]
            kept = {tp for tp in spec.assigned if tp[0] in spec.topics}
            for topic, partition in kept:
                self.owner[topic][partition] = index
            self.sizes[index] = len(kept)
            self.target[member] = kept

    def _assign_remaining(self) -> None:
        unassigned = {t: [p for p, o in enumerate(owners) if o == -1] for t, owners in self.owner.items()}
        balancer = _Balancer(self.sizes)
        for topic in self._sorted_topics(t for t, ps in unassigned.items() if ps):
            balancer.initialize(self.subscribers[topic])
            for partition in unassigned[topic]:
                self._assign(topic, partition, balancer.next_least_loaded())

    def _balance(self) -> None:
        topics = self._sorted_topics(t for t, subs in self.subscribers.items() if len(subs) >= 2)
        if not topics:
            return
        balancer = _Balancer(self.sizes)
        last_rebalanced = -1  # the last topic that moved partitions: a full round back to it moved none
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic in enumerate(topics):
                if index == last_rebalanced:
                    return
                if self._balance_topic(topic, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic: str, balancer: _Balancer) -> int:
        """Move `topic`'s partitions from its most to its least loaded subscribers; how many moved."""
        if balancer.initialize(self.subscribers[topic]) <= 1:
            return 0
        owners = self.owner[topic]
        # The topic's partitions grouped by owner, so that each owner's are a slice [start, end).
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, partition in enumerate(partitions):
            start.setdefault(owners[partition], i)
            end[owners[partition]] = i + 1
        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()  # holds nothing of this topic to give
                giver = balancer.next_most_loaded()
            if giver == -1:
                break
            end[giver] -= 1
            partition = partitions[end[giver]]  # its last partition of the topic
            taker = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic, partition, taker)
            moved += 1
        return moved

    def _assign(self, topic: str, partition: int, index: int) -> None:
        previous = self.owner[topic][partition]
        if previous != -1:
            self.target[self.order[previous]].discard((topic, partition))
            self.sizes[previous] -= 1
        self.target[self.order[index]].add((topic, partition))
        self.owner[topic][partition] = index
        self.sizes[index] += 1


class _Balancer:
    """Kafka's `MemberAssignmentBalancer`, reading the builder's live `sizes`.

    After `initialize`, `sorted_members` holds the subscribers by load, fewest first (then member number).
    ``[0, least_end)`` is the least loaded range, every member of it at ``least_count`` before it is handed
    another partition; ``[most_start, most_end)`` the most loaded range, each at ``most_count`` before it
    gives one up. The members are balanced once ``most_count - least_count <= 1``.
    """

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.sorted_members: list[int] = []

    def initialize(self, members: list[int]) -> int:
        """Reset for a topic's subscribers; the load difference between the most and least loaded."""
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        self.sorted_members = sorted(members, key=lambda m: (self.sizes[m], m))
        first, last = self.sorted_members[0], self.sorted_members[-1]
        self.least_end = 0
        self.least_count = self.sizes[first] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.sorted_members)
        self.most_count = self.sizes[last] + 1
        self.next_most = len(self.sorted_members) - 1
        return self.sizes[last] - self.sizes[first]

    def next_least_loaded(self) -> int:
        """The member to give the next partition to; each member of the range in turn, level by level."""
        if self.next_least >= self.least_end:
            self.least_count += 1  # everyone in the range has had one: raise its level, take in those now equal
            while (self.least_end < len(self.sorted_members)
                   and self.sizes[self.sorted_members[self.least_end]] == self.least_count):
                self.least_end += 1
            self.next_least = 0
        member = self.sorted_members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to take the next partition from, or -1 when no member is left to give one."""
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # The range was emptied by exclusions: restart it at the next member's level.
                self.most_count = self.sizes[self.sorted_members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and self.sizes[self.sorted_members[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted_members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member `next_most_loaded` just returned from the most loaded range (swap it to the end)."""
        i, j = self.next_most + 1, self.most_end - 1
        self.sorted_members[i], self.sorted_members[j] = self.sorted_members[j], self.sorted_members[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1
