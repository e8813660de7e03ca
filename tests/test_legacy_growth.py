"""A subscribed topic's partitions grow under a stable ZooKeeper-era group (issue 39): Kafka 0.8.2.2's
`ZKTopicPartitionChangeListener` (`legacy_zk/topic_listener.py`) hears it, records `partitions_seen`, and the
rebalance it triggers reads the topic again and gives the new partitions owners.

First without a server (zkclient's delivery to the listener, on a fake ZooKeeper), then against real brokers."""

from __future__ import annotations

import json
from types import SimpleNamespace

from conftest import PARTITIONS, produce_values, wait_for
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from lab_cluster.broker import zk_layout as L
from lab_cluster.broker.admin import add_partitions, wait_for_metadata
from lab_cluster.events import KINDS
from lab_cluster.trace import TraceRecorder
from legacy_zk import znodes
from legacy_zk.config import ConsumerConfig
from legacy_zk.consumer import ConsumerState, LegacyConsumer
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


# -- real brokers and ZooKeeper ------------------------------------------------------------------------------------
GROUP = "g"
GROWN = 6
FAST = {"zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 200, "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": 500}


class Group:
    def __init__(self, cluster):
        self.cluster = cluster
        self.consumers: list[LegacyConsumer] = []
        self.traces: list[TraceRecorder] = []

    def add(self, name: str) -> LegacyConsumer:
        props = {"group.id": GROUP, "zookeeper.connect": self.cluster.connect, **FAST}
        trace = TraceRecorder(self.cluster.dir, trial="t", design="zookeeper", actor=name)
        self.traces.append(trace)
        self.consumers.append(LegacyConsumer(ConsumerConfig.from_dict(props), ["t"], trace).start())
        return self.consumers[-1]

    def settle(self, partitions: int, timeout_s: float = 60):
        """Every consumer CONSUMING with no rebalance pending, their registries own each of `partitions` once, and
        the owner znodes say the same; then {consumer id: its partitions}."""
        every = [("t", p) for p in range(partitions)]

        def settled():
            believed = {key: thread for c in self.consumers for key, thread in c.assignment().items()}
            owned = sorted(key for c in self.consumers for key in c.assignment())
            return (all(c.state is ConsumerState.CONSUMING and not c._triggered.is_set() for c in self.consumers)
                    and owned == every and self._owner_znodes(partitions) == believed)

        wait_for(settled, f"the group to own partitions 0-{partitions - 1}, each once", timeout_s)
        return {c.consumer_id: sorted(p for _, p in c.assignment()) for c in self.consumers}

    def _owner_znodes(self, partitions: int) -> dict:
        out = {}
        for p in range(partitions):
            try:
                out[("t", p)] = self.cluster.zk.get(znodes.owner_path(GROUP, "t", p))[0].decode()
            except NoNodeError:
                pass
        return out

    def events(self, index: int, kind: str) -> list[dict]:
        self.traces[index].flush()
        events = [json.loads(line) for line in self.traces[index].path.read_text().splitlines()]
        return [{**e, **json.loads(e.get("fields") or "{}")} for e in events if e["kind"] == kind]

    def stop_all(self):
        for c in self.consumers:
            c.stop()
        for t in self.traces:
            t.close()


def test_partitions_added_under_a_stable_group_are_heard_by_every_member_and_all_get_owners(cluster):
    group = Group(cluster)
    try:
        consumers = [group.add(f"c{i}") for i in range(2)]
        group.settle(PARTITIONS)
        fired_before = [len([e for e in group.events(i, "zk_watch_fired") if e["path"] == TOPIC]) for i in range(2)]
        rebalances = [c.rebalances for c in consumers]

        add_partitions(cluster.zk, "t", GROWN, [1, 2, 3])  # AdminUtils.addPartitions: the topic's znode rewritten
        shares = group.settle(GROWN)

        ordered = sorted(c.consumer_id for c in consumers)
        assert [shares[cid] for cid in ordered] == [[0, 1, 2], [3, 4, 5]]  # 0.8's range: 6 over 2 sorted threads
        for i, consumer in enumerate(consumers):
            (seen,) = group.events(i, "partitions_seen")  # once per member, by its topic listener
            assert (seen["member"], seen["topic"], seen["before"], seen["partitions"], seen["via"]) == \
                (consumer.consumer_id, "t", PARTITIONS, GROWN, "listener")
            fired = [e for e in group.events(i, "zk_watch_fired") if e["path"] == TOPIC]
            assert len(fired) == fired_before[i] + 1 and fired[-1]["event_type"] == "CHANGED"  # one notification
            assert consumer.rebalances > rebalances[i] and consumer.topic_listener.known("t") == GROWN
            views = group.events(i, "view")
            assert views[-1]["partitions"] == {"t": GROWN}  # the rebalance read the topic's partitions again

        # the new partitions are consumed: their owners' fetchers find the new leaders
        wait_for_metadata(cluster.zk, "t", GROWN)
        written = produce_values(cluster, 2, "grown")
        assert sorted(written) == list(range(GROWN))

        def processed():
            return {e["partition"] for i in range(2) for e in group.events(i, "processed")}

        wait_for(lambda: processed() >= set(range(PARTITIONS, GROWN)), "the new partitions' records to be processed")
    finally:
        group.stop_all()
