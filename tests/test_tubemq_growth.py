"""A topic's partitions grow under a stable TubeMQ group (issue 39): both designs learn of them as TubeMQ does.

- client balance: the master re-reads a group's topic metadata only in its balance pass
  (`TMaster.processClientBalanceMetaInfo`), each node asks for it every `partMetaInfoCheckPeriodMs` and connects
  the new partitions that hash to it (`ClientBalanceConsumerExample`);
- server balance: the master's next pass hands the new partitions out (`DefaultLoadBalancer.balanceCluster`),
  the consumers take them at their next heartbeats.

The master's pass is made every 1.5 s instead of 30 s, a node asks every second, a server-balance consumer
heartbeats every 0.3 s: the order of things is asserted, never how long it took. The I/O-free tests drive one
master's pass by hand, on a stand-in broker.
"""

from __future__ import annotations

import time

import pytest
from conftest import PARTITIONS, InProcessMembers, trace_events, wait_for

from lab_cluster.assignment.tubemq import node_of
from lab_cluster.broker.admin import add_partitions, leaders, wait_for_metadata
from lab_cluster.clock import FakeClock
from lab_cluster.trace import TraceRecorder
from tubemq_client import FAMILY as CLIENT_BALANCE
from tubemq_client.codes import SUCCESS
from tubemq_client.consumer import ClientBalanceConsumer
from tubemq_client.master.groups import MIN_META_FORCE_UPDATE_PERIOD_MS, GroupTable
from tubemq_client.master.service import TubeMasterService
from tubemq_client.server_balance import FAMILY as SERVER_BALANCE

GROWN = 2 * PARTITIONS
BROKERS = [1, 2, 3]


@pytest.fixture
def broker_config():
    return {"consumerBalancePeriodMs": "1500"}


def grow(cluster, partitions: int = GROWN) -> None:
    add_partitions(cluster.zk, "t", partitions, BROKERS)
    wait_for_metadata(cluster.zk, "t", partitions)


def held(*members) -> list[int]:
    return sorted(p for m in members for p in m.partitions())


def broker_events(cluster, kind: str) -> list[dict]:
    return [e for b in BROKERS for e in trace_events(cluster.dir, f"broker-{b}", kind)]


def share(cluster, source_count: int, node_id: int) -> list[int]:
    return sorted(p for p, leader in leaders(cluster.zk, "t").items()
                  if node_of(f"{leader}:t:{p}", source_count) == node_id)


# -- on a real cluster -------------------------------------------------------------------------------------
def test_client_balance_nodes_learn_the_new_partitions_after_the_masters_pass_and_take_their_shares(cluster):
    nodes = InProcessMembers(cluster, CLIENT_BALANCE, "tg", {"partMetaInfoCheckPeriodMs": "1000"})
    try:
        c1, c2 = nodes.add("c1", sourceCount="2"), nodes.add("c2", sourceCount="2")
        wait_for(lambda: held(c1, c2) == list(range(PARTITIONS)), "the two nodes to hold every partition")
        grown_ns = time.monotonic_ns()  # the traces' clock
        grow(cluster)
        wait_for(lambda: c1.partitions() == share(cluster, 2, 0) and c2.partitions() == share(cluster, 2, 1)
                 and held(c1, c2) == list(range(GROWN)), "every partition, old and new, held once, by its hash")
        wait_for(lambda: all(trace_events(cluster.dir, n, "partitions_seen") for n in ("c1", "c2")),
                 "both nodes' partitions_seen in their traces")

        def passes():  # the master's passes since the growth that changed the group's metadata
            return [e for e in broker_events(cluster, "tubemq_balance")
                    if "tg" in e["f"].get("meta_changed", []) and e["ts_ns"] > grown_ns]

        wait_for(passes, "the master's pass that changed the group's metadata, in its trace")
        assert len(passes()) == 1
        for name in ("c1", "c2"):
            seen = trace_events(cluster.dir, name, "partitions_seen")
            assert [(e["topic"], e["f"]["partitions"], e["f"]["before"]) for e in seen] == [("t", GROWN, PARTITIONS)]
            assert seen[0]["ts_ns"] > grown_ns
        assert not broker_events(cluster, "partitions_seen")  # the master assigns nothing to this group
    finally:
        nodes.stop_all()


