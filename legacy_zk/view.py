"""What one rebalance attempt reads from ZooKeeper, in 0.8.2.2's order and number.

0.8's `syncedRebalance` and `rebalance` (ZookeeperConsumerConnector L596-704)
read, for B brokers, T subscribed topics, N members and k partitions won:

| step | reads | 0.8.2.2 |
|---|---|---|
| the cluster, before the attempt | 1 + B | `getCluster` (ZkUtils L483-491) |
| our own registration | 1 | `TopicCount.constructTopicCount` (ZCC L637) |
| the brokers again | 1 + B | `getAllBrokersInCluster` (ZCC L639) |
| the assignment context (*) | 1 + T + 1 + N + 1 | `AssignmentContext` (PartitionAssignor L42-55) |
| each won partition's offset, *before* claiming | k | `fetchOffsets` (ZCC L667) |
| the brokers for the leader finder (**) | 1 + B | `ConsumerFetcherManager` L65 |

(*) our registration again, each topic's partitions, the group's ids and every
member's registration, then the ids once more. (**) only after an attempt that
succeeded and won partitions. "The brokers" is `/brokers/ids` and each broker's
registration.

`read_brokers`, `read_own_subscription` and `read_view` are those reads;
`consumer.py` calls them in that order. The ids and topic paths have listeners,
so their reads re-arm the watches (`watches.GroupWatches.children/data`).

A member that vanishes between the ids read and the read of its registration
fails the attempt (ZkNoNodeException in 0.8; the retry comes after the
back-off), as does a topic subscribed by nobody the view lists; a topic znode
that does not exist gives no partitions (`readDataMaybeNull`). Each topic's
partitions are read again in every attempt (0.8's `getPartitionsForTopics`,
called by the `AssignmentContext` that every `rebalance` builds anew), so the
rebalance a topic's growth triggers (`topic_listener.py`) gives the new
partitions owners; the view keeps each topic znode's `mzxid`, so the
consumer knows which version of the topic it computed from.

The view (`View`, 0.8's `AssignmentContext`) is recorded as one `view` event
(members, the ids node's `cversion` and `pzxid`): two consumers that computed
from different views in the same round did not agree on the group, which is
what `view_divergence` measures. Nobody checks that they agree: each claims
what its own view says is its own (`partition_assignor.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from lab_cluster.broker import zk_layout as L
from lab_cluster.trace import TraceRecorder

from . import znodes
from .watches import GroupWatches
from .zkclient import TracedZk


@dataclass
class View:
    members: list[str]
    thread_ids: dict[str, list[str]]  # topic -> sorted thread ids subscribed to it (consumersForTopic)
    partitions: dict[str, list[int]]  # our topics -> sorted partitions (partitionsForTopic)
    brokers: dict[int, tuple[str, int]]
    cversion: int
    pzxid: int
    topic_mzxids: dict[str, int | None] = field(default_factory=dict)  # each topic znode's version (None: no data)


def read_brokers(zk: TracedZk, watches: GroupWatches) -> dict[int, tuple[str, int]]:
    """`getAllBrokersInCluster`: the ids, then each broker's registration (one that vanished is skipped)."""
    if watches.watched(L.BROKER_IDS):
        ids, _ = watches.children(L.BROKER_IDS)
    else:
        ids = zk.get_children(L.BROKER_IDS)
    brokers = {}
    for broker_id in sorted(ids, key=int):
        try:
            registration = json.loads(zk.get(L.broker_path(int(broker_id)))[0])
        except NoNodeError:  # `readDataMaybeNull`: a broker gone since the ids read is skipped
            continue
        brokers[int(broker_id)] = (registration["host"], registration["port"])
    return brokers


def read_own_subscription(zk: TracedZk, group: str, consumer_id: str) -> dict[str, int]:
    """`TopicCount.constructTopicCount` of our own registration: {topic: streams}."""
    return json.loads(zk.get(znodes.consumer_path(group, consumer_id))[0])["subscription"]


def read_view(zk: TracedZk, watches: GroupWatches, trace: TraceRecorder, group: str, consumer_id: str,
              brokers: dict[int, tuple[str, int]]) -> View:
    """The `AssignmentContext`: our topics, their partitions, and the threads of every member."""
    my_topics = sorted(read_own_subscription(zk, group, consumer_id))
    partitions, mzxids = {}, {}
    for topic in my_topics:  # `getPartitionsForTopics`: read again in every attempt, so a grown topic is seen
        try:
            data, stat = watches.data(L.topic_path(topic))
        except NoNodeError:  # `readDataMaybeNull`: no such topic, no partitions
            data, stat = None, None
        mzxids[topic] = stat.mzxid if data else None
        partitions[topic] = sorted(L.parse_topic_assignment(data)) if data else []
    ids = znodes.ids_path(group)
    members, stat = watches.children(ids)
    threads: dict[str, list[str]] = {}
    for member in members:  # a member gone since the ids read: NoNodeError, and the attempt fails
        subscription = json.loads(zk.get(znodes.consumer_path(group, member))[0])["subscription"]
        for topic, streams in subscription.items():
            threads.setdefault(topic, []).extend(f"{member}-{n}" for n in range(int(streams)))
    watches.children(ids)  # `getConsumersInGroup`: the ids once more
    view = View(sorted(members), {t: sorted(ids) for t, ids in threads.items()}, partitions, brokers,
                stat.cversion, stat.pzxid, mzxids)
    trace.record("view", members=view.members, cversion=view.cversion, pzxid=view.pzxid,
                 brokers=sorted(brokers), partitions={t: len(p) for t, p in partitions.items()})
    return view
