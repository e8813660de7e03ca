"""The coordinator-era consumer against real brokers hosting the group coordinator."""

import json
import time

import pytest
from conftest import PARTITIONS, _produced, _start_producer, _wait_produced, interrupt, wait_for

from lab_cluster.processes import LabProcess
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient
from modern_coord.config import ConsumerConfig
from modern_coord.consumer import ModernConsumer
from modern_coord.coordinator.service import OFFSETS_TOPIC
from modern_coord.lookup import find_coordinator
from modern_coord.member import ClassicMemberState, RebalanceListener

GROUP = "g"
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "max.poll.interval.ms": 10000,
        "auto.commit.interval.ms": 500, "auto.offset.reset": "earliest", "retry.backoff.ms": 100}
ALL = [("t", p) for p in range(PARTITIONS)]


class Group:
    """Members of one group: threads in this process (`add`) or processes of their own (`add_process`)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.members: dict[str, ModernConsumer] = {}
        self.traces: list[TraceRecorder] = []
        self.processes: dict[str, LabProcess] = {}

    def add(self, name: str, listener: RebalanceListener | None = None, **overrides) -> ModernConsumer:
        props = {"group.id": GROUP, "bootstrap.servers": self.cluster.bootstrap, "client.id": name, **FAST,
                 **overrides}
        trace = TraceRecorder(self.cluster.dir, trial="t", design="classic", actor=name)
        self.traces.append(trace)
        consumer = ModernConsumer(ConsumerConfig.from_dict(props), ["t"], trace, name=name, listener=listener)
        self.members[name] = consumer
        if listener is not None:
            listener.consumer = consumer
        return consumer.start()

    def add_process(self, name: str, **overrides) -> LabProcess:
        args = ["--family", "modern_coord", "--address", self.cluster.bootstrap, "--group", GROUP, "--topic", "t",
                "--count", "1", "--trial-dir", str(self.cluster.dir), "--name", name]
        for key, value in {**FAST, **overrides}.items():
            args += ["--config", f"{key}={value}"]
        self.processes[name] = LabProcess(name, "lab_cluster.consumer_host", args,
                                          self.cluster.dir / "proc" / f"{name}.log")
        return self.processes[name]

    def live(self):
        return {n: c for n, c in self.members.items() if not c._stop.is_set()}

    def settle(self, expect_members: int, timeout_s=60):
        """Wait until the coordinator reports `expect_members` in a Stable group and every thread member agrees."""
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            last = describe(self.cluster)
            live = self.live()
            owned = [tp for c in live.values() for tp in c.assignment()]
            if last["state"] == "Stable" and len(last["members"]) == expect_members and all(
                    c.state is ClassicMemberState.STABLE and c.generation.generation_id == last["generation"]
                    and c._rejoin_reason is None for c in live.values()) and (
                    expect_members != len(live) or sorted(owned) == ALL):
                return last
            time.sleep(0.05)
        raise AssertionError(f"group did not settle: coordinator {last}, members "
                             f"{[(n, c.state, c.generation, c.assignment()) for n, c in self.live().items()]}")

    def stop_all(self):
        for c in self.live().values():
            c._stop.set()
        for c in self.members.values():
            c.stop()
        for p in self.processes.values():
            if p.alive():
                p.resume()
                p.stop()
        for t in self.traces:
            t.close()


@pytest.fixture
def group(cluster):
    g = Group(cluster)
    yield g
    g.stop_all()


def coordinator_of(cluster):
    """(broker id, host, port) of the group's coordinator, from FindCoordinator to any live broker."""
    for broker in cluster.brokers.values():
        if not broker.alive():
            continue
        try:
            answer = find_coordinator("127.0.0.1", broker.port, GROUP, client_id="test")
        except ConnectionError:
            continue
        if answer["error_code"] == 0:
            return answer["node_id"], answer["host"], answer["port"]
    return None


def describe(cluster):
    """The group as its coordinator holds it (DescribeGroups)."""
    found = coordinator_of(cluster)
    if found is None:
        return {"state": "unknown", "members": [], "generation": -1}
    client = WireClient(found[1], found[2], client_id="test")
    try:
        answer = client.request("DescribeGroups", group_id=GROUP)
    except ConnectionError:
        return {"state": "unknown", "members": [], "generation": -1}
    finally:
        client.close()
    return answer if answer["error_code"] == 0 else {"state": answer["error"], "members": [], "generation": -1}