def test_the_server_balance_master_hands_the_new_partitions_out_at_its_next_pass(cluster):
    consumers = InProcessMembers(cluster, SERVER_BALANCE, "sg", {"heartbeatPeriodMs": "300"})
    try:
        c1, c2 = consumers.add("c1"), consumers.add("c2")
        wait_for(lambda: held(c1, c2) == list(range(PARTITIONS)) and c1.partitions() and c2.partitions(),
                 "the master to give every partition to one of the two")
        grow(cluster)
        wait_for(lambda: held(c1, c2) == list(range(GROWN)) and abs(len(c1.partitions()) - len(c2.partitions())) <= 1,
                 "every partition, old and new, held once, and the loads even")
        wait_for(lambda: broker_events(cluster, "partitions_seen"), "the master's partitions_seen in its trace")
        seen = broker_events(cluster, "partitions_seen")
        assert [(e["f"]["group"], e["topic"], e["f"]["partitions"], e["f"]["before"]) for e in seen] == [
            ("sg", "t", GROWN, PARTITIONS)]

        # the new partitions were first taken on a CONNECT the master handed out after its pass had seen them
        def taking_new():
            return [e for n in ("c1", "c2") for e in trace_events(cluster.dir, n, "tubemq_event")
                    if any(int(k.split(":")[2]) >= PARTITIONS for k in e["f"]["partitions"])]

        wait_for(taking_new, "the consumers' events with new partitions in their traces (written as they flush)")
        first_new = min(taking_new(), key=lambda e: e["ts_ns"])
        assert first_new["f"]["event"] in ("CONNECT", "ONLY_CONNECT") and first_new["ts_ns"] > seen[0]["ts_ns"]
        assert not [e for n in ("c1", "c2") for e in trace_events(cluster.dir, n, "partitions_seen")]
    finally:
        consumers.stop_all()


# -- one master's pass, by hand, on a stand-in broker -------------------------------------------------------
class StandInBroker:
    """What the master reads of its broker: config, metadata (leaders: partition p on broker p % 3 + 1), the
    topic's partition count; what it records."""

    def __init__(self, partitions: int):
        self.partitions, self.config, self.records = partitions, {"consumerBalancePeriodMs": "3600000"}, []
        self.server = type("Server", (), {"add_api": lambda *args: None})()

    def partition_count(self, topic: str) -> int:
        return self.partitions if topic == "t" else 0

    def metadata(self) -> dict:
        return {"brokers": {str(i): {"host": "127.0.0.1", "port": 9000 + i} for i in BROKERS},
                "topics": {"t": {str(p): p % 3 + 1 for p in range(self.partitions)}}}

    def record(self, kind: str, **fields) -> None:
        self.records.append((kind, fields))


@pytest.fixture
def master():
    broker = StandInBroker(PARTITIONS)
    service = TubeMasterService(broker)
    yield broker, service
    service.stop()


def test_the_client_balance_master_answers_from_its_copy_until_its_pass_reads_the_growth(master):
    broker, service = master
    ask = {"group": "g", "client_id": "n0", "topics": ["t"]}
    assert service._register({**ask, "source_count": 1, "node_id": 0})["code"] == SUCCESS
    first = service._meta(ask)
    assert first["topic_meta"] == {"t": PARTITIONS} and len(first["partitions"]) == PARTITIONS
    broker.partitions = GROWN
    assert service._meta(ask)["topic_meta"] == {"t": PARTITIONS}  # the brokers know; the master's copy does not
    assert len(service._meta(ask)["partitions"]) == PARTITIONS
    service.balance_pass()
    after = service._meta(ask)
    assert after["topic_meta"] == {"t": GROWN} and len(after["partitions"]) == GROWN
    assert after["topic_meta_info_id"] > first["topic_meta_info_id"]
    assert [f["meta_changed"] for kind, f in broker.records if kind == "tubemq_balance"] == [["g"]]
    assert not [r for r in broker.records if r[0] == "partitions_seen"]  # no server-balance group here


