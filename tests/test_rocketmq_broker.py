"""A RocketMQ broker's consumer table, offsets and locks, without I/O, on a fake clock (RocketMQ 4.9.8's rules)."""

from __future__ import annotations

import pytest

from rocketmq_client.broker.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_MS, ConsumerManager, NoConsumer
from rocketmq_client.broker.locks import REBALANCE_LOCK_MAX_LIVE_TIME_MS, RebalanceLockManager
from rocketmq_client.broker.offsets import ConsumerOffsetManager


class Broker:
    """One broker's consumer table, the events it fired, and its clock."""

    def __init__(self):
        self.now, self.events = 0, []
        self.table = ConsumerManager(lambda event, group, channels: self.events.append((event, group, channels)),
                                     clock=lambda: self.now)

    def changes(self) -> list:
        return [channels for event, _, channels in self.events if event == "CHANGE"]


def test_a_heartbeat_is_a_change_only_for_a_new_channel_or_a_new_topic_set():
    b = Broker()
    assert b.table.register_consumer("g", "conn-1", "c1", {"t": 1})
    assert not b.table.register_consumer("g", "conn-1", "c1", {"t": 2})  # a newer sub version: no change
    assert b.table.register_consumer("g", "conn-1", "c1", {"t": 2, "u": 2})  # a topic added
    assert b.table.register_consumer("g", "conn-1", "c1", {"u": 3})  # a topic removed
    assert b.changes() == [["conn-1"]] * 3
    assert not b.table.register_consumer("g", "conn-1", "c1-renamed", {"u": 3})  # same channel, other id
    assert b.table.find_consumer_id_list("g") == ["c1-renamed"]


def test_members_with_different_topics_make_every_heartbeat_a_change():
    """The subscription table is the group's: c1 (t) and c2 (t, u) undo each other's at every heartbeat."""
    b = Broker()
    b.table.register_consumer("g", "conn-1", "c1", ["t"])
    b.table.register_consumer("g", "conn-2", "c2", ["t", "u"])
    before = len(b.changes())
    for _ in range(3):
        b.table.register_consumer("g", "conn-1", "c1", ["t"])
        b.table.register_consumer("g", "conn-2", "c2", ["t", "u"])
    assert len(b.changes()) - before == 6


def test_the_notify_flag_silences_register_and_unregister_but_not_a_closed_channel():
    b = Broker()
    b.table.register_consumer("g", "conn-1", "c1", ["t"], notify=False)
    b.table.register_consumer("g", "conn-2", "c2", ["t"], notify=False)
    b.table.unregister_consumer("g", "conn-2", notify=False)
    assert b.changes() == []
    b.table.do_channel_close_event("conn-1")
    assert b.events == [("UNREGISTER", "g", []), ("CHANGE", "g", [])]
    with pytest.raises(NoConsumer, match="no consumer for this group, g"):
        b.table.find_consumer_id_list("g")


def test_a_clean_shutdown_and_a_closed_connection_are_told_to_the_rest():
    b = Broker()
    for n in (1, 2, 3):
        b.table.register_consumer("g", f"conn-{n}", f"c{n}", ["t"])
        b.table.register_consumer("h", f"conn-{n}", f"c{n}", ["t"])  # one client, two groups, one channel
    b.events.clear()
    b.table.unregister_consumer("g", "conn-2")
    assert b.events == [("CHANGE", "g", ["conn-1", "conn-3"])]
    b.table.do_channel_close_event("conn-3")  # out of every group it was in
    assert b.events[1:] == [("CHANGE", "g", ["conn-1"]), ("CHANGE", "h", ["conn-1", "conn-2"])]
    assert b.table.find_consumer_id_list("h") == ["c1", "c2"]


def test_the_scan_drops_a_silent_member_after_120_s_and_tells_nobody():
    b = Broker()
    b.table.register_consumer("g", "conn-1", "c1", ["t"])
    b.table.register_consumer("g", "conn-2", "c2", ["t"])
    b.events.clear()
    b.now = CHANNEL_EXPIRED_TIMEOUT_MS
    b.table.register_consumer("g", "conn-1", "c1", ["t"])  # c1 heartbeats; c2 is frozen
    assert b.table.scan_not_active_channel() == []  # exactly 120 s: not yet
    b.now += 1
    assert b.table.scan_not_active_channel() == ["conn-2"]
    b.table.do_channel_close_event("conn-2")  # the scan closes the channel: the close finds nothing to remove
    assert b.events == [] and b.table.find_consumer_id_list("g") == ["c1"]
    b.now += CHANNEL_EXPIRED_TIMEOUT_MS + 1
    assert b.table.scan_not_active_channel() == ["conn-1"] and b.table.groups == {}  # emptied silently


def test_two_brokers_that_heard_different_heartbeats_answer_different_id_lists():
    """The root of RocketMQ's split brain: a client allocates from one broker's list, picked at random."""
    a, b = Broker(), Broker()
    for broker in (a, b):
        broker.table.register_consumer("g", "conn-1", "c1", ["t"])
        broker.table.register_consumer("g", "conn-2", "c2", ["t"])
    a.table.register_consumer("g", "conn-3", "c3", ["t"])  # c3's heartbeat to b was lost
    assert a.table.find_consumer_id_list("g") == ["c1", "c2", "c3"]
    assert b.table.find_consumer_id_list("g") == ["c1", "c2"]


def test_offsets_are_taken_from_anyone_even_backwards():
    offsets = ConsumerOffsetManager()
    offsets.commit_offset("g", "t", 0, 100)
    offsets.commit_offset("g", "t", 0, 40)  # a zombie's older position
    offsets.commit_offset("h", "t", 0, 7)
    assert (offsets.query_offset("g", "t", 0), offsets.query_offset("h", "t", 0)) == (40, 7)
    assert offsets.query_offset("g", "u", 0) is None and list(offsets.offsets) == ["t@g", "t@h"]


def test_a_lock_is_renewed_by_its_holder_and_taken_over_only_once_expired():
    now = [0]
    locks = RebalanceLockManager(clock=lambda: now[0])
    assert locks.try_lock_batch("g", ["q0"], "c1") == {"q0"}
    now[0] = 50_000
    assert locks.try_lock_batch("g", ["q0"], "c1") == {"q0"}  # renewed at 50 s
    now[0] = 50_000 + REBALANCE_LOCK_MAX_LIVE_TIME_MS
    assert locks.try_lock_batch("g", ["q0"], "c2") == set()  # exactly 60 s since the renewal: still c1's
    assert locks.try_lock_batch("h", ["q0"], "c2") == {"q0"}  # another group's lock of the same queue
    now[0] += 1
    assert locks.try_lock_batch("g", ["q0"], "c2") == {"q0"} and locks.holder("g", "q0") == "c2"
    locks.unlock_batch("g", ["q0"], "c2")
    assert locks.holder("g", "q0") is None and locks.try_lock_batch("g", ["q0"], "c1") == {"q0"}
