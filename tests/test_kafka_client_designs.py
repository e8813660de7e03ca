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
        assert all(e["f"]["outcome"] == "accepted" for e in trace_events(cluster.dir, actor, "commit"))
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


def test_a_setting_kafka_python_does_not_take_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="no such setting"):
        KAFKA_PYTHON.configure({"bootstrap.servers": "h:1", "group.id": "g", "rebalance.backoff.ms": "1"}, "c1")
    with pytest.raises(LabError, match="assignors"):
        KAFKA_PYTHON.configure({"partition.assignment.strategy": "magic"}, "c1")