def test_the_server_balance_master_records_a_growth_once_at_the_pass_that_sees_it(master):
    broker, service = master
    service._register_server_balance({"group": "s", "client_id": "a", "topics": ["t"]})
    service._heartbeat_server_balance({"group": "s", "client_id": "a", "held": []})
    service.balance_pass(first=True)
    broker.partitions = GROWN
    service.balance_pass()  # a's events of the first pass are pending: the group is skipped, nothing seen
    assert not [r for r in broker.records if r[0] == "partitions_seen"]
    event = service._heartbeat_server_balance({"group": "s", "client_id": "a", "held": []})["event"]
    done = {"group": "s", "client_id": "a", "held": event["partitions"], "done": event["rebalance_id"]}
    service._heartbeat_server_balance(done)
    service.balance_pass()
    service.balance_pass()
    assert [f for kind, f in broker.records if kind == "partitions_seen"] == [
        {"group": "s", "topic": "t", "partitions": GROWN, "before": PARTITIONS}]
    new = service._heartbeat_server_balance({**done, "done": None})["event"]
    assert new["kind"] == "ONLY_CONNECT" and sorted(new["partitions"]) == sorted(
        f"{p % 3 + 1}:t:{p}" for p in range(PARTITIONS, GROWN))


def test_a_heartbeat_brings_the_metadata_only_to_a_member_that_stored_none_for_the_force_update_period():
    clock, counts = FakeClock(start_ms=0), {"t": PARTITIONS}
    groups = GroupTable(clock=clock, meta_force_update_period_ms=1_000)  # below TubeMQ's floor: raised to it
    assert groups.meta_force_update_period_ms == MIN_META_FORCE_UPDATE_PERIOD_MS
    groups.add_consumer("g", "n0", ["t"], source_count=1, node_id=0)
    meta_id, _ = groups.topic_meta("g", counts.get)  # the member stores it at 0
    assert groups.heartbeat_meta("g", "n0", lst_assigned_ms=0) is None  # reports no partition yet
    groups.heartbeat("g", "n0", ["1:t:0"])
    clock.advance(MIN_META_FORCE_UPDATE_PERIOD_MS)
    assert groups.heartbeat_meta("g", "n0", lst_assigned_ms=0) is None  # not more than the period
    assert groups.heartbeat_meta("g", "n0", lst_assigned_ms=None) is None  # never stored any
    clock.advance(1)
    assert groups.heartbeat_meta("g", "n0", lst_assigned_ms=0) == meta_id


def test_the_sdk_records_partitions_seen_only_when_stored_metadata_grows(tmp_path):
    config = CLIENT_BALANCE.configure({"group.id": "g", "masterHostAndPort": "127.0.0.1:1", "sourceCount": "1",
                                       "nodeId": "0"}, "c1")
    with TraceRecorder(tmp_path, trial="t", design="tubemq", actor="c1") as trace:
        sdk = ClientBalanceConsumer(config, trace, "c1")

        def answer(meta_id, partitions, **extra):
            return {"topic_meta_info_id": meta_id, "topic_meta": {"t": partitions},
                    "partitions": {f"1:t:{p}": True for p in range(partitions)}, "brokers": {}, **extra}

        sdk._take_meta(answer(10, PARTITIONS), via="query")  # the first: not a growth
        sdk._take_meta(answer(10, PARTITIONS), via="query")  # the same id: nothing stored
        sdk._take_meta(answer(20, GROWN), via="heartbeat")
        sdk._take_meta(answer(30, GROWN), via="query")  # another id, the same count
    seen = trace_events(tmp_path, "c1", "partitions_seen")
    assert [(e["topic"], e["f"]["partitions"], e["f"]["before"], e["f"]["via"]) for e in seen] == [
        ("t", GROWN, PARTITIONS, "heartbeat")]
    assert len(sdk._meta) == GROWN and sdk._topic_meta_id == 30
