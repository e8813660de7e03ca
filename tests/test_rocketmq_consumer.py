"""RocketMQ push consumers on real lab brokers with the RocketMQ plug-in: start, rebalance, consume, leave.

The brokers are real processes of the `cluster` fixture (three, topic `t` with
PARTITIONS partitions spread over them); the consumers run in this process
(`rocketmq_client.consumer.PushConsumer`), each with its own trace.
"""

from __future__ import annotations

import pytest
from conftest import PARTITIONS, _produced, _start_producer, _wait_produced, trace_events, wait_for

from lab_cluster.errors import LabError
from lab_cluster.trace import TraceRecorder
from rocketmq_client import FAMILY
from rocketmq_client.config import ClientConfig
from rocketmq_client.consumer import PushConsumer

GROUP = "rg"
#: rebalance every 2 s rather than 20 s, so a test that waits for a periodic rebalance is short
FAST = {"rocketmq.client.rebalance.waitInterval": "2000", "persistConsumerOffsetInterval": "500"}


class Group:
    def __init__(self, cluster):
        self.cluster, self.members, self.traces = cluster, {}, []

    def add(self, name: str, **overrides) -> PushConsumer:
        config = FAMILY.configure({"group.id": GROUP, "namesrvAddr": self.cluster.bootstrap,
                                   **FAMILY.from_beginning, **FAST, **overrides}, name)
        trace = TraceRecorder(self.cluster.dir, trial="t", design="rocketmq", actor=name)
        self.traces.append(trace)
        self.members[name] = PushConsumer(config, ["t"], trace).start()
        return self.members[name]

    def settled(self, names) -> bool:
        """Every named member holds a share (PARTITIONS >= members), the shares are disjoint and cover every
        partition."""
        shares = [self.members[n].partitions() for n in names]
        return all(shares) and sorted(p for share in shares for p in share) == list(range(PARTITIONS))

    def stop(self, name: str) -> None:
        self.members.pop(name).stop()

    def stop_all(self) -> None:
        for name in list(self.members):
            self.stop(name)
        for trace in self.traces:
            trace.close()


@pytest.fixture
def group(cluster):
    g = Group(cluster)
    yield g
    g.stop_all()


def events(cluster, actor, kind):
    return trace_events(cluster.dir, actor, kind)


def test_every_message_is_processed_once_by_a_group_that_changes_gracefully(cluster, group):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    group.add("c1")
    group.add("c2")
    wait_for(lambda: group.settled(["c1", "c2"]), "c1 and c2 to split the queues")
    group.add("c3")
    wait_for(lambda: group.settled(["c1", "c2", "c3"]), "the three to split the queues")
    group.stop("c2")  # persists its offsets, UNREGISTER_CLIENT at every broker: c1 and c3 are told at once
    wait_for(lambda: group.settled(["c1", "c3"]), "c1 and c3 to take c2's queues")
    cluster.producer.stop()
    cluster.producer = None
    produced = {(p, o) for p, msgs in _produced(cluster.dir).items() for o, _ in msgs}
    wait_for(lambda: produced <= {(e["partition"], e["offset"]) for n in ("c1", "c2", "c3")
                                  for e in events(cluster, n, "processed")}, "every message to be processed")
    # each member's view is the sorted id list it allocated from, and its client id is clientIP@instanceName.
    # c1 may have settled from a broker that had not yet processed c2's unregister (its share of three can
    # still fit beside c3's): the list without c2 comes at its next rebalance, on a push or its 2 s timer
    def views():
        return {e["f"]["view"] for e in events(cluster, "c1", "assigned")}
    assert "127.0.0.1@c1,127.0.0.1@c2,127.0.0.1@c3" in views()
    wait_for(lambda: "127.0.0.1@c1,127.0.0.1@c3" in views(), "c1 to allocate from the list without c2")
    # the others learnt of c3 and of c2's leaving from the brokers' pushes, not from their 2 s timer alone
    assert events(cluster, "c1", "notified")


