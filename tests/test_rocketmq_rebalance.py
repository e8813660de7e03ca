"""One RocketMQ consumer's rebalance, without I/O (RocketMQ 4.9.8's RebalanceImpl rules), on a fake clock."""

from __future__ import annotations

from lab_cluster.assignment.rocketmq import averagely_by_circle
from lab_cluster.clock import FakeClock
from rocketmq_client.rebalance import (
    CONSUME_FROM_FIRST_OFFSET,
    PULL_MAX_IDLE_TIME_MS,
    MemoryBroker,
    OffsetNotFound,
    RebalanceImpl,
)

QUEUES = {("t", "broker-a", q) for q in range(6)}


def mq(q: int, topic: str = "t"):
    return (topic, "broker-a", q)


def test_a_failed_lookup_keeps_what_the_consumer_has():
    c1 = RebalanceImpl("g", "c1", MemoryBroker())
    c1.rebalance_by_topic("t", QUEUES, ["c1"])
    held = dict(c1.table)
    assert c1.rebalance_by_topic("t", QUEUES, None).kept == "get consumer id list failed"
    assert c1.rebalance_by_topic("t", None, ["c1", "c2"]).kept == "topic not exist"
    assert c1.table == held  # nothing revoked


def test_an_id_list_without_me_drops_everything():
    """AbstractAllocateMessageQueueStrategy.check: '[BUG] ... not in cidAll': an empty share."""
    c1 = RebalanceImpl("g", "c1", MemoryBroker())
    c1.rebalance_by_topic("t", QUEUES, ["c1"])
    outcome = c1.rebalance_by_topic("t", QUEUES, ["c2", "c3"])
    assert outcome.share == [] and len(outcome.removed) == 6 and c1.table == {}


