"""Issue 39, a topic's partitions grow under a stable group: how each coordinator-era design learns of it.

- classic (`modern_coord/consumer.py`): every member refreshes its metadata every `metadata.max.age.ms`; the
  leader, whose refresh no longer matches the snapshot it assigned from, rejoins, and assigns the new partitions;
- KIP-848 (`modern_coord/coordinator/consumer_protocol.py`): the coordinator notices the new count at the next
  heartbeat, bumps the group epoch, and hands the new partitions out in heartbeat answers.

First without I/O (a fake clock, a fake Metadata answer, the coordinator alone), then on real brokers, the topic
grown as `kafka-topics.sh --alter --partitions` does (`lab_cluster.broker.admin.add_partitions`).
"""

from __future__ import annotations

import json

import pytest
from conftest import PARTITIONS, produce_values, wait_for
from test_modern import Group as ClassicGroup
from test_modern import _events, describe
from test_modern_kip848 import Group as Kip848Group

from lab_cluster.broker.admin import add_partitions, wait_for_metadata
from lab_cluster.errors import LabError
from lab_cluster.trace import TraceRecorder
from modern_coord.config import ConsumerConfig
from modern_coord.consumer import ModernConsumer
from modern_coord.coordinator.coordinator import CoordinatorConfig, GroupCoordinator, MemoryStore
from modern_coord.coordinator.scheduler import FakeClock, Scheduler
from modern_coord.member import Generation
from modern_coord.membership import Kip848MemberState

GROWN = PARTITIONS + 2


# -- the classic leader's watch, on a fake clock --------------------------------------------------------------
class Brokers:
    """What a Metadata request answers: topic `t` with `counts["t"]` partitions; None while `down`."""

    def __init__(self, **counts):
        self.counts, self.down, self.asked = dict(counts), False, 0

    def __call__(self):
        self.asked += 1
        if self.down:
            return None
        return {"brokers": {"1": {"host": "127.0.0.1", "port": 9}},
                "topics": {t: {str(p): 1 for p in range(n)} for t, n in self.counts.items()}}


def _consumer(tmp_path, brokers: Brokers, **props) -> ModernConsumer:
    """A consumer never started: its metadata and rebalance hooks driven by hand, its Metadata answered by
    `brokers`."""
    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9", "client.id": "c",
                                       "metadata.max.age.ms": 1000, "retry.backoff.ms": 100,
                                       "enable.auto.commit": False, **props})
    consumer = ModernConsumer(config, ["t"], TraceRecorder(tmp_path, trial="t", design="classic", actor="c"),
                              name="c")
    consumer.fetcher._ask_metadata = brokers
    return consumer


MEMBERS = [{"member_id": "c-1", "metadata": {"topics": ["t"]}}, {"member_id": "d-1", "metadata": {"topics": ["t"]}}]


def _join(consumer: ModernConsumer, generation: int, *, leader: bool) -> list[tuple[str, int]]:
    """One completed join, as `GroupMember._join_and_sync` does it: the leader assigns; every partition the
    leader gave out is returned."""
    consumer._prepare_join()
    consumer.member_id = "c-1"
    consumer.generation = Generation(generation, "c-1", "range")
    given = []
    if leader:
        assignments = consumer._assign_as_leader("range", MEMBERS)
        given = [tuple(tp) for a in assignments for tp in a["assignment"]["partitions"]]
        mine = [tuple(tp) for a in assignments if a["member_id"] == "c-1" for tp in a["assignment"]["partitions"]]
    else:
        mine = [("t", 0)]
    consumer._rejoin_reason = None  # SyncGroup succeeded
    consumer._on_join_complete(mine)
    return given


def _seen(consumer: ModernConsumer) -> list[dict]:
    consumer.trace.flush()
    return [{**json.loads(e["fields"]), "member": e["member"], "topic": e["topic"]}
            for e in _events(consumer.trace.path.parents[1], "c") if e["kind"] == "partitions_seen"]


