"""A subscribed topic's partitions grow under a stable ZooKeeper-era group (issue 39): Kafka 0.8.2.2's
`ZKTopicPartitionChangeListener` (`legacy_zk/topic_listener.py`) hears it, records `partitions_seen`, and the
rebalance it triggers reads the topic again and gives the new partitions owners.

Here without a server: zkclient's delivery to the listener, on a fake ZooKeeper. The same growth against real
brokers is `test_legacy.py`'s last test, on its group of consumers."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import wait_for
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from lab_cluster.broker import zk_layout as L
from lab_cluster.events import KINDS
from legacy_zk.topic_listener import TopicPartitionChangeListener
from legacy_zk.watches import EventThread, GroupWatches

TOPIC = L.topic_path("t")


# -- no server: zkclient's data events reach the topic listener ----------------------------------------------------
class Trace:
    """Collects (kind, fields); a kind the lab does not know fails, as `TraceRecorder.record` would."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []

    def record(self, kind, **fields):
        assert kind in KINDS, kind
        self.events.append((kind, fields))

    def of(self, kind):
        return [fields for k, fields in self.events if k == kind]


class FakeZk:
    """The topic's znode, as `TracedZk` would read it: (data, mzxid), or absent; every read is counted."""

    def __init__(self, partitions: int, mzxid: int):
        self.node: tuple[bytes, int] | None = None
        self.reads: list[tuple[str, str]] = []
        self.set(partitions, mzxid)

    def set(self, partitions: int, mzxid: int):
        self.node = (L.topic_assignment({p: [1] for p in range(partitions)}), mzxid)

    def exists(self, path, watch=None, **why):
        self.reads.append(("exists", path))
        return None if self.node is None else SimpleNamespace(mzxid=self.node[1])

    def get(self, path, watch=None, **why):
        self.reads.append(("getData", path))
        if self.node is None:
            raise NoNodeError()
        return self.node[0], SimpleNamespace(mzxid=self.node[1])


def _watches(zk, trace, triggered):
    events = EventThread("test", trace).start()
    watches = GroupWatches(zk, events, trace, lambda: triggered.append("child"))
    listener = TopicPartitionChangeListener("g_c1", trace, lambda: triggered.append("topic"))
    watches.subscribe_data(TOPIC, listener)
    return watches, events, listener


def test_a_grown_topic_is_handed_to_its_listener_after_exists_and_getData_and_recorded_once():
    zk, trace, triggered = FakeZk(4, mzxid=10), Trace(), []
    watches, events, listener = _watches(zk, trace, triggered)
    listener.rebalance_read({"t": [0, 1, 2, 3]}, {"t": 10})  # the first rebalance read 4 partitions
    zk.set(6, mzxid=20)
    zk.reads.clear()
    watches.fired(WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, TOPIC))
    events.stop()  # the event thread runs what was queued, then ends
    assert zk.reads == [("exists", TOPIC), ("getData", TOPIC)]  # zkclient re-arms and reads, then the listener
    assert trace.of("partitions_seen") == [{"member": "g_c1", "topic": "t", "partitions": 6, "before": 4,
                                            "via": "listener"}]
    assert triggered == ["topic"]  # rebalanceEventTriggered: the flag, not the group's child listener
    listener.rebalance_read({"t": list(range(6))}, {"t": 20})  # the rebalance that follows reads the same version
    listener.rebalance_read({"t": [0, 1, 2, 3]}, {"t": 10})    # a slower attempt's older read
    assert len(trace.of("partitions_seen")) == 1 and listener.known("t") == 6


def test_a_growth_read_first_by_a_rebalance_is_recorded_there_and_not_again_by_the_listener():
    zk, trace, triggered = FakeZk(6, mzxid=20), Trace(), []
    watches, events, listener = _watches(zk, trace, triggered)
    listener.rebalance_read({"t": [0, 1, 2, 3]}, {"t": 10})
    listener.rebalance_read({"t": list(range(6))}, {"t": 20})  # an attempt read the grown znode first
    watches.fired(WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, TOPIC))  # the event, delivered late
    events.stop()
    assert [(f["before"], f["partitions"], f["via"]) for f in trace.of("partitions_seen")] == [(4, 6, "rebalance")]
    assert triggered == ["topic"]  # the listener raises the flag all the same, as 0.8's does


def test_a_deleted_topic_is_only_a_warning_and_triggers_no_rebalance():
    """0.8.2.2's `handleDataDeleted`: warn("... gets deleted, which should not happen at this time"), nothing more."""
    zk, trace, triggered = FakeZk(4, mzxid=10), Trace(), []
    watches, events, listener = _watches(zk, trace, triggered)
    zk.node = None
    watches.fired(WatchedEvent(EventType.DELETED, KeeperState.CONNECTED, TOPIC))
    events.stop()
    assert triggered == [] and trace.of("partitions_seen") == []
    assert [f["event_type"] for f in trace.of("zk_watch_fired")] == ["DELETED"]  # the firing itself is recorded


def test_a_growth_missed_while_disconnected_reaches_the_listener_on_reconnecting_and_on_a_new_session():
    zk, trace, triggered = FakeZk(4, mzxid=10), Trace(), []
    watches, events, listener = _watches(zk, trace, triggered)
    listener.rebalance_read({"t": [0, 1, 2, 3]}, {"t": 10})
    zk.set(5, mzxid=20)
    watches.rewatch()  # the same session (Java's SetWatches): the moved data path goes to its listener
    wait_for(lambda: trace.of("partitions_seen"), "the rewatch to reach the listener", timeout_s=10)
    zk.set(7, mzxid=30)
    watches.fire_all()  # a new session: zkclient's fireAllEvents
    events.stop()
    (rewatched,) = trace.of("zk_rewatched")
    assert rewatched["moved"] == [TOPIC]
    assert [(f["before"], f["partitions"]) for f in trace.of("partitions_seen")] == [(4, 5), (5, 7)]
    assert triggered == ["topic", "topic"]