def test_the_start_offset_is_the_stored_one_else_the_end_else_the_start_if_asked():
    broker = MemoryBroker(max_offsets={mq(q): 50 for q in range(6)})
    broker.offsets[("g", mq(0))] = 7
    c1 = RebalanceImpl("g", "c1", broker)
    c1.rebalance_by_topic("t", {mq(0), mq(1)}, ["c1"])
    assert (c1.table[mq(0)].offset, c1.table[mq(1)].offset) == (7, 50)  # CONSUME_FROM_LAST_OFFSET: the end
    first = RebalanceImpl("h", "c1", broker, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
    first.rebalance_by_topic("t", {mq(1)}, ["c1"])
    retry = RebalanceImpl("g", "c1", broker)
    retry.rebalance_by_topic("%RETRY%g", {mq(0, "%RETRY%g")}, ["c1"])
    assert first.table[mq(1)].offset == 0 and retry.table[mq(0, "%RETRY%g")].offset == 0


def test_a_queue_whose_offset_cannot_be_read_is_skipped_this_round_and_added_at_the_next():
    class Flaky(MemoryBroker):
        down = True

        def query_offset(self, group, queue):
            if self.down:
                raise ConnectionRefusedError("broker down")
            return super().query_offset(group, queue)

    broker = Flaky(max_offsets={mq(0): 3})
    c1 = RebalanceImpl("g", "c1", broker)
    outcome = c1.rebalance_by_topic("t", {mq(0)}, ["c1"])
    assert outcome.skipped == [mq(0)] and not outcome.changed and c1.table == {}
    broker.down = False
    assert c1.rebalance_by_topic("t", {mq(0)}, ["c1"]).added == [mq(0)]


def test_a_removed_queue_persists_its_offset_and_anyone_may_have_taken_it_meanwhile():
    broker = MemoryBroker()
    c1, c2 = RebalanceImpl("g", "c1", broker), RebalanceImpl("g", "c2", broker)
    c1.rebalance_by_topic("t", QUEUES, ["c1"])
    c1.table[mq(5)].offset, c1.table[mq(5)].in_offset_table = 40, True  # as after its first pull
    # c2 joined; c2 read [c1, c2] and takes 3-5 before c1 (still on [c1]) rebalances: queue 5 is both's
    c2.rebalance_by_topic("t", QUEUES, ["c1", "c2"])
    assert set(c1.table) & set(c2.table) == {mq(3), mq(4), mq(5)}
    c1.rebalance_by_topic("t", QUEUES, ["c1", "c2"])
    assert broker.offsets[("g", mq(5))] == 40  # persisted on removal (oneway, accepted from anyone)
    assert ("g", mq(4)) not in broker.offsets  # never pulled, not in the offset table: nothing to persist
    assert not set(c1.table) & set(c2.table)


def test_orderly_consumers_lock_before_adding_and_keep_a_queue_being_consumed():
    broker = MemoryBroker()
    c1 = RebalanceImpl("g", "c1", broker, orderly=True, consume_lock_wait_ms=10)
    c2 = RebalanceImpl("g", "c2", broker, orderly=True)
    c1.rebalance_by_topic("t", QUEUES, ["c1"])
    outcome = c2.rebalance_by_topic("t", QUEUES, ["c1", "c2"])  # c1 still holds every lock
    assert outcome.added == [] and outcome.skipped == [mq(3), mq(4), mq(5)]
    c1.table[mq(4)].consume_lock.acquire()  # a message is being consumed (past the 1 s wait)
    outcome = c1.rebalance_by_topic("t", QUEUES, ["c1", "c2"])
    assert outcome.removed == [mq(3), mq(5)] and c1.table[mq(4)].dropped  # kept, dropped, until later
    assert c2.rebalance_by_topic("t", QUEUES, ["c1", "c2"]).added == [mq(3), mq(5)]
    c1.table[mq(4)].consume_lock.release()
    c1.rebalance_by_topic("t", QUEUES, ["c1", "c2"])
    assert c2.rebalance_by_topic("t", QUEUES, ["c1", "c2"]).added == [mq(4)]


def test_a_queue_nobody_pulled_for_120_s_is_dropped_and_made_anew_in_the_same_rebalance():
    clock = FakeClock(start_ms=0)
    broker = MemoryBroker()
    c1 = RebalanceImpl("g", "c1", broker, clock=clock)
    c1.rebalance_by_topic("t", {mq(0)}, ["c1"])
    c1.table[mq(0)].offset, c1.table[mq(0)].in_offset_table = 9, True
    clock.advance(PULL_MAX_IDLE_TIME_MS)
    assert not c1.rebalance_by_topic("t", {mq(0)}, ["c1"]).changed  # exactly 120 s: not expired
    clock.advance(1)
    stale = c1.table[mq(0)]
    outcome = c1.rebalance_by_topic("t", {mq(0)}, ["c1"])  # step 1 drops it, step 2 finds it missing
    assert (outcome.removed, outcome.added) == ([mq(0)], [mq(0)]) and stale.dropped
    assert c1.table[mq(0)] is not stale and c1.table[mq(0)].offset == 9  # from the offset it persisted


def test_the_strategy_is_a_constructor_argument_and_the_view_is_the_sorted_id_list():
    c2 = RebalanceImpl("g", "c2", MemoryBroker(), strategy=averagely_by_circle)
    outcome = c2.rebalance_by_topic("t", QUEUES, ["c3", "c1", "c2"])
    assert outcome.view == ["c1", "c2", "c3"] and outcome.share == [mq(1), mq(4)]


def test_offset_not_found_is_what_a_memory_broker_raises_for_a_new_group():
    try:
        MemoryBroker().query_offset("g", mq(0))
    except OffsetNotFound:
        return
    raise AssertionError("a queue without an offset must raise OffsetNotFound")


def test_only_a_queue_the_offset_table_holds_has_its_offset_persisted():
    """RemoteBrokerOffsetStore.persist: a stored offset read from the broker enters the offset table; a computed
    start (no stored offset) enters it only with the queue's first pull result (the consumer's)."""
    broker = MemoryBroker(max_offsets={mq(0): 50, mq(1): 50})
    broker.offsets[("g", mq(0))] = 7
    c1 = RebalanceImpl("g", "c1", broker)
    c1.rebalance_by_topic("t", {mq(0), mq(1)}, ["c1"])
    assert c1.table[mq(0)].in_offset_table and not c1.table[mq(1)].in_offset_table
    c1.rebalance_by_topic("t", {mq(0), mq(1)}, ["c2"])
    assert broker.offsets == {("g", mq(0)): 7}


def test_a_grown_queue_set_is_allocated_whole_and_a_new_queue_starts_where_consume_from_where_says():
    """Issue 39: 4 queues on brokers a and b grow to 8 (2 more on each). The next rebalance allocates the sorted 8
    (AllocateMessageQueueAveragely, which may move old queues too); a new queue has no stored offset, so it starts
    at its end (CONSUME_FROM_LAST_OFFSET: what was written to it before is skipped; RocketMQ's broker would answer
    0 for such a young queue, a departure `compute_pull_from_where` states) or at 0 (FIRST)."""
    def q(broker, i):
        return ("t", f"broker-{broker}", i)

    old = {q("a", 0), q("b", 1), q("a", 2), q("b", 3)}
    grown = old | {q("a", 4), q("b", 5), q("a", 6), q("b", 7)}
    broker = MemoryBroker(max_offsets={mq: 10 for mq in grown})
    for mq_ in old:
        broker.offsets[("g", mq_)] = 5
    c1, c2 = RebalanceImpl("g", "c1", broker), RebalanceImpl("g", "c2", broker)
    assert [m[2] for m in c1.rebalance_by_topic("t", old, ["c1", "c2"]).share] == [0, 2]
    outcome = c1.rebalance_by_topic("t", grown, ["c1", "c2"])
    assert [m[2] for m in outcome.share] == [0, 2, 4, 6] and [m[2] for m in outcome.added] == [4, 6]
    assert [m[2] for m in c2.rebalance_by_topic("t", grown, ["c1", "c2"]).share] == [1, 3, 5, 7]
    assert {m[2]: pq.offset for m, pq in c1.table.items()} == {0: 5, 2: 5, 4: 10, 6: 10}
    first = RebalanceImpl("g", "c1", broker, consume_from_where=CONSUME_FROM_FIRST_OFFSET)
    first.rebalance_by_topic("t", grown, ["c1", "c2"])
    assert {m[2]: pq.offset for m, pq in first.table.items()} == {0: 5, 2: 5, 4: 0, 6: 0}