def test_the_leader_rejoins_at_the_first_refresh_after_the_topic_grew_and_assigns_every_partition(tmp_path):
    brokers = Brokers(t=4)
    c = _consumer(tmp_path, brokers)
    c._maybe_refresh_metadata(0)  # nothing known yet: a refresh at once
    assert brokers.asked == 1 and c._metadata_snapshot == {"t": 4}
    assert sorted(_join(c, 1, leader=True)) == [("t", p) for p in range(4)]
    assert c._assignment_snapshot == {"t": 4} and not c._rejoin_needed_or_pending()

    brokers.counts["t"] = 6  # the topic grows; the leader's metadata is 1000 ms old at 1000
    for now in (500, 999):
        c._maybe_refresh_metadata(now)
        assert not c._rejoin_needed_or_pending()
    assert brokers.asked == 1 and _seen(c) == []
    c._maybe_refresh_metadata(1000)
    assert brokers.asked == 2 and c._rejoin_needed_or_pending()
    assert c._rejoin_reason == ("cached metadata has changed from {'t': 4} at the beginning of the rebalance to "
                                "{'t': 6}")
    assert _seen(c) == [{"member": "c-1", "topic": "t", "partitions": 6, "before": 4, "leader": True}]

    assert sorted(_join(c, 2, leader=True)) == [("t", p) for p in range(6)]  # the new count, at once
    assert c._assignment_snapshot == {"t": 6} and not c._rejoin_needed_or_pending()
    c._maybe_refresh_metadata(2000)
    assert len(_seen(c)) == 1 and not c._rejoin_needed_or_pending()


def test_a_follower_sees_the_new_partitions_but_does_not_rejoin(tmp_path):
    brokers = Brokers(t=4)
    c = _consumer(tmp_path, brokers)
    c._maybe_refresh_metadata(0)
    _join(c, 1, leader=True)
    _join(c, 2, leader=False)  # another member leads generation 2: the snapshot is dropped (onJoinComplete)
    assert c._assignment_snapshot is None
    brokers.counts["t"] = 6
    c._maybe_refresh_metadata(1000)
    assert _seen(c) == [{"member": "c-1", "topic": "t", "partitions": 6, "before": 4, "leader": False}]
    assert not c._rejoin_needed_or_pending()


def test_a_refresh_the_fetcher_made_for_itself_counts_and_restarts_the_age(tmp_path):
    """Any successful refresh (here the fetcher's, for a leader it did not know) is a new metadata version the
    snapshot is taken from, and the next periodic one is due `metadata.max.age.ms` after it."""
    brokers = Brokers(t=4)
    c = _consumer(tmp_path, brokers)
    c._maybe_refresh_metadata(0)
    _join(c, 1, leader=True)
    brokers.counts["t"] = 6
    c.fetcher.refresh_metadata(now_ms=400)
    c._maybe_refresh_metadata(500)  # not due, but the metadata moved on: a new snapshot
    assert brokers.asked == 2 and c._rejoin_needed_or_pending() and len(_seen(c)) == 1
    c._maybe_refresh_metadata(1399)
    assert brokers.asked == 2
    c._maybe_refresh_metadata(1400)
    assert brokers.asked == 3


def test_a_failed_refresh_is_tried_again_after_the_backoff_not_the_max_age(tmp_path):
    brokers = Brokers(t=4)
    c = _consumer(tmp_path, brokers)
    c._maybe_refresh_metadata(0)
    brokers.down = True
    c._maybe_refresh_metadata(1000)
    c._maybe_refresh_metadata(1099)
    assert brokers.asked == 2
    brokers.down, brokers.counts["t"] = False, 5
    c._maybe_refresh_metadata(1100)
    assert brokers.asked == 3 and _seen(c)[0]["partitions"] == 5


def test_metadata_max_age_is_kafkas_default_and_at_least_zero():
    base = {"group.id": "g", "bootstrap.servers": "h:1"}
    assert ConsumerConfig.from_dict(base).metadata_max_age_ms == 300000
    assert ConsumerConfig.from_dict({**base, "metadata.max.age.ms": 0}).metadata_max_age_ms == 0
    with pytest.raises(LabError, match="metadata.max.age.ms must be >= 0"):
        ConsumerConfig.from_dict({**base, "metadata.max.age.ms": -1})


