"""TubeMQ client-balance nodes on real lab brokers with the TubeMQ plug-in: static shares, broker fencing.

The brokers are real processes of the `cluster` fixture (three, topic `t` with
PARTITIONS partitions spread over them); the nodes run in this process
(`tubemq_client.consumer.BalancingNode`), each with its own trace.
"""

from __future__ import annotations

import pytest
from conftest import PARTITIONS, InProcessMembers, _produced, _start_producer, _wait_produced, trace_events, wait_for

from lab_cluster.assignment.tubemq import node_of
from lab_cluster.errors import LabError
from lab_cluster.trace import TraceRecorder
from tubemq_client import FAMILY
from tubemq_client.codes import PARTITION_OCCUPIED, UNAUTHORIZED
from tubemq_client.config import ConsumerConfig
from tubemq_client.consumer import BalancingNode

GROUP = "tg"
#: balance every second rather than every 10 s, so a test that waits for a round is short
FAST = {"partMetaInfoCheckPeriodMs": "1000"}


class Nodes(InProcessMembers):
    def __init__(self, cluster):
        super().__init__(cluster, FAMILY, GROUP, FAST)

    def add(self, name: str, source_count: int, **overrides) -> BalancingNode:
        return super().add(name, sourceCount=str(source_count), **overrides)


@pytest.fixture
def nodes(cluster):
    n = Nodes(cluster)
    yield n
    n.stop_all()


def events(cluster, actor, kind):
    return trace_events(cluster.dir, actor, kind)


def share(cluster, source_count: int, node_id: int) -> list[int]:
    """The partitions TubeMQ's example gives node `node_id`: keys `leader:t:p` hashed modulo `source_count`."""
    from lab_cluster.broker.admin import leaders

    return sorted(p for p, leader in leaders(cluster.zk, "t").items()
                  if node_of(f"{leader}:t:{p}", source_count) == node_id)


def test_two_nodes_take_their_hash_shares_and_process_every_message(cluster, nodes):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1, c2 = nodes.add("c1", 2), nodes.add("c2", 2)
    wait_for(lambda: c1.partitions() == share(cluster, 2, 0) and c2.partitions() == share(cluster, 2, 1),
             "each node to hold its hash share")
    cluster.producer.stop()
    cluster.producer = None
    produced = {(p, o) for p, msgs in _produced(cluster.dir).items() for o, _ in msgs}
    wait_for(lambda: produced <= {(e["partition"], e["offset"]) for n in ("c1", "c2")
                                  for e in events(cluster, n, "processed")}, "every message to be processed")
    assert all(e["f"]["outcome"] == "accepted" for n in ("c1", "c2") for e in events(cluster, n, "commit"))


def test_a_node_that_leaves_leaves_its_share_to_nobody(cluster, nodes):
    c1, c2 = nodes.add("c1", 2), nodes.add("c2", 2)
    wait_for(lambda: c1.partitions() and c2.partitions(), "both nodes to hold their shares")
    gone = c2.partitions()
    nodes.stop("c2")
    rounds = len(events(cluster, "c1", "rebalance_end"))
    wait_for(lambda: len(events(cluster, "c1", "rebalance_end")) >= rounds + 3, "three more rounds of c1")
    assert c1.partitions() == share(cluster, 2, 0) and not set(gone) & set(c1.partitions())


def test_the_master_refuses_a_second_node_id_and_another_source_count(cluster, nodes):
    nodes.add("c1", 2)
    twin = nodes.add("c1b", 2, nodeId="0")  # the same node id, another consumer id
    other = nodes.add("c2", 3)  # another sourceCount
    assert twin.snapshot().gave_up and other.snapshot().gave_up
    codes = [e["f"]["code"] for e in events(cluster, "c1b", "tubemq_master_register")]
    assert codes == ["CLIENT_DUPLICATE_INDEXID"] * 5  # TubeMQ's 5 tries, then the start fails
    assert events(cluster, "c2", "tubemq_master_register")[-1]["f"]["code"] == "CLIENT_INCONSISTENT_SOURCECOUNT"


def test_the_broker_refuses_a_second_registration_and_a_non_owners_confirm(cluster, nodes):
    c1 = nodes.add("c1", 1)
    wait_for(lambda: c1.partitions() == list(range(PARTITIONS)), "c1 to hold every partition")
    # a second SDK of the same group, with its own consumer id, asks for a partition c1 holds
    from tubemq_client.consumer import ClientBalanceConsumer

    intruder_config = ConsumerConfig.from_dict({"consumerGroup": GROUP, "masterHostAndPort": cluster.bootstrap,
                                                "sourceCount": "2", "nodeId": "1"})
    trace = TraceRecorder(cluster.dir, trial="t", design="tubemq", actor="intruder")
    nodes.traces.append(trace)
    intruder = ClientBalanceConsumer(intruder_config, trace, "intruder")
    key = sorted(c1.sdk.registered)[0]
    intruder.topics = ["t"]
    intruder.get_partition_meta_info()
    assert intruder.connect_to_partition(key, -1) == PARTITION_OCCUPIED
    assert intruder.confirm_consume(key, consumed=True) == UNAUTHORIZED
    intruder.shutdown()


def test_a_node_id_outside_the_source_count_is_refused_at_start_before_contacting_anyone(tmp_path):
    config = FAMILY.configure({"group.id": "g", "masterHostAndPort": "127.0.0.1:1", "sourceCount": "2"}, "j1")
    assert config.node_id == 2  # a newcomer takes the next id past the group's: out of range
    with TraceRecorder(tmp_path, trial="t", design="tubemq", actor="j1") as trace:
        node = BalancingNode(config, ["t"], trace, name="j1").start()
    assert node.snapshot().state == "START_FAILED" and node.snapshot().gave_up
    assert not list(tmp_path.glob("traces/*master*"))  # nothing was asked of a master at 127.0.0.1:1


def test_a_round_whose_master_query_fails_is_skipped_not_balanced_from_the_cache(tmp_path):
    """ClientBalanceConsumerExample: `if (!consumer.getPartitionMetaInfo(qryResult))` nothing is done that round;
    the cached map is not balanced from (its partitions would be connected to brokers perhaps gone)."""
    from lab_cluster.ports import free_port

    config = FAMILY.configure({"group.id": "g", "masterHostAndPort": f"127.0.0.1:{free_port()}", "sourceCount": "1",
                               "nodeId": "0"}, "c1")
    with TraceRecorder(tmp_path, trial="t", design="tubemq", actor="c1") as trace:
        node = BalancingNode(config, ["t"], trace, name="c1")
        node.sdk._meta = {"1:t:0": True, "2:t:1": True}  # what an earlier round cached; nothing registered yet
        node.sdk._last_meta_ms = None  # due: the master is asked, and does not answer
        node.balance_once()
    assert node.sdk.registered == {}
    assert [e["kind"] for e in trace_events(tmp_path, "c1", "tubemq_meta_failed")] == ["tubemq_meta_failed"]
    assert not trace_events(tmp_path, "c1", "tubemq_connect") and not trace_events(tmp_path, "c1", "rebalance_begin")


def test_a_bad_config_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="nodeId"):
        ConsumerConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "127.0.0.1:1", "sourceCount": "2",
                                  "nodeId": "one"})
    with pytest.raises(LabError, match="masterHostAndPort"):
        ConsumerConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "nowhere", "sourceCount": "2"})
    with pytest.raises(LabError, match="sourceCount"):
        ConsumerConfig.from_dict({"consumerGroup": "g", "masterHostAndPort": "127.0.0.1:1", "nodeId": "0"})
