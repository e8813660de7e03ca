"""Each consumer's own share of the partitions: Kafka 0.8.2's `RangeAssignor` and `RoundRobinAssignor`.

In the ZooKeeper era every consumer computes the whole group's assignment by
itself, from the view it just read (`view.View`, 0.8's
`AssignmentContext`), and keeps its own share. Both assignors are
deterministic functions of that view, so consumers that read the same view
agree, and consumers that read different views may not (split brain).
`partition.assignment.strategy` picks one (PartitionAssignor.scala L26-40).

**range** (the default; PartitionAssignor L121-160), per topic: the topic's
partitions, sorted, over the thread ids subscribed to it, sorted as strings;
with P partitions and C threads, thread k gets P // C, plus one if k < P % C,
in order. A thread of ours missing from the view fails the attempt (0.8's
`assert(myConsumerPosition >= 0)`).

    >>> v = View(members=["a", "b"], thread_ids={"t": ["a-0", "b-0"]}, partitions={"t": [0, 1, 2, 3, 4]},
    ...          brokers={}, cversion=2, pzxid=7)
    >>> RangeAssignor().assign(v, "a", ["a-0"])
    {('t', 0): 'a-0', ('t', 1): 'a-0', ('t', 2): 'a-0'}

**roundrobin** (PartitionAssignor L69-110): every topic must be subscribed by
the same thread ids (else the attempt fails: "Round-robin assignment is
allowed only if all consumers in the group subscribe to the same topics"); the
partitions of all our topics, sorted by Java's `String.hashCode` of
``"[topic,partition]"``, are dealt one by one to the sorted thread ids, round
and round, across topics. With partitions 0-4 of `t` (hash order 0, 1, 2, 3,
4: the hashes of ``"[t,0]"``..``"[t,4]"`` increase) and threads a-0, b-0::

    >>> RoundRobinAssignor().assign(v, "a", ["a-0"])
    {('t', 0): 'a-0', ('t', 2): 'a-0', ('t', 4): 'a-0'}
"""

from __future__ import annotations

from lab_cluster.assignment import range_split
from lab_cluster.java_hash import java_string_hash

from .view import View


class AssignmentFailed(Exception):
    """0.8's assertion or requirement failing: the rebalance attempt fails (and is retried after the back-off)."""


class RangeAssignor:
    name = "range"

    def assign(self, view: View, consumer_id: str, my_threads: list[str]) -> dict[tuple[str, int], str]:
        decision = {}
        for topic in sorted(view.partitions):
            threads = view.thread_ids.get(topic, [])
            share = range_split(view.partitions[topic], threads)  # the same split as the coordinator era's range
            for thread_id in my_threads:
                if thread_id not in threads:
                    raise AssignmentFailed(f"{thread_id} is not among the consumers of {topic} it read: {threads}")
                for partition in share[thread_id]:
                    decision[(topic, partition)] = thread_id
        return dict(sorted(decision.items()))


class RoundRobinAssignor:
    name = "roundrobin"

    def assign(self, view: View, consumer_id: str, my_threads: list[str]) -> dict[tuple[str, int], str]:
        thread_sets = [set(ids) for ids in view.thread_ids.values()]
        if not thread_sets or any(s != thread_sets[0] for s in thread_sets):
            raise AssignmentFailed("Round-robin assignment is allowed only if all consumers in the group subscribe "
                                   "to the same topics, AND if the stream counts across topics are identical for a "
                                   "given consumer instance")
        threads = sorted(thread_sets[0])
        partitions = [(t, p) for t in view.partitions for p in view.partitions[t]]
        partitions.sort(key=lambda tp: java_string_hash(f"[{tp[0]},{tp[1]}]"))  # stable, as Scala's sortWith
        decision = {}
        for i, tp in enumerate(partitions):
            thread_id = threads[i % len(threads)]
            if thread_id.rsplit("-", 1)[0] == consumer_id:
                decision[tp] = thread_id
        return dict(sorted(decision.items()))


ASSIGNORS = {a.name: a for a in (RangeAssignor(), RoundRobinAssignor())}