# -- the KIP-848 coordinator, on a fake clock -----------------------------------------------------------------
class Coordinator:
    """A KIP-848 coordinator alone, topic `t` with `counts["t"]` partitions in its broker's metadata."""

    def __init__(self):
        self.counts = {"t": 4}
        self.clock = FakeClock()
        self.events: list[tuple[str, dict]] = []
        store = MemoryStore()
        config = CoordinatorConfig(offsets_topic_num_partitions=1, group_consumer_heartbeat_interval_ms=1000,
                                   group_consumer_min_heartbeat_interval_ms=1000,
                                   group_consumer_session_timeout_ms=10_000,
                                   group_consumer_min_session_timeout_ms=10_000)
        self.coord = GroupCoordinator(store, config, scheduler=Scheduler(self.clock),
                                      on_event=lambda k, **f: self.events.append((k, f)),
                                      topic_partitions=lambda topic: self.counts.get(topic, 0))
        self.coord.load_partition(0, [])
        self.members: dict[str, dict] = {}  # name: {"id", "epoch", "owned"}

    def beat(self, name: str) -> dict:
        """A well-behaved member's heartbeat: it owns, and reports, what its last answer assigned it."""
        m = self.members.setdefault(name, {"id": "", "epoch": 0, "owned": set()})
        joining = m["epoch"] == 0
        answer = self.coord.consumer.heartbeat({
            "group_id": "g", "member_id": m["id"], "member_epoch": m["epoch"], "instance_id": None,
            "rebalance_timeout_ms": 20_000 if joining else -1, "subscribed_topic_names": ["t"] if joining else None,
            "server_assignor": None,
            "topic_partitions": [{"topic": "t", "partitions": sorted(p for _, p in m["owned"])}]})
        assert answer["error_code"] == 0, answer
        m["id"], m["epoch"] = answer["member_id"], answer["member_epoch"]
        if answer["assignment"] is not None:
            m["owned"] = {(r["topic"], p) for r in answer["assignment"]["topic_partitions"] for p in r["partitions"]}
        return answer

    def converge(self, names: list[str]) -> None:
        for _ in range(10):
            for name in names:
                self.beat(name)
        owned = sorted(tp for n in names for tp in self.members[n]["owned"])
        assert owned == [("t", p) for p in range(self.counts["t"])], owned

    def seen(self) -> list[dict]:
        return [f for k, f in self.events if k == "partitions_seen"]

    @property
    def group_epoch(self) -> int:
        return self.coord.consumer.groups["g"].group_epoch


def test_the_coordinator_bumps_the_group_epoch_at_the_next_heartbeat_and_records_the_growth_once():
    h = Coordinator()
    h.converge(["a", "b"])
    epoch = h.group_epoch
    h.counts["t"] = 6
    h.beat("a")
    assert h.group_epoch == epoch + 1
    assert h.seen() == [{"group": "g", "topic": "t", "partitions": 6, "before": 4, "generation": epoch}]
    bump = [f for k, f in h.events if k == "group_epoch"][-1]
    assert bump["generation"] == epoch + 1 and bump["reason"] == "the partition count of t changed"
    h.converge(["a", "b"])  # the new partitions handed out in heartbeat answers, every one owned once
    assert len(h.seen()) == 1 and h.group_epoch == epoch + 1


def test_a_leave_that_notices_the_growth_records_it_and_the_next_heartbeat_does_not_again():
    h = Coordinator()
    h.converge(["a", "b"])
    h.counts["t"] = 6
    b = h.members.pop("b")
    h.coord.consumer.heartbeat({"group_id": "g", "member_id": b["id"], "member_epoch": -1})
    assert [(f["partitions"], f["before"]) for f in h.seen()] == [(6, 4)]
    h.converge(["a"])
    assert len(h.seen()) == 1


# -- on real brokers ------------------------------------------------------------------------------------------
@pytest.fixture
def broker_config():
    """The coordinator's KIP-848 timings, short (a heartbeat every 500 ms), as `test_modern_kip848.py`'s."""
    return {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "2000"}


GROWN_ALL = [("t", p) for p in range(GROWN)]
NEW = [("t", p) for p in range(PARTITIONS, GROWN)]


def _trace_events(cluster, actor: str, kind: str) -> list[dict]:
    return [{**e, **json.loads(e.get("fields") or "{}")} for e in _events(cluster.dir, actor) if e["kind"] == kind]


def _grow(cluster) -> None:
    add_partitions(cluster.zk, "t", GROWN, [1, 2, 3])
    wait_for_metadata(cluster.zk, "t", GROWN)


def _processed(cluster, names, traces) -> set[tuple[str, int]]:
    for t in traces:
        t.flush()
    return {(e["topic"], e["partition"]) for n in names for e in _events(cluster.dir, n) if e["kind"] == "processed"}


