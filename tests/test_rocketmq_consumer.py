"""RocketMQ push consumers on real lab brokers with the RocketMQ plug-in: start, rebalance, consume, leave.

The brokers are real processes of the `cluster` fixture (three, topic `t` with
PARTITIONS partitions spread over them); the consumers run in this process
(`rocketmq_client.consumer.PushConsumer`), each with its own trace.
"""

from __future__ import annotations

import pytest
from conftest import PARTITIONS, InProcessMembers, _produced, _start_producer, _wait_produced, trace_events, wait_for

from lab_cluster.errors import LabError
from rocketmq_client import FAMILY
from rocketmq_client.config import ClientConfig
from rocketmq_client.consumer import PushConsumer

GROUP = "rg"
#: rebalance every 2 s rather than 20 s, so a test that waits for a periodic rebalance is short
FAST = {"rocketmq.client.rebalance.waitInterval": "2000", "persistConsumerOffsetInterval": "500"}


class Group(InProcessMembers):
    def __init__(self, cluster):
        super().__init__(cluster, FAMILY, GROUP, FAST)

    def settled(self, names) -> bool:
        """Every named member holds a share (PARTITIONS >= members), the shares are disjoint and cover every
        partition."""
        shares = [self.members[n].partitions() for n in names]
        return all(shares) and sorted(p for share in shares for p in share) == list(range(PARTITIONS))


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


def test_the_broker_stores_the_offset_each_pull_carries(cluster, group):
    """With the periodic persist out of the way (10 min), the brokers' offsets still follow consumption, one pull
    behind: RocketMQ's COMMIT_OFFSET flag, stored by the broker as it answers (PullMessageProcessor)."""
    from rocketmq_client.instance import MQClientInstance

    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1 = group.add("c1", persistConsumerOffsetInterval="600000")
    wait_for(lambda: len(c1.partitions()) == PARTITIONS, "c1 to hold every queue")
    wait_for(lambda: all(len([e for e in events(cluster, "c1", "processed") if e["partition"] == p]) >= 5
                         for p in range(PARTITIONS)), "c1 to process 5 records of each queue")
    probe = MQClientInstance("probe", [("127.0.0.1", b.port) for b in cluster.brokers.values()], group.traces[0],
                             timeout_ms=3000, on_notify=lambda broker: None)
    try:
        assert probe.update_route("t")
        stored = {mq[2]: probe.query_offset(GROUP, mq) for mq in sorted(probe.queues("t"))}
    finally:
        probe.close()
    assert all(offset > 0 for offset in stored.values()), stored
    assert {e["f"]["why"] for e in events(cluster, "c1", "commit")} == {"pull"}


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
    from lab_cluster.clock import monotonic_ms
    from lab_cluster.wire import DuplexClient
    from rocketmq_client.instance import broker_name

    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 3)
    c1, c2 = group.add("c1", messageListener="orderly"), group.add("c2", messageListener="orderly")
    wait_for(lambda: group.settled(["c1", "c2"]), "c1 and c2 to split the queues")
    # Judge the locks once each consumer has renewed every queue it holds (`lockAll`, every 20 s) since the
    # split. Before, a queue dropped and taken back while c2 joined may have lost its lock to its holder's own
    # oneway UNLOCK_BATCH_MQ arriving after the new LOCK_BATCH_MQ (after an invokeSync timeout closed the
    # channel it was sent on; RocketMQ's broker, too, hands the two to a thread pool, not in order); the
    # holder's next lockAll takes the free lock again. One CI run (code of 63679ea) caught such a moment.
    split_ms = monotonic_ms()
    wait_for(lambda: group.settled(["c1", "c2"]) and all(
        pq.locked and pq.last_lock_ms > split_ms for c in (c1, c2) for pq in c.held().values()),
        "c1 and c2 to renew the locks of every queue they hold", timeout_s=90)
    for consumer in (c1, c2):
        for mq in consumer.held():
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


# -- without I/O: the pull thread, offsets and locks, on a fake instance and a fake clock ----------------------

class FakeTrace:
    def __init__(self, on_record=None):
        self.events, self.on_record = [], on_record or (lambda kind, fields: None)

    def record(self, kind, **fields):
        self.events.append((kind, fields))
        self.on_record(kind, fields)

    def kinds(self, kind):
        return [f for k, f in self.events if k == kind]


