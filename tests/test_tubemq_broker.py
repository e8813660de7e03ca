"""A TubeMQ broker's partition registrations, without I/O (TubeMQ's BrokerServiceServer rules), on a fake clock."""

from __future__ import annotations

from lab_cluster.clock import FakeClock
from tubemq_client.broker.registrations import (
    CONSUMER_REG_TIMEOUT_MS,
    DUPLICATE_PARTITION,
    HB_NO_NODE,
    PARTITION_OCCUPIED,
    SUCCESS,
    UNAUTHORIZED,
    Registrations,
)


def table():
    clock, released = FakeClock(start_ms=0), []
    regs = Registrations(clock=clock, on_release=lambda *args: released.append(args))
    return clock, regs, released


def test_only_the_holder_is_served_and_each_refusal_has_its_code():
    _, regs, released = table()
    assert regs.register("g", "t", 0, "a") == SUCCESS
    assert regs.register("g", "t", 0, "a") == SUCCESS  # again, by its holder
    assert regs.register("g", "t", 0, "b") == PARTITION_OCCUPIED
    assert (regs.fetch("g", "t", 0, "b"), regs.commit("g", "t", 0, "b")) == (DUPLICATE_PARTITION, UNAUTHORIZED)
    assert regs.unregister("g", "t", 0, "b") == DUPLICATE_PARTITION
    assert (regs.fetch("g", "t", 1, "b"), regs.commit("g", "t", 1, "b")) == (HB_NO_NODE, UNAUTHORIZED)
    assert regs.unregister("g", "t", 1, "b") == HB_NO_NODE
    assert regs.register("h", "t", 0, "b") == SUCCESS  # another group's registration of the same partition
    assert regs.unregister("g", "t", 0, "a", consumed=True) == SUCCESS and released == [("g", "t", 0, True)]
    assert regs.holder("g", "t", 0) is None


def test_a_heartbeats_refusals_come_back_per_partition():
    _, regs, _ = table()
    regs.register("g", "t", 0, "a")
    regs.register("g", "t", 1, "b")
    assert regs.heartbeat("g", [("t", 0), ("t", 1), ("t", 2)], "a") == {("t", 1): DUPLICATE_PARTITION,
                                                                        ("t", 2): HB_NO_NODE}


def test_a_silent_holder_is_released_after_30_s_and_its_batch_rolled_back():
    clock, regs, released = table()
    regs.register("g", "t", 0, "a")
    regs.register("g", "t", 1, "a")
    clock.advance(20_000)
    assert regs.fetch("g", "t", 1, "a") == SUCCESS  # a fetch counts as a heartbeat
    clock.advance(CONSUMER_REG_TIMEOUT_MS - 20_000)
    assert regs.expire() == []  # exactly 30 s since partition 0's registration: not yet
    clock.advance(1)
    assert regs.expire() == [("g", "t", 0)] and released == [("g", "t", 0, False)]
    assert regs.holder("g", "t", 1) == "a"


def test_a_stale_holder_is_removed_by_the_next_register_which_is_still_refused():
    clock, regs, released = table()
    regs.register("g", "t", 0, "a")
    clock.advance(CONSUMER_REG_TIMEOUT_MS + 1)
    assert regs.register("g", "t", 0, "b") == PARTITION_OCCUPIED and regs.holder("g", "t", 0) is None
    assert released == [("g", "t", 0, False)]
    assert regs.register("g", "t", 0, "b") == SUCCESS
    assert regs.fetch("g", "t", 0, "a") == DUPLICATE_PARTITION  # the old holder wakes up: fenced


# -- the broker's offsets (DefaultOffsetManager, auto-commit mode) ----------------------------------------
def test_a_group_without_a_stored_offset_starts_at_the_start_or_the_end_and_a_requested_one_overwrites():
    from tubemq_client.broker.offsets import READ_FROM_MAX, READ_NORMAL, OffsetManager

    o = OffsetManager()
    assert o.load_offset("g", "t", 0, READ_NORMAL, -1, min_offset=0, max_offset=50) == 0
    assert o.load_offset("g", "t", 1, READ_FROM_MAX, -1, min_offset=0, max_offset=50) == 50
    assert o.load_offset("g", "t", 0, READ_FROM_MAX, -1, min_offset=0, max_offset=50) == 0  # stored: kept
    assert o.load_offset("g", "t", 0, READ_NORMAL, 70, min_offset=0, max_offset=50) == 50  # clamped to the log


def test_a_released_registration_rolls_its_batch_back_and_the_next_holder_reads_it_again():
    from tubemq_client.broker.offsets import READ_NORMAL, OffsetManager

    clock, o = FakeClock(start_ms=0), OffsetManager()
    regs = Registrations(clock=clock, on_release=lambda g, t, p, consumed: o.commit(g, t, p, consumed=consumed))
    assert regs.register("g", "t", 0, "a") == SUCCESS
    o.load_offset("g", "t", 0, READ_NORMAL, -1, min_offset=0, max_offset=100)
    assert o.fetch_offset("g", "t", 0, last_pack_consumed=False) == 0
    o.book("g", "t", 0, 32)  # a took 0..31 and went silent before confirming
    clock.advance(CONSUMER_REG_TIMEOUT_MS + 1)
    assert regs.expire() == [("g", "t", 0)]
    assert regs.register("g", "t", 0, "b") == SUCCESS
    assert o.fetch_offset("g", "t", 0, last_pack_consumed=False) == 0  # b reads 0..31 again


# -- the master's groups ------------------------------------------------------------------------------
def test_the_first_consumer_fixes_the_groups_source_count_and_node_ids_are_unique():
    from tubemq_client.codes import (
        BAD_REQUEST,
        CLIENT_DUPLICATE_INDEXID,
        CLIENT_INCONSISTENT_SOURCECOUNT,
        CLIENT_INCONSISTENT_TOPICSET,
    )
    from tubemq_client.master.groups import CONSUMER_HEARTBEAT_TIMEOUT_MS, GroupTable

    clock = FakeClock(start_ms=0)
    groups = GroupTable(clock=clock)
    assert groups.add_consumer("g", "n0", ["t"], source_count=2, node_id=0) == SUCCESS
    assert groups.add_consumer("g", "n1", ["t"], source_count=3, node_id=1) == CLIENT_INCONSISTENT_SOURCECOUNT
    assert groups.add_consumer("g", "n1", ["t", "u"], source_count=2, node_id=1) == CLIENT_INCONSISTENT_TOPICSET
    assert groups.add_consumer("g", "n1", ["t"], source_count=2, node_id=0) == CLIENT_DUPLICATE_INDEXID
    assert groups.add_consumer("g", "n1", ["t"], source_count=2, node_id=2) == BAD_REQUEST
    assert groups.add_consumer("g", "n1", ["t"], source_count=2, node_id=1) == SUCCESS
    assert groups.add_consumer("g", "n0", ["t"], source_count=2, node_id=0) == SUCCESS  # itself again: fine
    assert groups.heartbeat("g", "ghost") == HB_NO_NODE
    clock.advance(CONSUMER_HEARTBEAT_TIMEOUT_MS // 2)
    assert groups.heartbeat("g", "n1", ["1:t:1"]) == SUCCESS
    clock.advance(CONSUMER_HEARTBEAT_TIMEOUT_MS // 2 + 1)
    assert groups.expire() == ["g#n0"]  # n1 heartbeat half-way
    groups.remove("g", "n1")
    assert groups.add_consumer("g", "m0", ["t"], source_count=5, node_id=4) == SUCCESS  # empty: a new count
