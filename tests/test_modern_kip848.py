"""KIP-848's consumer protocol on real brokers: `group.protocol=consumer` members (`modern_coord/kip848_consumer.py`)
against the coordinator's ConsumerGroupHeartbeat (`modern_coord/coordinator/`).

No member sends JoinGroup or SyncGroup; the coordinator computes the
assignment; a member whose partitions do not move never stops processing
them; a moving partition reaches its new owner only after its old owner
released it; a member silent past the session timeout is fenced by its member
epoch, loses everything, rejoins with epoch 0, and none of its stale commits
lands.
"""

from __future__ import annotations

import json
import time

import pytest
from conftest import PARTITIONS, _start_producer, _wait_produced, wait_for
from test_modern import _events, _offsets_records

from lab_cluster.processes import LabProcess
from lab_cluster.trace import TraceRecorder
from modern_coord.config import ConsumerConfig
from modern_coord.kip848_consumer import Kip848Consumer
from modern_coord.membership import Kip848MemberState

GROUP = "g"
ALL = [("t", p) for p in range(PARTITIONS)]
#: the members' side: the session and the heartbeat are the coordinator's (`broker_config` below)
FAST = {"group.protocol": "consumer", "max.poll.interval.ms": 10000, "auto.commit.interval.ms": 500,
        "auto.offset.reset": "earliest", "retry.backoff.ms": 100}
#: the group's ConsumerGroupHeartbeat APIs; a member of this protocol sends no other group API but the offsets ones
CLASSIC_APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"}


@pytest.fixture
def broker_config():
    """The coordinator's KIP-848 timings, short: a heartbeat every 500 ms, a 6 s session."""
    return {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "2000"}