class FakeInstance:
    """What the consumer asks of `MQClientInstance`, in memory: pulls that fail for some queues, locks, offsets."""

    def __init__(self, records=None, failing=(), locks=None, stored=None):
        self.records, self.failing, self.locks, self.stored = dict(records or {}), set(failing), locks, stored or {}
        self.pulls, self.pull_commits, self.lock_calls = [], [], []

    def pull(self, group, mq, offset, max_records, commit_offset=None):
        self.pulls.append((mq, offset))
        self.pull_commits.append((mq, commit_offset))
        if mq in self.failing:
            raise ConnectionError("no answer within 30 s")
        return [r for r in self.records.get(mq, []) if r["offset"] >= offset][:max_records]

    def lock(self, group, mq, client_id):
        self.lock_calls.append(mq)
        return self.locks is not None and mq in self.locks

    def lock_batch(self, group, name, mqs):
        return None if self.locks is None else {mq for mq in mqs if mq in self.locks}

    def query_offset(self, group, mq):
        from rocketmq_client.rebalance import OffsetNotFound
        if mq not in self.stored:
            raise OffsetNotFound(mq)
        return self.stored[mq]

    def max_offset(self, mq):
        return 0

    def persist_offset(self, group, mq, offset, on_outcome):
        on_outcome("accepted", "NONE")  # the broker's answer, which the oneway request does not wait for


def offline_consumer(monkeypatch, instance, trace=None, **overrides):
    from lab_cluster.clock import FakeClock

    clock = FakeClock(start_ms=1_000_000)
    monkeypatch.setattr("rocketmq_client.consumer.monotonic_ms", clock)
    config = ClientConfig.from_dict({"consumerGroup": GROUP, "namesrvAddr": "127.0.0.1:1", "instanceName": "c1",
                                     **overrides})
    consumer = PushConsumer(config, ["t"], trace or FakeTrace())
    consumer.instance = instance
    return consumer, clock


def mq(q):
    return ("t", "broker-1", q)


def add(consumer, q, offset=0, now=1_000_000):
    from rocketmq_client.rebalance import ProcessQueue
    consumer.rebalance_impl.table[mq(q)] = pq = ProcessQueue(offset, last_pull_ms=now, last_lock_ms=now)
    return pq


def test_a_failed_pull_is_pulled_again_1_s_later_and_the_other_queues_go_on(monkeypatch):
    """PullCallback.onException: executePullRequestLater(pullTimeDelayMillsWhenException = 1000)."""
    from rocketmq_client.consumer import PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION

    instance = FakeInstance(records={mq(1): [{"offset": 0}, {"offset": 1}]}, failing={mq(0)})
    consumer, clock = offline_consumer(monkeypatch, instance)
    failed, ok = add(consumer, 0), add(consumer, 1)
    assert consumer._pull_round()
    assert failed.next_pull_ms == clock() + PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION and ok.offset == 2
    assert [f["api"] for f in consumer.trace.kinds("rocketmq_request_failed")] == ["PULL_MESSAGE"]
    clock.advance(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION - 1)
    consumer._pull_round()
    assert [p[0] for p in instance.pulls].count(mq(0)) == 1  # not yet due
    clock.advance(1)
    consumer._pull_round()
    assert [p[0] for p in instance.pulls].count(mq(0)) == 2


def test_an_offset_update_does_not_wait_and_is_traced_when_the_broker_answers(monkeypatch):
    consumer, _ = offline_consumer(monkeypatch, FakeInstance())
    add(consumer, 0, offset=7).in_offset_table = True
    add(consumer, 1, offset=9)  # not pulled yet: not in the offset table, not persisted
    consumer._persist_all("interval")
    assert [(f["offset"], f["outcome"], f["why"]) for f in consumer.trace.kinds("commit")] == [(7, "accepted",
                                                                                                  "interval")]


