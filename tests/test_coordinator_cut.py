"""A coordinator-era member cut off from its coordinator, its partitions' leaders still reachable, goes on processing.

Kafka's consumers never wait on their coordinator to fetch and process: the
periodic auto-commit goes without waiting for its answer (classic:
`maybeAutoCommitOffsetsAsync`; KIP-848: the background thread's
`maybeAutoCommitAsync`), and the classic heartbeat thread checks its session
while a heartbeat is in flight. Here only the member-to-coordinator link of
c1 is blackholed (a fault proxy on `lab.coordinator.via`): while its commit
waits for an answer that never comes, c1 goes on processing every partition
it owns, and the classic member gives up on its coordinator when its session
runs out, not when a request times out.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
from conftest import InProcessMembers, _start_producer, _wait_produced, wait_for
from test_modern import coordinator_of

from experiments.engine.families import FAMILIES
from lab_cluster.faultproxy import FaultProxy, Mode
from modern_coord.coordinator_link import SESSION_EXPIRED

GROUP = "g"
REQUEST_TIMEOUT_MS = 8000
#: the classic members' timings (the KIP-848 ones are the coordinator's: `broker_config`)
CLASSIC = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
SHARED = {"auto.commit.interval.ms": "500", "retry.backoff.ms": "100", "max.poll.interval.ms": "30000",
          "request.timeout.ms": str(REQUEST_TIMEOUT_MS), "lab.processing.ms": "5"}


@pytest.fixture
def broker_config():
    """KIP-848's session and heartbeat, the classic members' values, on the brokers."""
    return {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "2000"}


def _owned(members, name):
    return [p for _, p in members.members[name].assignment()]


def _events(members, actor, kind):
    """The events of one kind in a member's trace so far, each with its fields parsed as `f`."""
    for trace in members.traces:
        trace.flush()
    out = []
    for line in (members.cluster.dir / "traces" / f"{actor}.jsonl").read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            break  # a line being written
        if event["kind"] == kind:
            out.append(event | {"f": json.loads(event.get("fields") or "{}")})
    return out


@pytest.mark.parametrize("design", ["classic", "consumer-848"])
def test_a_member_cut_off_from_its_coordinator_goes_on_processing_while_its_commit_waits(cluster, design):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, 5)
    # the first FindCoordinator creates the offsets topic; the coordinator is known once it has a leader
    wait_for(lambda: coordinator_of(cluster) is not None, "the group's coordinator", timeout_s=60)
    _, _, coordinator_port = coordinator_of(cluster)
    proxy = FaultProxy(coordinator_port, name="c1->coordinator")
    members = InProcessMembers(cluster, FAMILIES[design], GROUP, {**SHARED, **(CLASSIC if design == "classic" else {})})
    try:
        members.add("c1", **{"lab.coordinator.via": f"127.0.0.1:{proxy.port}"})
        members.add("c2")
        wait_for(lambda: sorted(_owned(members, "c1") + _owned(members, "c2")) == [0, 1, 2, 3]
                 and _owned(members, "c1") and _owned(members, "c2"), "both members to own partitions", timeout_s=60)
        wait_for(lambda: any(e["f"]["outcome"] == "accepted" for e in _events(members, "c1", "commit")),
                 "c1's first accepted commit", timeout_s=30)
        owned = _owned(members, "c1")
        cut_ns = max(e["ts_ns"] for e in _events(members, "c1", "processed"))
        proxy.set_mode(Mode.BLACKHOLE)

        def failed_commit():
            return [e for e in _events(members, "c1", "commit")
                    if e["ts_ns"] > cut_ns and e["f"]["outcome"] == "failed"]

        wait_for(failed_commit, "a commit c1 sent into the cut to time out", timeout_s=REQUEST_TIMEOUT_MS / 1000 + 20)
        timed_out_ns = failed_commit()[0]["ts_ns"]
        # the commit waited request.timeout.ms for its answer; in its second half c1 processed every partition it
        # owns (a member that waited on its commit processes nothing until the commit gives up)
        waiting_since_ns = timed_out_ns - REQUEST_TIMEOUT_MS * 1_000_000 // 2
        processed = {e["partition"] for e in _events(members, "c1", "processed")
                     if waiting_since_ns < e["ts_ns"] < timed_out_ns}
        assert processed == set(owned), (owned, processed)
        if design == "classic":
            time.sleep(2)  # still cut, a while into the session after the first expiry
            # the session (6 s) runs out while a heartbeat is in flight, before any request's timeout (8 s)
            lost = [e for e in _events(members, "c1", "coordinator_lost") if e["ts_ns"] > cut_ns]
            assert lost and lost[0]["f"]["reason"] == SESSION_EXPIRED, [e["f"] for e in lost]
            # the session starts again when FindCoordinator answers (the brokers still do), so it runs out once
            # a session, not at every turn of the heartbeat thread
            expiries = [e["ts_ns"] for e in lost if e["f"]["reason"] == SESSION_EXPIRED]
            session_ns = int(CLASSIC["session.timeout.ms"]) * 1_000_000
            assert all(b - a >= session_ns for a, b in itertools.pairwise(expiries)), expiries
    finally:
        proxy.set_mode(Mode.PASS)
        members.stop_all()
        proxy.close()
