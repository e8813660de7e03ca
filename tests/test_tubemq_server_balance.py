"""TubeMQ's server-side balance on real lab brokers: the master's ticks assign, heartbeats carry the events.

The brokers (`cluster`) tick every 1.5 s instead of 30 s and the consumers
heartbeat every 0.3 s instead of 13 s, so that a test waits seconds, not
minutes; the order of things is what is asserted, never how long it took.
"""

from __future__ import annotations

import pytest
from conftest import PARTITIONS, InProcessMembers, _produced, _start_producer, _wait_produced, trace_events, wait_for

from lab_cluster.errors import LabError
from tubemq_client.server_balance import FAMILY

GROUP = "sg"
FAST = {"heartbeatPeriodMs": "300"}


@pytest.fixture
def broker_config():
    return {"consumerBalancePeriodMs": "1500"}


class Consumers(InProcessMembers):
    def __init__(self, cluster):
        super().__init__(cluster, FAMILY, GROUP, FAST)


@pytest.fixture
def consumers(cluster):
    c = Consumers(cluster)
    yield c
    c.stop_all()


def held(*members) -> list[int]:
    return sorted(p for m in members for p in m.partitions())


def test_the_master_assigns_every_partition_once_and_every_message_is_processed(cluster, consumers):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1, c2 = consumers.add("c1"), consumers.add("c2")
    wait_for(lambda: held(c1, c2) == list(range(PARTITIONS)) and c1.partitions() and c2.partitions(),
             "the master to give every partition to one of the two")
    cluster.producer.stop()
    cluster.producer = None
    produced = {(p, o) for p, msgs in _produced(cluster.dir).items() for o, _ in msgs}
    wait_for(lambda: produced <= {(e["partition"], e["offset"]) for n in ("c1", "c2")
                                  for e in trace_events(cluster.dir, n, "processed")}, "every message processed")
    # what each consumer did, it did because an event told it to
    for name in ("c1", "c2"):
        kinds = {e["f"]["event"] for e in trace_events(cluster.dir, name, "tubemq_event")}
        assert kinds and kinds <= {"CONNECT", "ONLY_CONNECT", "DISCONNECT", "ONLY_DISCONNECT"}, kinds


def test_a_newcomer_gets_partitions_only_after_the_holders_let_them_go(cluster, consumers):
    c1 = consumers.add("c1")
    wait_for(lambda: held(c1) == list(range(PARTITIONS)), "c1 to hold every partition")
    c2 = consumers.add("c2")
    wait_for(lambda: c2.partitions() and held(c1, c2) == list(range(PARTITIONS)), "the load to be shared")
    def did(name, kinds):
        return [e for e in trace_events(cluster.dir, name, "tubemq_event") if e["f"]["event"] in kinds]

    wait_for(lambda: did("c1", ("DISCONNECT", "ONLY_DISCONNECT")) and did("c2", ("CONNECT", "ONLY_CONNECT")),
             "both events in the traces (written as they flush)")
    let_go, taken = did("c1", ("DISCONNECT", "ONLY_DISCONNECT")), did("c2", ("CONNECT", "ONLY_CONNECT"))
    assert let_go[0]["ts_ns"] < taken[0]["ts_ns"]  # no CONNECT while a DISCONNECT of the group is pending
    assert set(taken[0]["f"]["partitions"]) <= set(let_go[0]["f"]["partitions"])
    # the broker never refused c2 a partition: c1 had unregistered each before c2 was told to take it
    assert all(e["f"]["code"] == "SUCCESS" for e in trace_events(cluster.dir, "c2", "tubemq_connect"))
    assert len(c1.partitions()) - len(c2.partitions()) in (-1, 0, 1)


def test_a_departed_consumers_share_is_handed_out_again(cluster, consumers):
    c1, c2 = consumers.add("c1"), consumers.add("c2")
    wait_for(lambda: c1.partitions() and c2.partitions() and held(c1, c2) == list(range(PARTITIONS)),
             "both to hold a share")
    consumers.stop("c2")  # a clean close: the master forgets it at once
    wait_for(lambda: held(c1) == list(range(PARTITIONS)), "c1 to be given c2's share")


def test_a_bad_config_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="heartbeatPeriodMs must be > 0"):
        FAMILY.configure({"group.id": "g", "masterHostAndPort": "127.0.0.1:1", "heartbeatPeriodMs": "0"}, "c1")
    with pytest.raises(LabError, match="Unknown consumer config key"):
        FAMILY.configure({"group.id": "g", "masterHostAndPort": "127.0.0.1:1", "sourceCount": "2"}, "c1")