def test_a_pull_carries_the_consumed_offset_once_the_offset_table_has_one_above_0(monkeypatch):
    """DefaultMQPushConsumerImpl.pullMessage: the COMMIT_OFFSET flag, with readOffset(READ_FROM_MEMORY), when that
    is above 0; the commit is traced once per offset carried."""
    instance = FakeInstance(records={mq(0): [{"offset": 0}, {"offset": 1}]})
    consumer, _ = offline_consumer(monkeypatch, instance)
    add(consumer, 0)
    consumer._pull_round()  # not in the offset table yet: no flag
    consumer._pull_round()  # its offset is 2 now: carried
    consumer._pull_round()  # idle: the same offset again, traced once
    assert instance.pull_commits == [(mq(0), None), (mq(0), 2), (mq(0), 2)]
    assert [(f["offset"], f["outcome"], f["why"]) for f in consumer.trace.kinds("commit")] == [(2, "accepted", "pull")]


def test_orderly_a_queue_not_locked_is_tried_again_1_s_later_and_counts_as_pulled(monkeypatch):
    """DefaultMQPushConsumerImpl.pullMessage: `lastPullTimestamp` first, then "pull message later because not
    locked in broker": such a queue is never dropped as pull-expired."""
    consumer, clock = offline_consumer(monkeypatch, FakeInstance(), messageListener="orderly")
    pq = add(consumer, 0, now=clock() - 200_000)
    pq.locked = False
    assert not consumer._pull_round()
    assert pq.last_pull_ms == clock() and pq.next_pull_ms == clock() + 1_000 and not consumer.instance.pulls


def test_orderly_the_first_pull_after_locking_reads_the_offset_from_the_broker(monkeypatch):
    """"the first time to pull message, so fix offset from broker" (previouslyLocked)."""
    instance = FakeInstance(records={mq(0): [{"offset": o} for o in range(50)]}, locks={mq(0)},
                            stored={mq(0): 40})
    consumer, _ = offline_consumer(monkeypatch, instance, messageListener="orderly")
    pq = add(consumer, 0, offset=10)  # the offset it computed when it added the queue; the broker's moved since
    consumer._pull_round()
    assert instance.pulls[0] == (mq(0), 40) and pq.previously_locked and pq.offset == 50
    consumer._pull_round()
    assert instance.pulls[1] == (mq(0), 50)  # read once only


def test_orderly_the_lock_is_checked_before_every_message(monkeypatch):
    """ConsumeMessageOrderlyService: a lock lost in the middle of a batch stops it at the next message; it is
    locked again (`lockOneMQ`) or consumed 3 s later, from the consumed offset."""
    from rocketmq_client.consumer import RECONSUME_LATER_WHEN_NOT_LOCKED_MS

    def lose_lock(kind, fields):
        if kind == "processed" and fields["offset"] == 1:
            pq.locked = False  # a renewal the broker refused, meanwhile

    instance = FakeInstance(records={mq(0): [{"offset": o} for o in range(5)]}, locks=set(), stored={mq(0): 0})
    consumer, clock = offline_consumer(monkeypatch, instance, trace=FakeTrace(lose_lock), messageListener="orderly")
    pq = add(consumer, 0)
    consumer._pull_round()
    assert [f["offset"] for f in consumer.trace.kinds("processed")] == [0, 1] and pq.offset == 2
    assert instance.lock_calls == [mq(0)] and pq.next_pull_ms == clock() + RECONSUME_LATER_WHEN_NOT_LOCKED_MS
    instance.locks = {mq(0)}
    clock.advance(RECONSUME_LATER_WHEN_NOT_LOCKED_MS)
    pq.locked, pq.last_lock_ms = True, clock() - 30_001  # locked, but not renewed for more than 30 s
    consumer._pull_round()
    assert pq.offset == 5 and pq.last_lock_ms == clock()  # locked again at once, the batch consumed


def test_orderly_a_renewal_that_fails_leaves_the_queues_as_they_were(monkeypatch):
    """RebalanceImpl.lockAll: an exception is logged and marks nothing; a refusal marks the queue unlocked."""
    instance = FakeInstance(locks=None)
    consumer, clock = offline_consumer(monkeypatch, instance, messageListener="orderly")
    pq = add(consumer, 0)
    clock.advance(20_000)
    consumer._lock_all()
    assert pq.locked and pq.last_lock_ms == clock() - 20_000
    instance.locks = set()
    consumer._lock_all()
    assert not pq.locked


