"""The real clients as lab designs (`kafka_clients/`): kafka-python and librdkafka members in consumer hosts, their
callbacks in their traces, measured as the lab's own consumers are."""

from __future__ import annotations

import json

import pytest
from conftest import PARTITIONS, produce_values, trace_events, wait_for

from lab_cluster.errors import LabError
from lab_cluster.processes import LabProcess

pytest.importorskip("kafka")
pytest.importorskip("confluent_kafka")

from kafka_clients import KAFKA_PYTHON, LIBRDKAFKA  # noqa: E402

#: the errors a client raises itself when it stops waiting for an answer (kafka-python's, librdkafka's)
CLIENT_TIMEOUTS = ("KafkaTimeoutError", "_TIMED_OUT")

FAST = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "auto.offset.reset": "earliest",
        "auto.commit.interval.ms": "500"}


def host(cluster, family, name: str, lines: dict[str, list[dict]]) -> LabProcess:
    args = ["--family", family.package, "--address", ",".join(f"127.0.0.1:{b.kafka_port}"
                                                              for b in cluster.brokers.values()),
            "--group", "designs", "--topic", "t", "--count", "1", "--trial-dir", str(cluster.dir), "--name", name]
    for key, value in FAST.items():
        args += ["--config", f"{key}={value}"]
    lines[name] = []
    return LabProcess(name, "lab_cluster.consumer_host", args, cluster.dir / "proc" / f"{name}.log",
                      on_line=lambda line: lines[name].append(json.loads(line)) if line.startswith("{") else None)


def owned(lines: dict[str, list[dict]], name: str) -> set[int]:
    stable = [line for line in lines[name] if line["state"] == "stable"]
    return set(stable[-1]["partitions"]) if stable and lines[name][-1]["state"] == "stable" else set()


def test_a_kafka_python_and_a_librdkafka_member_share_the_group_process_everything_and_leave(cluster):
    lines: dict[str, list[dict]] = {}
    kp = host(cluster, KAFKA_PYTHON, "kp", lines)
    rd = host(cluster, LIBRDKAFKA, "rd", lines)
    everything = set(range(PARTITIONS))
    wait_for(lambda: owned(lines, "kp") and owned(lines, "rd") and owned(lines, "kp") | owned(lines, "rd")
             == everything and not owned(lines, "kp") & owned(lines, "rd"),
             timeout_s=90, what="the two real clients to report a split of every partition")
    written = {(p, o) for p, values in produce_values(cluster, 5, "d").items() for o in range(len(values))}
    wait_for(lambda: {(e["partition"], e["offset"]) for a in ("kp", "rd")
                      for e in trace_events(cluster.dir, a, "processed")} >= written,
             timeout_s=60, what="every produced record processed by one of them")
    rd.stop()  # close(): LeaveGroup; kafka-python takes every partition
    wait_for(lambda: owned(lines, "kp") == everything, timeout_s=60, what="kafka-python to take every partition")
    kp.stop()
    for actor in ("kp", "rd"):
        kinds = {e["kind"] for e in (json.loads(x) for x in (cluster.dir / "traces" / f"{actor}.jsonl")
                                     .read_text().splitlines())}
        assert {"consumer_start", "assigned", "processed", "commit", "consumer_stop"} <= kinds
        commits = trace_events(cluster.dir, actor, "commit")
        assert any(e["f"]["outcome"] == "accepted" for e in commits)
        # no answer refused a commit; one the client stopped waiting for is `failed` with its own timeout, as the
        # lab's consumer records REQUEST_TIMED_OUT (kafka-python's commit before a rebalance waits only for what
        # is left of poll's 100 ms); whether the coordinator took it is in the brokers' traces, checked below
        assert all(e["f"]["outcome"] == "accepted" or e["error"] in CLIENT_TIMEOUTS for e in commits), commits
    revoked = trace_events(cluster.dir, "kp", "revoked")
    assert revoked  # eager range: kafka-python revoked everything before taking librdkafka's share
    # each client's `assigned` carries the generation it holds (kafka-python's own, librdkafka's group metadata):
    # one the coordinator gave that member in a SyncGroup answer
    # the brokers keep running and write their traces every 0.2 s (`lab_cluster/trace.py`): wait for the last
    # SyncGroup answers to be on disk before comparing
    def synced() -> set:
        return {(e["member"], e["generation"]) for b in cluster.brokers
                for e in trace_events(cluster.dir, f"broker-{b}", "coordinator_request")
                if e["f"]["api"] == "SyncGroup" and e["error"] == "NONE"}
    adopted = {actor: {(e["member"], e["generation"]) for e in trace_events(cluster.dir, actor, "assigned")}
               for actor in ("kp", "rd")}
    assert adopted["kp"] and adopted["rd"]
    try:
        wait_for(lambda: adopted["kp"] | adopted["rd"] <= synced(), timeout_s=10,
                 what="the brokers' traces to hold every SyncGroup answer the clients adopted")
    except AssertionError:
        raise AssertionError(("adopted generations no SyncGroup answer gave", adopted, synced())) from None
    # the two shared the group and left it in order: the coordinator refused none of their commits
    offset_commits = [e for b in cluster.brokers
                      for e in trace_events(cluster.dir, f"broker-{b}", "coordinator_request")
                      if e["f"]["api"] == "OffsetCommit"]
    assert offset_commits and all(e["error"] == "NONE" for e in offset_commits), offset_commits


