"""RocketMQ's and TubeMQ's offsets survive the death of the broker that stored them.

Their brokers keep consumer offsets and flush them every 5 s; a real queue or
partition stays on its broker and comes back with it. A lab partition's
leader moves instead, so the offsets are flushed beside the partition's log
and the new leader reads them (`lab_cluster/partition_offsets.py`). Here the
leader of a partition a stable one-member group consumes is killed: the
partition, now under another broker's name, is read on from the flushed
offset, not again from the start of its log.
"""

from __future__ import annotations

import time

import pytest
from conftest import InProcessMembers, _start_producer, _wait_produced, trace_events, wait_for

from experiments.engine.families import FAMILIES
from lab_cluster.broker.admin import leaders
from lab_cluster.partition_offsets import FLUSH_INTERVAL_MS, PartitionOffsets

#: each design's member: it holds every partition, and notices a moved partition within about a second
SETTINGS = {"rocketmq": {"rocketmq.client.rebalance.waitInterval": "1000", "pollNameServerInterval": "1000"},
            "tubemq": {"sourceCount": "1", "partMetaInfoCheckPeriodMs": "1000"}}


def _processed(cluster, partition, after_ns=0, before_ns=None):
    return [e["offset"] for e in trace_events(cluster.dir, "c1", "processed")
            if e["partition"] == partition and e["ts_ns"] > after_ns and (before_ns is None or e["ts_ns"] < before_ns)]


@pytest.mark.parametrize("design", ["rocketmq", "tubemq"])
def test_a_partition_whose_leader_dies_is_read_on_from_its_flushed_offset(cluster, design):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    members = InProcessMembers(cluster, FAMILIES[design], "g", SETTINGS[design])
    try:
        members.add("c1")
        wait_for(lambda: all(len(_processed(cluster, p)) >= 10 for p in range(4)), "c1 to process every partition",
                 timeout_s=90)
        moved, victim = next((p, leader) for p, leader in sorted(leaders(cluster.zk, "t").items()) if leader > 0)
        # a flush of the offsets c1 reached (RocketMQ's first comes 10 s after its broker started, then every 5 s)
        flushed = PartitionOffsets(cluster.dir / "logs", design)
        wait_for(lambda: flushed.load("t", moved).get("g", 0) > 0, f"partition {moved}'s offset to be flushed",
                 timeout_s=30)
        time.sleep(FLUSH_INTERVAL_MS / 1000)  # and one more, nearer the kill
        kill_ns = time.monotonic_ns()  # the traces' clock
        cluster.brokers[victim].kill()
        wait_for(lambda: _processed(cluster, moved, kill_ns), f"partition {moved} to be read again, from its new "
                 "leader", timeout_s=90)
        before = max(_processed(cluster, moved, before_ns=kill_ns))  # now that the trace holds all of them
        resumed_at = min(_processed(cluster, moved, kill_ns))
        # from where the dead broker's last flush left it (at most 5 s of records before `before`), not from 0
        assert 0 < resumed_at <= before + 1, (resumed_at, before)
    finally:
        members.stop_all()