def test_each_request_waits_as_long_as_rocketmq_s_and_a_pull_never_closes_its_channel():
    from rocketmq_client.instance import MQClientInstance

    class Channel:
        def __init__(self):
            self.calls, self.oneway = [], []

        def call(self, api, timeout_s=None, close_on_timeout=True, **body):
            self.calls.append((api, timeout_s, close_on_timeout))
            return {"code": "SUCCESS", "offset": 3, "records": [], "lock_ok_mq_set": [], "consumer_id_list": ["c"]}

        def send_oneway(self, api, on_answer, **body):
            self.oneway.append(api)
            on_answer({"correlation_id": 1, "error_code": 0, "code": "SUCCESS"})

    instance = MQClientInstance("c", [], FakeTrace(), timeout_ms=3000, on_notify=lambda broker: None)
    instance._channels["broker-1"] = channel = Channel()
    instance.broker_addr_table["broker-1"] = ("127.0.0.1", 1)
    instance.topic_subscribe_info["t"] = {mq(0)}
    instance.pull("g", mq(0), 0, 32, 7)
    instance.query_offset("g", mq(0))
    instance.max_offset(mq(0))
    instance.lock_batch("g", "broker-1", [mq(0)])
    instance.unlock_batch("g", "broker-1", [mq(0)])
    instance.send_heartbeat_to_all_brokers("g", {"t": 1})
    instance.find_consumer_id_list("t", "g")
    assert channel.calls == [("PULL_MESSAGE", 30.0, False), ("QUERY_CONSUMER_OFFSET", 5.0, True),
                             ("ListOffsets", 6.0, True), ("LOCK_BATCH_MQ", 1.0, True), ("UNLOCK_BATCH_MQ", 1.0, True),
                             ("HEART_BEAT", 3.0, True), ("GET_CONSUMER_LIST_BY_GROUP", 3.0, True)]
    outcomes = []
    instance.persist_offset("g", mq(0), 5, lambda outcome, error: outcomes.append(outcome))
    instance.unlock("g", mq(0), "c")  # as a queue is let go: oneway
    assert channel.oneway == ["UPDATE_CONSUMER_OFFSET", "UNLOCK_BATCH_MQ"] and outcomes == ["accepted"]


# -- a topic's partitions grow under a stable group (issue 39) ---------------------------------------------------

def _metadata(leaders: dict[int, int]) -> dict:
    """A broker's Metadata answer for topic `t`: {partition: leader} (-1: none), brokers 1-3."""
    return {"brokers": {str(b): {"host": "127.0.0.1", "port": 9000 + b} for b in (1, 2, 3)},
            "topics": {"t": {str(p): leader for p, leader in leaders.items()}}}


def test_a_route_refresh_only_replaces_the_queue_set_and_says_when_it_found_new_queues(monkeypatch):
    """`updateTopicRouteInfoFromNameServer` -> `updateTopicSubscribeInfo`: the new set is stored, nothing
    rebalances; `partitions_seen` is recorded when the route has queue ids never known before (not at the first
    route, nor for a queue back from a failover or moved to another leader)."""
    from rocketmq_client.instance import MQClientInstance

    answers = iter([_metadata({0: 1, 1: 2, 2: 3, 3: 1}),  # the first route: the topic is learnt, not its growth
                    _metadata({0: 1, 1: 2, 2: -1, 3: 1}),  # partition 2 in a failover: not a queue meanwhile
                    _metadata({0: 2, 1: 2, 2: 3, 3: 1}),  # 2 back, 0 moved to broker 2: nothing new
                    _metadata({0: 2, 1: 2, 2: 3, 3: 1, 4: 2, 5: -1}),  # grown to 6, 5 not led yet
                    _metadata({0: 2, 1: 2, 2: 3, 3: 1, 4: 2, 5: 3})])
    monkeypatch.setattr("rocketmq_client.instance.metadata_from_any", lambda *args, **kwargs: next(answers))
    trace, notified = FakeTrace(), []
    instance = MQClientInstance("127.0.0.1@c1", [("127.0.0.1", 9001)], trace, timeout_ms=3000,
                                on_notify=notified.append)
    sets = []
    for _ in range(5):
        assert instance.update_route("t")
        sets.append(sorted((b, q) for _, b, q in instance.queues("t")))
    assert sets[1] == [("broker-1", 0), ("broker-1", 3), ("broker-2", 1)]
    assert sets[4] == [("broker-1", 3), ("broker-2", 0), ("broker-2", 1), ("broker-2", 4), ("broker-3", 2),
                       ("broker-3", 5)]
    assert trace.kinds("partitions_seen") == [
        {"member": "127.0.0.1@c1", "topic": "t", "partitions": 5, "before": 4},
        {"member": "127.0.0.1@c1", "topic": "t", "partitions": 6, "before": 5}]
    assert notified == []  # a route refresh wakes no rebalance