def _events(trial_dir, actor):
    path = trial_dir / "traces" / f"{actor}.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return out


def _offsets_records(cluster):
    """Every record the coordinators wrote to `__consumer_offsets` (shared log files)."""
    records = []
    for path in sorted((cluster.dir / "logs").glob(f"{OFFSETS_TOPIC}-*.log")):
        records += [json.loads(json.loads(line)["value"]) for line in path.read_text().splitlines() if line]
    return records


def _member_events(group, name, kind):
    for trace in group.traces:
        trace.flush()
    return [e | {"f": json.loads(e.get("fields") or "{}")} for e in _events(group.cluster.dir, name)
            if e["kind"] == kind]


def test_one_to_three_members_reach_one_generation_with_a_complete_disjoint_assignment(cluster, group):
    c1 = group.add("c1")
    first = group.settle(1)
    assert c1.assignment() == ALL
    group.add("c2")
    group.add("c3")
    final = group.settle(3)
    assert final["generation"] > first["generation"]
    shares = [m.assignment() for m in group.members.values()]
    assert sorted(tp for s in shares for tp in s) == ALL and sorted(len(s) for s in shares) == [1, 1, 2]
    # range over member ids in order: the first member id gets the extra partition
    joins = _member_events(group, "c1", "join")
    assert joins[0]["error"] == "MEMBER_ID_REQUIRED" and joins[1]["error"] == "NONE"


def test_the_leader_leaves_and_a_new_leader_is_chosen(cluster, group):
    for name in ("c1", "c2", "c3"):
        group.add(name)
    before = group.settle(3)
    leader = next(n for n, c in group.members.items()
                  if _member_events(group, n, "join")[-1]["f"]["leader"] == c.generation.member_id)
    group.members[leader].stop()
    after = group.settle(2)
    assert after["generation"] > before["generation"]
    survivors = [n for n in group.live()]
    leaders = {_member_events(group, n, "join")[-1]["f"]["leader"] for n in survivors}
    assert len(leaders) == 1 and leaders.pop() in {group.members[n].generation.member_id for n in survivors}
    assert _member_events(group, leader, "leave")[-1]["error"] == "NONE"


def test_a_crashed_member_is_evicted_after_its_session_timeout(cluster, group):
    group.add("c1")
    crashing = group.add_process("c2")
    group.settle(2)
    crashing.kill()
    killed_at = time.monotonic()
    group.settle(1)
    evicted_after = time.monotonic() - killed_at
    node = coordinator_of(cluster)[0]

    def expired():
        return [e for e in _events(cluster.dir, f"broker-{node}") if e["kind"] == "member_expired"]
    wait_for(expired, "the coordinator's trace of the eviction")
    expired = expired()
    assert len(expired) == 1 and json.loads(expired[0]["fields"])["session_timeout_ms"] == 6000
    assert group.members["c1"].assignment() == ALL
    assert evicted_after > 3  # not before the session could have run out (6 s, minus heartbeat slack)


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(cluster, group):
    # c2's session (30 s) outlives the rebalance timeout (3 s): only the rebalance timeout can remove it.
    group.add("c1", **{"max.poll.interval.ms": 3000})
    sleeper = group.add_process("c2", **{"session.timeout.ms": 30000, "max.poll.interval.ms": 3000})
    group.settle(2)
    sleeper.pause()
    group.add("c3", **{"max.poll.interval.ms": 3000})
    group.settle(2)
    node = coordinator_of(cluster)[0]

    def removed():  # c2's removals; the broker's trace is flushed every moment: wait for it
        return [json.loads(e["fields"])["reason"] for e in _events(cluster.dir, f"broker-{node}")
                if e["kind"] == "member_removed" and e["member"].startswith("c2-")]
    wait_for(removed, "the coordinator's trace of c2's removal")
    # (c1 and c3, blocked in that JoinGroup for the 3 s, may then find their own 3 s poll interval passed
    # and leave, as Java's heartbeat thread does once the join completes: not what this test is about)
    assert removed() == ["did not rejoin within the rebalance timeout"]
    sleeper.resume()