def test_a_setting_kafka_python_does_not_take_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="no such setting"):
        KAFKA_PYTHON.configure({"bootstrap.servers": "h:1", "group.id": "g", "rebalance.backoff.ms": "1"}, "c1")
    with pytest.raises(LabError, match="assignors"):
        KAFKA_PYTHON.configure({"partition.assignment.strategy": "magic"}, "c1")


class _Recorded:
    """A trace that keeps what is recorded."""

    def __init__(self):
        self.events = []

    def record(self, kind, **fields):
        self.events.append((kind, fields))


def test_kafka_pythons_synchronous_commits_are_recorded_with_their_answers_and_passed_on_unchanged():
    """kafka-python calls no callback for the commit before a rebalance or in close(): the member wraps the
    coroutine both await and records what it answered; a fenced one is recorded fenced and still raised."""
    import asyncio

    import kafka.errors
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    from kafka_clients.kafka_python_member import KafkaPythonMember

    answers = [{"ok": True}, kafka.errors.CommitFailedError(kafka.errors.IllegalGenerationError())]

    class Coordinator:
        async def _commit_offsets_sync_async(self, offsets, timeout_ms=None):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    trace = _Recorded()
    member = KafkaPythonMember({}, ["t"], trace, "kp")
    coordinator = Coordinator()
    member._trace_synchronous_commits(coordinator)
    offsets = {TopicPartition("t", p): OffsetAndMetadata(o, "", -1) for p, o in ((0, 7), (1, 9))}
    assert asyncio.run(coordinator._commit_offsets_sync_async(offsets, timeout_ms=100)) == {"ok": True}
    with pytest.raises(kafka.errors.CommitFailedError):
        asyncio.run(coordinator._commit_offsets_sync_async({TopicPartition("t", 0): OffsetAndMetadata(8, "", -1)}))
    commits = [(f["partition"], f["offset"], f["outcome"], f["error"]) for kind, f in trace.events if kind == "commit"]
    assert commits == [(0, 7, "accepted", "NONE"), (1, 9, "accepted", "NONE"), (0, 8, "fenced", "ILLEGAL_GENERATION")]
    # a later asynchronous answer of an offset below the one already accepted is no news (LastAccepted)
    member._on_commit_answered([("t", 1, 8)], None)
    assert len([kind for kind, _ in trace.events if kind == "commit"]) == 3
