"""One rebalance attempt's reads and arithmetic: 0.8's `ZKRebalancerListener.rebalance`.

Each consumer, on its own, at its own moment:

1. reads the cluster: `/brokers/ids` and each broker's registration;
2. reads each subscribed topic's partitions (`/brokers/topics/<t>`);
3. reads the group: the children of `/consumers/<group>/ids` (with the node's
   `cversion`, which counts membership changes) and each member's registration,
   to list every consumer *thread* subscribed to each topic;
4. computes its own share with the range split over the sorted thread ids and
   sorted partitions (`compute_share`).

Steps 1-3 are recorded as one `view` event (the members it saw, the `cversion`
and `pzxid`): two consumers that computed from different views in the same
round did not agree on the group, which is what `view_divergence` measures.
Nobody checks that they agree: each claims what its own view says is its own.

Worked example (0.8's formula): partitions 0-4 of `t`, consumers a and b with one
thread each (`a-0`, `b-0`): a-0 gets 0, 1, 2 and b-0 gets 3, 4.

    >>> v = View(members=["a", "b"], threads={"t": ["a-0", "b-0"]}, partitions={"t": [0, 1, 2, 3, 4]},
    ...          brokers={1: ("127.0.0.1", 9092)}, cversion=2, pzxid=7)
    >>> compute_share(v, ["a-0"])
    {('t', 0): 'a-0', ('t', 1): 'a-0', ('t', 2): 'a-0'}
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from lab_cluster.assignment import range_split
from lab_cluster.broker import zk_layout as L
from lab_cluster.trace import TraceRecorder

from . import znodes
from .zkclient import TracedZk


@dataclass
class View:
    members: list[str]
    threads: dict[str, list[str]]  # topic -> sorted thread ids subscribed to it
    partitions: dict[str, list[int]]  # topic -> sorted partitions
    brokers: dict[int, tuple[str, int]]
    cversion: int
    pzxid: int


def read_view(zk: TracedZk, trace: TraceRecorder, group: str, topics: list[str], watcher,
              watch_brokers: bool) -> View:
    brokers = {}
    for broker_id in zk.get_children(L.BROKER_IDS, watch=watcher if watch_brokers else None):
        try:
            reg = json.loads(zk.get(L.broker_path(int(broker_id)))[0])
            brokers[int(broker_id)] = (reg["host"], reg["port"])
        except NoNodeError:
            continue
    partitions = {}
    for topic in topics:
        try:
            data, _ = zk.get(L.topic_path(topic), watch=watcher)
            partitions[topic] = sorted(L.parse_topic_assignment(data))
        except NoNodeError:
            partitions[topic] = []
    members, stat = zk.get_children(znodes.ids_path(group), watch=watcher, include_data=True)
    threads: dict[str, list[str]] = {t: [] for t in topics}
    for member in members:
        try:
            subscription = json.loads(zk.get(znodes.consumer_path(group, member))[0])["subscription"]
        except NoNodeError:
            continue  # left between the two reads
        for topic, streams in subscription.items():
            if topic in threads:
                threads[topic] += [f"{member}-{n}" for n in range(int(streams))]
    view = View(sorted(members), {t: sorted(ids) for t, ids in threads.items()}, partitions, brokers,
                stat.cversion, stat.pzxid)
    trace.record("view", members=view.members, cversion=view.cversion, zxid=view.pzxid,
                 brokers=sorted(brokers), partitions={t: len(p) for t, p in partitions.items()})
    return view


def compute_share(view: View, my_threads: list[str]) -> dict[tuple[str, int], str]:
    """{(topic, partition): my thread id} for the partitions the range split gives my threads."""
    mine = set(my_threads)
    decision = {}
    for topic, partitions in view.partitions.items():
        for thread_id, share in range_split(partitions, view.threads.get(topic, [])).items():
            if thread_id in mine:
                for partition in share:
                    decision[(topic, partition)] = thread_id
    return dict(sorted(decision.items()))