def test_the_protocol_vote_picks_the_most_supported_assignor(cluster, group):
    group.add("c1", **{"partition.assignment.strategy": "sticky,roundrobin"})
    group.add("c2", **{"partition.assignment.strategy": "roundrobin,sticky"})
    group.add("c3", **{"partition.assignment.strategy": "roundrobin,range,sticky"})
    group.settle(3)
    protocols = {n: c.generation.protocol_name for n, c in group.members.items()}
    assert set(protocols.values()) == {"roundrobin"}


def test_a_zombie_commit_is_fenced_and_no_committed_offset_moves_backwards(cluster, group):
    _start_producer(cluster, rate=50)
    _wait_produced(cluster, 5)
    group.add("c1")
    zombie = group.add_process("z")
    group.settle(2)
    time.sleep(1.5)  # both consume and commit
    zombie.pause()
    group.settle(1)  # evicted after its session timeout; c1 owns everything
    time.sleep(1.5)  # c1 commits beyond what the zombie had committed
    zombie.resume()
    wait_for(lambda: any(e["f"]["outcome"] == "fenced" for e in _member_events(group, "z", "commit")),
              "the zombie's commit")
    fenced = [e for e in _member_events(group, "z", "commit") if e["f"]["outcome"] == "fenced"]
    assert {e["error"] for e in fenced} <= {"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"}
    group.settle(2)  # the zombie rejoins as a new member and the group goes on
    # Every commit the coordinators accepted is in the offsets log: none moved a partition backwards,
    # and none came from the zombie's fenced generation.
    commits = [r for r in _offsets_records(cluster) if r["type"] == "offset"]
    for p in range(PARTITIONS):
        offsets = [r["offset"] for r in commits if r["partition"] == p]
        assert offsets == sorted(offsets), f"partition {p} went backwards: {offsets}"
    attempts = {(e["member"], e["generation"], e["partition"], e["offset"]) for e in fenced}
    assert not [r for r in commits if (r["member"], r["generation"], r["partition"], r["offset"]) in attempts]


def test_consumers_follow_the_coordinator_when_its_broker_dies_and_resume_from_committed_offsets(cluster, group):
    _start_producer(cluster, rate=50)
    _wait_produced(cluster, 5)
    group.add("c1")
    group.add("c2")
    group.settle(2)
    node, _, _ = coordinator_of(cluster)
    time.sleep(1.5)
    kill_ns = time.monotonic_ns()  # the traces' clock (CLOCK_MONOTONIC)
    cluster.brokers[node].kill()
    wait_for(lambda: (coordinator_of(cluster) or (node,))[0] != node, "a new coordinator")
    new_node = coordinator_of(cluster)[0]

    def found_and_committed(name):
        found = any(e["error"] == "NONE" and e["f"]["node"] == new_node
                    for e in _member_events(group, name, "find_coordinator"))
        return found and any(e["f"]["outcome"] == "accepted" and e["ts_ns"] > kill_ns
                             for e in _member_events(group, name, "commit"))
    wait_for(lambda: all(found_and_committed(n) for n in ("c1", "c2")),
              "both members finding the new coordinator and committing to it")
    group.settle(2)
    # Restart the group from scratch: the new members start exactly at the committed offsets.
    committed = {}
    for r in _offsets_records(cluster):
        if r["type"] == "offset" and r["group"] == GROUP:
            committed[r["partition"]] = r["offset"]
    cluster.producer.stop()
    cluster.producer = None
    group.stop_all()
    final = {}
    for r in _offsets_records(cluster):
        if r["type"] == "offset" and r["group"] == GROUP:
            final[r["partition"]] = r["offset"]
    assert all(final[p] >= committed.get(p, 0) for p in range(PARTITIONS))
    fresh = Group(cluster)
    try:
        fresh.add("d1")
        fresh.settle(1)
        wait_for(lambda: len({e["partition"] for e in _member_events(fresh, "d1", "processed")}) == PARTITIONS
                  or all(final[p] == len(_produced(cluster.dir)[p]) for p in range(PARTITIONS)), "d1 processing")
        starts = {}
        for e in _member_events(fresh, "d1", "processed"):
            starts.setdefault(e["partition"], e["offset"])
        assert all(starts[p] == final[p] for p in starts), (starts, final)
    finally:
        fresh.stop_all()
    # Nothing produced was lost: every message was processed by some member.
    processed = {(e["partition"], e["offset"]) for name in ("c1", "c2", "d1")
                 for e in _member_events(group if name != "d1" else fresh, name, "processed")}
    produced = {(p, o) for p, msgs in _produced(cluster.dir).items() for o, _ in msgs}
    assert produced <= processed


