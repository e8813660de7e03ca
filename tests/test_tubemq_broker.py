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