@pytest.fixture
def classic(cluster):
    g = ClassicGroup(cluster)
    yield g
    g.stop_all()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_classic_group_takes_in_new_partitions_when_its_leader_refreshes(cluster, classic, strategy):
    names = ["c1", "c2"]
    for name in names:
        classic.add(name, **{"metadata.max.age.ms": 1000, "partition.assignment.strategy": strategy})

    def converged(partitions):
        state = describe(cluster)
        live = classic.live().values()
        owned = sorted(tp for c in live for tp in c.assignment())
        return (state["state"] == "Stable" and len(state["members"]) == len(names) and owned == partitions
                and all(c.generation.generation_id == state["generation"] and c._rejoin_reason is None
                        for c in live))

    wait_for(lambda: converged([("t", p) for p in range(PARTITIONS)]), "the group on the topic's partitions")
    leader = next(c for c in classic.members.values() if c._assignment_snapshot is not None)
    generation = leader.generation.generation_id
    _grow(cluster)
    wait_for(lambda: converged(GROWN_ALL), "the group on the grown topic's partitions, each owned once")
    assert leader.generation.generation_id > generation

    produce_values(cluster, 3, "after")  # the new partitions are fetched from auto.offset.reset (earliest)
    wait_for(lambda: set(NEW) <= _processed(cluster, names, classic.traces), "records of the new partitions")

    for t in classic.traces:
        t.flush()
    for name in names:  # every member refreshes, and records what it learnt once
        wait_for(lambda n=name: _trace_events(cluster, n, "partitions_seen"), f"{name}'s partitions_seen")
        seen = [(e["topic"], e["partitions"], e["before"]) for e in _trace_events(cluster, name, "partitions_seen")]
        assert seen == [("t", GROWN, PARTITIONS)], (name, seen)
    leader_seen = _trace_events(cluster, leader.name, "partitions_seen")[0]
    rejoins = [e for e in _trace_events(cluster, leader.name, "rebalance_begin")
               if e["reason"].startswith("cached metadata has changed") and e["ts_ns"] > leader_seen["ts_ns"]]
    assert rejoins, "the leader rejoined because its metadata changed"
    first = next(e for e in _trace_events(cluster, leader.name, "leader_assignment")
                 if e["ts_ns"] > rejoins[0]["ts_ns"])
    given = sorted(tuple(tp) for tps in first["assignment"].values() for tp in tps)
    # the new partitions, which nobody owned, go out at once; cooperative-sticky withholds a moving one a round
    assert set(NEW) <= set(given) and (given == GROWN_ALL or strategy == "cooperative-sticky"), given


@pytest.fixture
def kip848(cluster):
    g = Kip848Group(cluster)
    yield g
    g.stop_all()


def test_a_kip848_group_gets_new_partitions_from_its_coordinator(cluster, kip848):
    names = ["k1", "k2"]
    for name in names:
        kip848.add(name)

    def converged(partitions):
        members = [kip848.members[n] for n in names]
        owned = sorted(tp for m in members for tp in m.assignment())
        return owned == partitions and len({m.member_epoch for m in members}) == 1 and all(
            m.state is Kip848MemberState.STABLE and m.membership.current == m.membership.target for m in members)

    wait_for(lambda: converged([("t", p) for p in range(PARTITIONS)]), "the group on the topic's partitions")
    _grow(cluster)
    wait_for(lambda: converged(GROWN_ALL), "the group on the grown topic's partitions, each owned once")
    produce_values(cluster, 3, "after")
    wait_for(lambda: set(NEW) <= _processed(cluster, names, kip848.traces), "records of the new partitions")

    def coordinators_seen():  # the brokers' traces, which their processes write out every 0.2 s
        return [e for b in cluster.brokers for e in _trace_events(cluster, f"broker-{b}", "partitions_seen")]

    wait_for(coordinators_seen, "the coordinator's partitions_seen")
    seen = coordinators_seen()
    assert [(e["broker"], e["group"], e["topic"], e["partitions"], e["before"]) for e in seen] == [
        (seen[0]["broker"], "g", "t", GROWN, PARTITIONS)]
    bumps = [e for e in _trace_events(cluster, f"broker-{seen[0]['broker']}", "group_epoch")
             if e["ts_ns"] >= seen[0]["ts_ns"]]
    assert bumps[0]["reason"] == "the partition count of t changed"
    assert all(m.member_epoch == bumps[0]["generation"] for m in kip848.members.values())
    for name in names:  # the members learn of new partitions only as an assignment
        assert _trace_events(cluster, name, "partitions_seen") == []