def test_a_consumer_the_brokers_forgot_is_told_nothing_and_its_commits_are_accepted(cluster, group):
    """The zombie of RocketMQ: nothing fences an offset update. c1 keeps queues c2 now owns (here its own timers
    are long and the brokers forget it, as their scan does after 120 s of silence; being out of the group, it
    is not told) and goes on consuming and committing them; the brokers accept, from anyone."""
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1 = group.add("c1", **{"rocketmq.client.rebalance.waitInterval": "600000", "heartbeatBrokerInterval": "600000"})
    group.add("c2")
    wait_for(lambda: group.settled(["c1", "c2"]), "c1 and c2 to split the queues")
    mine = c1.partitions()
    # c1's first scheduled heartbeat (1 s after its start) must be behind it, or it would register c1 again
    wait_for(lambda: sum(1 for b in (1, 2, 3) for e in events(cluster, f"broker-{b}", "rocketmq_request")
                         if e["f"]["api"] == "HEART_BEAT" and e["f"]["client"] == c1.client_id) >= 6,
             "c1's first scheduled heartbeat to every broker")
    c1.instance.unregister_client(GROUP)  # the brokers drop c1; only c2 is told
    wait_for(lambda: any(len(e["f"]["partitions"]) == PARTITIONS for e in events(cluster, "c2", "assigned")),
             "c2 to take every queue")
    taken = [e for e in events(cluster, "c2", "assigned") if len(e["f"]["partitions"]) == PARTITIONS][0]["ts_ns"]
    assert c1.partitions() == mine  # nobody told c1
    wait_for(lambda: any(e["ts_ns"] > taken and e["f"]["outcome"] == "accepted" and e["partition"] in mine
                         for e in events(cluster, "c1", "commit")), "c1 to commit a queue c2 owns, accepted")
    wait_for(lambda: any(e["ts_ns"] > taken and e["partition"] in mine for e in events(cluster, "c1", "processed")),
             "c1 to go on consuming it")


def test_a_bad_config_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="allocateMessageQueueStrategy"):
        ClientConfig.from_dict({"consumerGroup": "g", "namesrvAddr": "127.0.0.1:1",
                                "allocateMessageQueueStrategy": "AllocateByMagic"})
    with pytest.raises(LabError, match="namesrvAddr"):
        ClientConfig.from_dict({"consumerGroup": "g", "namesrvAddr": "nowhere"})
    with pytest.raises(LabError, match="Unknown consumer config"):
        ClientConfig.from_dict({"consumerGroup": "g", "namesrvAddr": "127.0.0.1:1", "session.timeout.ms": "1"})


def test_orderly_consumers_hold_their_queues_locks_at_the_broker(cluster, group):
    """`messageListener=orderly`: a queue is added only once its broker granted the lock, and the broker
    refuses that lock to anyone else (60 s, renewed every 20 s), so two orderly consumers never consume one
    queue at once, even with different views."""
    from lab_cluster.wire import DuplexClient
    from rocketmq_client.instance import broker_name

    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1, c2 = group.add("c1", messageListener="orderly"), group.add("c2", messageListener="orderly")
    wait_for(lambda: group.settled(["c1", "c2"]), "c1 and c2 to split the queues")
    for consumer in (c1, c2):
        for mq in list(consumer.rebalance_impl.table):
            broker_id = int(mq[1].split("-")[1])
            assert mq[1] == broker_name(broker_id)
            other = DuplexClient("127.0.0.1", cluster.brokers[broker_id].port, client_id="127.0.0.1@intruder")
            try:
                answer = other.call("LOCK_BATCH_MQ", consumer_group=GROUP, client_id="127.0.0.1@intruder",
                                    mq_set=[list(mq)])
            finally:
                other.close()
            assert answer["lock_ok_mq_set"] == [], (consumer.client_id, mq)
    wait_for(lambda: {p for n in ("c1", "c2") for p in {e["partition"] for e in events(cluster, n, "processed")}}
             == set(range(PARTITIONS)), "both to consume every queue they hold")