class Group:
    """KIP-848 members of one group: threads in this process (`add`) or processes of their own (`add_process`)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.members: dict[str, Kip848Consumer] = {}
        self.traces: list[TraceRecorder] = []
        self.processes: dict[str, LabProcess] = {}

    def add(self, name: str, **overrides) -> Kip848Consumer:
        props = {"group.id": GROUP, "bootstrap.servers": self.cluster.bootstrap, "client.id": name, **FAST,
                 **overrides}
        trace = TraceRecorder(self.cluster.dir, trial="t", design="consumer-848", actor=name)
        self.traces.append(trace)
        self.members[name] = Kip848Consumer(ConsumerConfig.from_dict(props), ["t"], trace, name=name)
        return self.members[name].start()

    def add_process(self, name: str) -> LabProcess:
        args = ["--family", "modern_coord.variants:KIP848", "--address", self.cluster.bootstrap, "--group", GROUP,
                "--topic", "t", "--count", "1", "--trial-dir", str(self.cluster.dir), "--name", name]
        for key, value in FAST.items():
            args += ["--config", f"{key}={value}"]
        self.processes[name] = LabProcess(name, "lab_cluster.consumer_host", args,
                                          self.cluster.dir / "proc" / f"{name}.log")
        return self.processes[name]

    def events(self, name: str, kind: str) -> list[dict]:
        for trace in self.traces:
            trace.flush()
        return [e | {"f": json.loads(e.get("fields") or "{}")} for e in _events(self.cluster.dir, name)
                if e["kind"] == kind]

    def settled(self, names: list[str]) -> int | None:
        """The epoch the thread members `names` are STABLE in, if they are in one and own every partition, disjointly,
        between them; else None."""
        members = [self.members[n] for n in names]
        owned = [tp for m in members for tp in m.assignment()]
        epochs = {m.member_epoch for m in members}
        if all(m.state is Kip848MemberState.STABLE and m.membership.current == m.membership.target for m in members) \
                and len(epochs) == 1 and sorted(owned) == ALL:
            return epochs.pop()
        return None

    def settle(self, names: list[str], timeout_s: float = 60) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            epoch = self.settled(names)
            if epoch is not None:
                return epoch
            time.sleep(0.05)
        raise AssertionError(f"group did not settle: {[(n, self.members[n].snapshot()) for n in names]}")

    def stop_all(self) -> None:
        for m in self.members.values():
            m.stop()
        for p in self.processes.values():
            if p.alive():
                p.stop()
        for t in self.traces:
            t.close()


@pytest.fixture
def group(cluster):
    g = Group(cluster)
    yield g
    g.stop_all()


def broker_apis(cluster) -> set[str]:
    """Every group API the coordinators were sent (their `coordinator_request` events)."""
    return {e.get("api") or json.loads(e["fields"]).get("api") for b in cluster.brokers
            for e in _events(cluster.dir, f"broker-{b}") if e["kind"] == "coordinator_request"}


def _processed(group, name, tp, after_ns=0, before_ns=None):
    return [e["ts_ns"] for e in group.events(name, "processed") if (e["topic"], e["partition"]) == tp
            and e["ts_ns"] > after_ns and (before_ns is None or e["ts_ns"] < before_ns)]


def test_a_join_moves_only_what_it_must_and_a_moving_partition_is_never_processed_by_two(cluster, group):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, at_least=5)
    group.add("c1")
    group.add("c2")
    before = group.settle(["c1", "c2"])
    held = {n: set(group.members[n].assignment()) for n in ("c1", "c2")}
    joined_ns = time.monotonic_ns()
    group.add("c3")
    after = group.settle(["c1", "c2", "c3"])
    settled_ns = time.monotonic_ns()
    assert after > before
    gained = set(group.members["c3"].assignment())
    assert gained and sorted(gained | set(group.members["c1"].assignment())
                             | set(group.members["c2"].assignment())) == ALL
    for name in ("c1", "c2"):
        moved = held[name] - set(group.members[name].assignment())
        kept = held[name] - moved
        assert kept and moved <= gained
        since_join = [e for e in group.events(name, "revoked") if e["ts_ns"] > joined_ns]
        revoked = [tp for e in since_join for tp in map(tuple, e["f"]["partitions"])]
        assert set(revoked) == moved  # it let go of nothing it kept
        # no gap: it processed every partition it kept while the group reconciled
        assert all(_processed(group, name, tp, joined_ns, settled_ns) for tp in kept), name
        for tp in moved:
            let_go = next(e["ts_ns"] for e in since_join if list(tp) in e["f"]["partitions"])
            took = next(e["ts_ns"] for e in group.events("c3", "assigned") if list(tp) in e["f"]["partitions"])
            assert let_go < took
            assert not _processed(group, name, tp, after_ns=let_go)   # the old owner stopped when it let go
            assert not _processed(group, "c3", tp, before_ns=took)    # the new owner began after it took it
    # one reconciliation each at most; c3's epochs went 0 -> ... -> the group's
    assert [e["f"]["epoch_sent"] for e in group.events("c3", "heartbeat")][0] == 0
    apis = broker_apis(cluster)
    assert "ConsumerGroupHeartbeat" in apis and not apis & CLASSIC_APIS, apis


def test_a_zombie_is_fenced_by_its_member_epoch_rejoins_with_epoch_0_and_no_offset_moves_backwards(cluster, group):
    _start_producer(cluster, rate=50)
    _wait_produced(cluster, 5)
    group.add("c1")
    zombie = group.add_process("z")
    wait_for(lambda: len(group.members["c1"].assignment()) == PARTITIONS // 2
             and group.members["c1"].state is Kip848MemberState.STABLE, "c1 sharing with the zombie")
    time.sleep(1.5)  # both consume and commit
    zombie.pause()
    paused_ns = time.monotonic_ns()
    wait_for(lambda: group.settled(["c1"]) is not None,
             "the zombie's partitions handed to c1 after its session timeout", timeout_s=30)
    time.sleep(1.5)  # c1 commits beyond what the zombie had committed
    zombie.resume()

    def fenced():
        refused_commits = [e for e in group.events("z", "commit")
                           if e["ts_ns"] > paused_ns and e["f"]["outcome"] == "fenced"]
        refused_heartbeats = [e for e in group.events("z", "heartbeat")
                              if e["ts_ns"] > paused_ns and e["error"] in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID")]
        return refused_commits, refused_heartbeats
    wait_for(lambda: any(fenced()), "the zombie fenced by its epoch")
    # it loses everything (no commit), then rejoins with epoch 0 and its member id, and the group shares again
    wait_for(lambda: [e for e in group.events("z", "heartbeat") if e["ts_ns"] > paused_ns
                      and e["f"]["epoch_sent"] == 0 and e["error"] == "NONE"], "the zombie rejoining with epoch 0")
    wait_for(lambda: len(group.members["c1"].assignment()) == PARTITIONS // 2, "the group sharing again")
    refused_commits, refused_heartbeats = fenced()
    assert {e["error"] for e in refused_commits} <= {"STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"}
    lost = [e for e in group.events("z", "revoked") if e["ts_ns"] > paused_ns]
    assert lost and lost[0]["f"].get("lost") is True
    # every commit the coordinators accepted is in the offsets log: none moved a partition backwards, and none is
    # one the zombie was refused
    commits = [r for r in _offsets_records(cluster) if r["type"] == "offset"]
    for p in range(PARTITIONS):
        offsets = [r["offset"] for r in commits if r["partition"] == p]
        assert offsets == sorted(offsets), f"partition {p} went backwards: {offsets}"
    attempts = {(e["member"], e["generation"], e["partition"], e["offset"]) for e in refused_commits}
    assert not [r for r in commits if (r.get("member"), r.get("generation"), r["partition"], r["offset"]) in attempts]
    assert not broker_apis(cluster) & CLASSIC_APIS


def test_a_member_that_stops_revokes_and_leaves_with_epoch_minus_1(cluster, group):
    group.add("c1")
    group.add("c2")
    group.settle(["c1", "c2"])
    group.members["c2"].stop()
    group.settle(["c1"])
    leave = group.events("c2", "leave")
    assert [(e["generation"], e["error"]) for e in leave] == [(-1, "NONE")]
    assert group.events("c2", "revoked")[-1]["f"].get("lost") is None  # revoked, not lost
    assert group.members["c2"].state is Kip848MemberState.UNSUBSCRIBED
