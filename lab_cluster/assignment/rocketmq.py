"""RocketMQ's client-side allocation: each consumer computes its own queues, as RocketMQ 4.x does.

In CLUSTERING mode every consumer's `RebalanceImpl.rebalanceByTopic` takes
the topic's message queues (from route metadata) and the group's consumer
ids (from one broker: `ConsumerGroupInfo.getAllClientId`, every client of the
group whatever it subscribes), sorts both (`Collections.sort`: a queue by
topic, broker name, queue id; an id as a Java string), and keeps the share
the strategy gives its own id. Nobody checks that the shares add up: two
consumers that read different id lists may both take a queue, or neither.

The two strategies RocketMQ ships for this, after
`client/.../consumer/rebalance/AllocateMessageQueueAveragely.java` and
`AllocateMessageQueueAveragelyByCircle.java`, with their checks
(`AbstractAllocateMessageQueueStrategy.check`): an empty id, queue list or
id list is an error (the caller logs it and keeps its queues); an id missing
from the list gets nothing (RocketMQ logs it as "[BUG]").

**averagely** (`AVG`, the default): contiguous blocks, the first
``len(mq_all) % len(cid_all)`` consumers one queue more. Five queues, two
consumers::

    >>> queues = [("t", "broker-a", q) for q in range(5)]
    >>> averagely("c1", queues, ["c1", "c2"]), averagely("c2", queues, ["c1", "c2"])
    ([('t', 'broker-a', 0), ('t', 'broker-a', 1), ('t', 'broker-a', 2)], [('t', 'broker-a', 3), ('t', 'broker-a', 4)])

**averagely by circle** (`AVG_BY_CIRCLE`): queue i to consumer i mod N::

    >>> [q for _, _, q in averagely_by_circle("c1", queues, ["c1", "c2"])]
    [0, 2, 4]
    >>> averagely("c9", queues, ["c1", "c2"])  # not in the list it read: nothing
    []

(Python orders strings by code point and Java by UTF-16 code unit; the two
differ only for characters outside the Basic Multilingual Plane.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Q = TypeVar("Q")  # a message queue: anything that sorts as RocketMQ's (topic, broker name, queue id)


def _check(current_cid: str, mq_all: Sequence, cid_all: Sequence[str]) -> bool:
    """`AbstractAllocateMessageQueueStrategy.check`: raise on empty input; False if we are not in the list."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


def averagely(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """`AllocateMessageQueueAveragely.allocate`: this consumer's block of the sorted queues."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index, mod = cid_all.index(current_cid), len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        average = 1
    else:
        average = len(mq_all) // len(cid_all) + (1 if mod > 0 and index < mod else 0)
    start = index * average if mod > 0 and index < mod else index * average + mod
    return list(mq_all[start:start + max(0, min(average, len(mq_all) - start))])


def averagely_by_circle(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """`AllocateMessageQueueAveragelyByCircle.allocate`: every N-th queue, from this consumer's index."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]


#: RocketMQ's strategies by the names the lab's `assign` command and configs use
STRATEGIES: dict[str, Callable[[str, Sequence, Sequence[str]], list]] = {
    "rocketmq-averagely": averagely,
    "rocketmq-averagely-by-circle": averagely_by_circle,
}