GROWN = 2 * PARTITIONS
#: the route every 500 ms and a rebalance every 1 s, rather than 30 s and 20 s
SHORT_ROUTE = {"pollNameServerInterval": "500", "rocketmq.client.rebalance.waitInterval": "1000"}


def owned_once(group, names, partitions) -> bool:
    """Every queue of `partitions` held by exactly one of the named members."""
    return sorted(p for n in names for p in group.members[n].partitions()) == list(range(partitions))


def test_a_grown_topic_s_new_queues_are_learnt_at_a_route_refresh_and_taken_at_the_next_rebalance(cluster, group):
    """Issue 39: `t` grows from 4 to 8 partitions under a stable group. Each consumer learns the new queues at its
    next route refresh (`partitions_seen`) and takes its share of all 8 (AllocateMessageQueueAveragely) at a
    later rebalance of its own timer: no broker notifies, since nobody joined or left. Every queue ends up owned
    once, and a new queue, with no stored offset, is read from 0 (CONSUME_FROM_FIRST_OFFSET here), so every
    message, those written to the new queues included, is processed."""
    import time
    from itertools import pairwise

    from conftest import produce_values

    from lab_cluster.broker.admin import add_partitions, wait_for_metadata

    names = ["c1", "c2"]
    produce_values(cluster, 3, "old")
    c1, c2 = group.add("c1", **SHORT_ROUTE), group.add("c2", **SHORT_ROUTE)
    wait_for(lambda: owned_once(group, names, PARTITIONS), "c1 and c2 to split the 4 queues")
    grown_ns = time.monotonic_ns()  # the traces' clock
    add_partitions(cluster.zk, "t", GROWN, [1, 2, 3])
    wait_for_metadata(cluster.zk, "t", GROWN)
    produce_values(cluster, 3, "new")  # to every partition: offsets 3-5 of the old ones, 0-2 of the new
    wait_for(lambda: owned_once(group, names, GROWN), "c1 and c2 to split the 8 queues")
    for name, member in (("c1", c1), ("c2", c2)):
        seen = events(cluster, name, "partitions_seen")
        assert seen and all(e["ts_ns"] > grown_ns and e["topic"] == "t" and e["member"] == member.client_id
                            for e in seen)
        # 4 -> 8 at once, or in steps if a refresh came before every new partition had its leader
        counts = [(e["f"]["before"], e["f"]["partitions"]) for e in seen]
        assert counts[0][0] == PARTITIONS and counts[-1][1] == GROWN, counts
        assert all(b < p for b, p in counts) and all(a[1] == b[0] for a, b in pairwise(counts)), counts
        # it took new queues only after a refresh had found them (its `assigned` is traced just after its table
        # changed, which `owned_once` reads)
        def taking(name=name):
            return [e for e in events(cluster, name, "assigned")
                    if any(p >= PARTITIONS for _, p in e["f"]["partitions"])]
        wait_for(taking, f"{name}'s assignment of new queues to be traced")
        assert taking()[0]["ts_ns"] > seen[0]["ts_ns"]
    assert not [e for b in (1, 2, 3) for e in events(cluster, f"broker-{b}", "consumer_ids_changed")
                if e["ts_ns"] > grown_ns]  # nothing told the group to rebalance
    wanted = {(p, o) for p in range(GROWN) for o in range(6 if p < PARTITIONS else 3)}
    wait_for(lambda: wanted <= {(e["partition"], e["offset"]) for n in names for e in events(cluster, n, "processed")},
             "every message, old queues and new, to be processed")