def test_consumers_cli_prints_generations_and_leaves_nothing_after_ctrl_c(cluster):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from lab_cluster.leaks import find_leaks

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "consumers", "--design", "classic",
                             "--bootstrap", cluster.bootstrap, "--group", GROUP, "--topic", "t", "--count", "2",
                             "--config", "session.timeout.ms=6000", "--config", "heartbeat.interval.ms=500"],
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo), COLUMNS="200"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    latest = {}
    try:
        for line in proc.stdout:  # "  1.23s {state line}"
            if "{" in line:
                snapshot = json.loads(line[line.index("{"):])
                latest[snapshot["actor"]] = snapshot
            if len(latest) == 2 and all(s["state"] == "stable" for s in latest.values()) \
                    and len({s["generation"] for s in latest.values()}) == 1:
                if sorted(p for s in latest.values() for p in s["partitions"]) == list(range(PARTITIONS)):
                    break
        assert sorted(latest) == ["c1", "c2"], proc.stderr.read()
        assert describe(cluster)["state"] == "Stable" and len(describe(cluster)["members"]) == 2
    finally:
        interrupt(proc)
    assert "Traceback" not in proc.stderr.read()
    after = describe(cluster)
    assert after["state"] == "Empty" and after["members"] == []  # both left the group
    assert find_leaks(proc.pid) == []


