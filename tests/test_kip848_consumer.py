"""The KIP-848 consumer's poll-loop steps (`modern_coord/kip848_consumer.py`) with no broker: its coordinator calls
are recorded and answered by the test, the threads never started. What a reconciliation does, in which order, and
what a fenced or stale member releases."""

from __future__ import annotations

import json
import threading

import pytest
from conftest import wait_for

from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode
from modern_coord.config import ConsumerConfig
from modern_coord.kip848_consumer import Kip848Consumer
from modern_coord.member import RebalanceListener
from modern_coord.membership import Kip848MemberState

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


class Calls(RebalanceListener):
    def __init__(self):
        self.log = []

    def on_partitions_revoked(self, partitions):
        self.log.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions):
        self.log.append(("assigned", partitions))


@pytest.fixture
def consumer(tmp_path):
    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9",
                                       "group.protocol": "consumer", "client.id": "c1"})
    trace = TraceRecorder(tmp_path, trial="t", design="consumer-848", actor="c1")
    calls = Calls()
    c = Kip848Consumer(config, ["t"], trace, name="c1", listener=calls)
    answers = {"OffsetCommit": {"error_code": 0}}

    def call(api, **body):
        calls.log.append((api, body))
        return answers[api]
    c._call_coordinator = call
    c.answers, c.calls = answers, calls

    def events(kind):
        trace.flush()
        lines = (tmp_path / "traces" / "c1.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["kind"] == kind]
    c.events = events
    yield c
    trace.close()


def joined(c, epoch, partitions):
    m = c.membership
    m.subscribe()
    m.poll_heartbeat(0, True)
    m.on_heartbeat_response({"error_code": 0, "member_id": "m1", "member_epoch": epoch, "heartbeat_interval_ms": 500,
                             "assignment": {"topic_partitions": [{"topic": "t", "partitions": partitions}]}}, 0)


def test_a_reconciliation_commits_then_revokes_then_assigns_then_acknowledges(consumer):
    c = consumer
    joined(c, 1, [0, 1])
    c._reconcile()
    assert c.assignment() == [T0, T1] and c.state is Kip848MemberState.ACKNOWLEDGING
    c.membership.poll_heartbeat(1, True)  # the acknowledgement
    c._positions = {T0: 10, T1: 20}
    c.calls.log.clear()
    c.membership.on_heartbeat_response({"error_code": 0, "member_id": "m1", "member_epoch": 2,
                                        "heartbeat_interval_ms": 500,
                                        "assignment": {"topic_partitions": [{"topic": "t", "partitions": [1, 2]}]}}, 2)
    c._reconcile()
    api, commit = c.calls.log[0]
    assert api == "OffsetCommit" and commit["generation_id"] == 2 and commit["member_id"] == "m1"
    assert [o["partition"] for o in commit["offsets"]] == [0, 1]  # every position, before anything is revoked
    assert c.calls.log[1:] == [("revoked", [T0]), ("assigned", [T2])]
    assert c.assignment() == [T1, T2] and c._positions == {T1: 20}  # what it keeps goes on from where it was
    assert c.state is Kip848MemberState.ACKNOWLEDGING
    assigned = c.events("assigned")[-1]
    assert (assigned["generation"], json.loads(assigned["fields"])["partitions"]) == (2, [["t", 1], ["t", 2]])
    assert [e["generation"] for e in c.events("rebalance_begin")] == [1, 2]
    assert [json.loads(e["fields"])["outcome"] for e in c.events("rebalance_end")] == ["ok", "ok"]


def test_a_stale_epoch_commit_before_revocation_is_retried_with_the_latest_epoch(consumer):
    c = consumer
    joined(c, 1, [0])
    c._reconcile()
    c._positions = {T0: 5}
    c.answers["OffsetCommit"] = {"error_code": int(ErrorCode.STALE_MEMBER_EPOCH)}
    tries = []

    def call(api, **body):
        tries.append(body["generation_id"])
        if len(tries) == 2:
            c.answers["OffsetCommit"] = {"error_code": 0}
        c.membership.member_epoch = 3 if len(tries) == 1 else c.membership.member_epoch  # a heartbeat meanwhile
        return c.answers[api]
    c._call_coordinator = call
    c._commit_before_revocation()
    assert tries == [1, 3]
    outcomes = [(e["generation"], json.loads(e["fields"])["outcome"], e["error"]) for e in c.events("commit")]
    assert outcomes == [(1, "fenced", "STALE_MEMBER_EPOCH"), (3, "accepted", "NONE")]


def test_a_fenced_member_loses_everything_without_committing_then_rejoins(consumer):
    c = consumer
    joined(c, 1, [0, 1])
    c._reconcile()
    c._positions = {T0: 5, T1: 6}
    c.membership.on_heartbeat_response({"error_code": int(ErrorCode.FENCED_MEMBER_EPOCH)}, 5)
    c.calls.log.clear()
    c._release_lost()
    assert c.calls.log == [("revoked", [T0, T1])]  # no OffsetCommit
    assert json.loads(c.events("revoked")[-1]["fields"])["lost"] is True
    assert c.assignment() == [] and c.state is Kip848MemberState.JOINING and c.member_epoch == 0
    assert c._commit_positions("auto-commit") is None  # no epoch: nothing is sent


def test_a_member_with_no_epoch_sends_no_commit(consumer):
    c = consumer
    c._positions = {T0: 1}
    assert c._commit_positions("auto-commit") is None and not c.calls.log


def test_a_fenced_member_that_closes_loses_its_partitions_and_sends_no_leave(consumer):
    """Kafka's `leaveGroup` for a FENCED member: the assignment is cleared (lost) and no heartbeat is sent; the
    member does not rejoin on its way out (a leave under its old id would be refused anyway)."""
    c = consumer
    joined(c, 1, [0, 1])
    c._reconcile()
    c.membership.on_heartbeat_response({"error_code": int(ErrorCode.FENCED_MEMBER_EPOCH)}, 5)
    c.calls.log.clear()
    sent = []
    c._send_leave = lambda: sent.append("leave")
    c._hb_thread = threading.current_thread()  # never started: nothing to wait for
    c.fetcher.close = lambda: None
    c._leave()
    assert sent == [] and c.state is Kip848MemberState.UNSUBSCRIBED
    assert c.calls.log == [("revoked", [T0, T1])]  # no OffsetCommit, no ConsumerGroupHeartbeat
    assert json.loads(c.events("revoked")[-1]["fields"])["lost"] is True
    assert not c.events("generation_reset") or all(e["error"] != "NONE" for e in c.events("generation_reset"))


def test_a_state_change_wakes_the_heartbeat_thread_at_once(consumer):
    """An acknowledgement (or a leave) is sent at once, not at the heartbeat thread's next tick: Kafka's
    application thread wakes its network thread when a reconciliation completes."""
    steps = []

    def step(now):
        steps.append(now)
        return 30.0  # seconds: far past the test's wait, so only a wake-up brings the next step

    consumer._heartbeat_step = step
    thread = threading.Thread(target=consumer._heartbeat_loop, daemon=True)
    thread.start()
    try:
        wait_for(lambda: steps, "the heartbeat thread's first step")
        with consumer._lock:
            consumer.transitioned(Kip848MemberState.RECONCILING, Kip848MemberState.ACKNOWLEDGING)
        wait_for(lambda: len(steps) >= 2, "the next step, long before its 30 s wait ends", timeout_s=10)
    finally:
        consumer._stop.set()
        consumer._wake_heartbeat.set()
        thread.join(5)