def test_consumers_cli_refuses_a_missing_bootstrap_clearly():
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run([sys.executable, "-m", "experiments", "consumers", "--design", "classic", "--group", "g",
                             "--topic", "t"], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "needs --bootstrap" in result.stderr and "Traceback" not in result.stderr


def test_malformed_requests_get_errors_and_the_coordinator_keeps_serving_the_group(cluster, group):
    import socket
    import struct

    group.add("c1")
    group.settle(1)
    _, host, port = coordinator_of(cluster)
    with socket.create_connection((host, port)) as raw:  # a frame that is not JSON
        raw.sendall(struct.pack(">I", 5) + b"{oops")
        length = struct.unpack(">I", raw.recv(4))[0]
        assert json.loads(raw.recv(length))["error"] == "INVALID_REQUEST"
    client = WireClient(host, port, client_id="test")
    try:
        assert client.request("JoinGroup", version=9, group_id=GROUP)["error"] == "UNSUPPORTED_VERSION"
        assert client.request("Heartbeat", group_id="no-such-group", member_id="x", generation_id=1)[
            "error"] in ("UNKNOWN_MEMBER_ID", "NOT_COORDINATOR")
        assert client.request("SyncGroup", group_id=GROUP, member_id="nobody", generation_id=1)[
            "error"] == "UNKNOWN_MEMBER_ID"
        assert client.request("OffsetCommit", group_id=GROUP, offsets="nope")["error"] == "INVALID_REQUEST"
    finally:
        client.close()
    heartbeats = len(_member_events(group, "c1", "heartbeat"))
    wait_for(lambda: len(_member_events(group, "c1", "heartbeat")) > heartbeats + 2, "more heartbeats")
    assert _member_events(group, "c1", "heartbeat")[-1]["error"] == "NONE"
    assert describe(cluster)["state"] == "Stable"


class HeartbeatAnswerMidRebalance(RebalanceListener):
    """Hands its consumer a heartbeat answer REBALANCE_IN_PROGRESS while it revokes for a rebalance already under
    way: what a Java client's heartbeat thread receives when its heartbeat crosses the rebalance's start."""

    def __init__(self):
        self.consumer: ModernConsumer | None = None
        self.delivered = 0

    def on_partitions_revoked(self, partitions):
        consumer = self.consumer
        if consumer is not None and consumer.generation.is_valid():
            consumer._handle_heartbeat_response(ErrorCode.REBALANCE_IN_PROGRESS, consumer.generation)
            self.delivered += 1


def test_a_heartbeat_answer_arriving_mid_rebalance_causes_no_extra_generation(cluster, group):
    """Java clears its rejoin request only when SyncGroup succeeds, so a request made during the rebalance is
    absorbed by it. (Clearing it when the rebalance starts made this member rejoin once more: generation + 2.)"""
    listener = HeartbeatAnswerMidRebalance()
    c1 = group.add("c1", listener=listener)
    group.add("c2")
    before = group.settle(2)
    group.add("c3")
    after = group.settle(3)
    assert listener.delivered >= 1
    assert after["generation"] == before["generation"] + 1
    time.sleep(3 * FAST["heartbeat.interval.ms"] / 1000)  # a stray rejoin would start within a heartbeat or two
    assert describe(cluster)["generation"] == after["generation"]
    begun = [e for e in _member_events(group, "c1", "rebalance_begin") if e["generation"] == before["generation"]]
    assert len(begun) == 1, begun
    assert c1.state is ClassicMemberState.STABLE


def test_a_member_that_does_not_poll_within_max_poll_interval_leaves_the_group(cluster, group):
    """Java's HeartbeatThread: poll timeout expired -> maybeLeaveGroup: LeaveGroup, generation and member id
    reset, heartbeats stop; the others go on without it. (The lab used to keep heartbeating and stay a member.)"""
    _start_producer(cluster, rate=50)
    _wait_produced(cluster, 20)
    c1 = group.add("c1")
    group.add("slow", **{"max.poll.interval.ms": 1500, "lab.processing.ms": 200, "max.poll.records": 20})
    group.settle(2)
    wait_for(lambda: _member_events(group, "slow", "leave"), "the slow member's LeaveGroup")
    (leave,) = _member_events(group, "slow", "leave")[:1]
    assert leave["error"] == "NONE" and leave["f"]["reason"] == "consumer poll timeout has expired"
    assert _member_events(group, "slow", "poll_timeout")
    wait_for(lambda: c1.assignment() == ALL, "c1 to take every partition")
    # until it polls again the slow member has no generation: no heartbeat and no commit under its old one
    left_at = leave["ts_ns"]
    rejoined = [e["ts_ns"] for e in _member_events(group, "slow", "assigned") if e["ts_ns"] > left_at]
    until = rejoined[0] if rejoined else float("inf")
    for kind in ("heartbeat", "commit"):
        late = [e for e in _member_events(group, "slow", kind) if left_at < e["ts_ns"] < until]
        assert not late, (kind, late)


def test_start_positions_that_cannot_be_looked_up_are_retried_not_a_reason_to_rejoin(cluster, group, monkeypatch):
    """Java looks positions up in the poll loop after SyncGroup and retries; a failure never causes a rejoin."""
    from modern_coord.fetcher import Fetcher

    real = Fetcher.list_offset
    failures = {"left": 3}

    def flaky(self, tp, which):
        if failures["left"] > 0:
            failures["left"] -= 1
            return None  # as when the partition's leader is not known yet
        return real(self, tp, which)

    monkeypatch.setattr(Fetcher, "list_offset", flaky)
    _start_producer(cluster, rate=20)
    _wait_produced(cluster, 3)
    c1 = group.add("c1")
    group.settle(1)
    wait_for(lambda: {(e["topic"], e["partition"]) for e in _member_events(group, "c1", "processed")} == set(ALL),
              "c1 to process every partition")
    assert failures["left"] == 0 and _member_events(group, "c1", "positions_unknown")
    reasons = [e["f"]["reason"] for e in _member_events(group, "c1", "rebalance_begin")]
    assert reasons == ["first join", "member_id_required"], reasons
    assert len(_member_events(group, "c1", "assigned")) == 1 and c1.generation.generation_id == 1
