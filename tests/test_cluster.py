"""The cluster: broker registration and topic znodes, produce/fetch, broker failure, bad requests.

Every test gets its own chroot on the session's ZooKeeper, three broker
processes and a topic `t` with 4 partitions; brokers use a 4 s session timeout
(the smallest ZooKeeper allows with tickTime 2000) so that a crash is noticed
in seconds.
"""

import json
import socket
import struct
import threading
import time

import pytest
from conftest import (
    PARTITIONS,
    SESSION_MS,
    _client,
    _fetch_all,
    _produced,
    _start_producer,
    _wait_produced,
    interrupt,
    produce_values,
)

from lab_cluster.broker import zk_layout as L
from lab_cluster.broker.admin import broker_addresses, leaders, wait_for_leaders, wait_for_metadata
from lab_cluster.wire import ErrorCode, WireClient, WireError, read_frame


def test_znodes_have_kafkas_keys_and_types(cluster):
    registration = json.loads(cluster.zk.get(L.broker_path(1))[0])
    # Kafka 0.8's keys, and the listeners as Kafka 0.10.2 lists them (version 4): the lab's and Kafka's protocol
    assert set(registration) == {"version", "host", "port", "jmx_port", "timestamp", "endpoints",
                                 "listener_security_protocol_map"}
    assert registration["version"] == 4 and registration["host"] == "127.0.0.1"
    assert isinstance(registration["port"], int) and registration["jmx_port"] == -1
    assert registration["endpoints"] == [f"LAB://127.0.0.1:{cluster.brokers[1].port}",
                                         f"PLAINTEXT://127.0.0.1:{cluster.brokers[1].kafka_port}"]
    assert registration["listener_security_protocol_map"] == {"LAB": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
    assert isinstance(registration["timestamp"], str) and registration["timestamp"].isdigit()
    assert cluster.zk.exists(L.broker_path(1)).ephemeralOwner != 0

    topic = json.loads(cluster.zk.get(L.topic_path("t"))[0])
    assert topic["version"] == 1
    assert set(topic["partitions"]) == {"0", "1", "2", "3"}  # string keys
    assert all(isinstance(r, list) and all(isinstance(b, int) for b in r) for r in topic["partitions"].values())

    state = json.loads(cluster.zk.get(L.partition_state_path("t", 0))[0])
    assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
    assert state["leader"] in (1, 2, 3) and state["leader_epoch"] == 0 and isinstance(state["isr"], list)

    controller = json.loads(cluster.zk.get(L.CONTROLLER)[0])
    assert set(controller) == {"version", "brokerid", "timestamp"} and controller["brokerid"] in (1, 2, 3)


def test_fetch_returns_exactly_what_was_produced_from_any_offset(cluster):
    _start_producer(cluster, rate=200)
    _wait_produced(cluster, at_least=50)
    cluster.producer.stop()
    cluster.producer = None
    produced = _produced(cluster.dir)
    for partition in range(PARTITIONS):
        log = _fetch_all(cluster, partition)
        assert log == produced[partition]  # same offsets, same values, same order
        assert [o for o, _ in log] == list(range(len(log)))
        client = _client(cluster, leaders(cluster.zk, "t")[partition])
        assert client.call("ListOffsets", topic="t", partition=partition, which="latest")["offset"] == len(log)
        assert client.call("ListOffsets", topic="t", partition=partition, which="earliest")["offset"] == 0
        for start in (1, len(log) // 2, len(log) - 1):
            got = client.call("Fetch", topic="t", partition=partition, offset=start, max_records=10)["records"]
            assert [(r["offset"], r["value"]) for r in got] == log[start:start + 10]


def _assert_the_new_leaders_serve_what_was_produced(cluster, more: int) -> None:
    """Once the producer has written `more` records after a leader went (it followed the move), stop it: every
    partition read back from its leader now is what was produced, no gap, no duplicate."""
    _wait_produced(cluster, at_least=len(_produced(cluster.dir)[0]) + more)
    cluster.producer.stop()
    cluster.producer = None
    produced = _produced(cluster.dir)
    wait_for_metadata(cluster.zk, "t", PARTITIONS)
    for partition in range(PARTITIONS):
        assert _fetch_all(cluster, partition) == produced[partition]


def test_a_killed_broker_leaves_after_the_session_timeout_and_loses_no_message(cluster):
    _start_producer(cluster, rate=100)
    _wait_produced(cluster, at_least=20)
    before = leaders(cluster.zk, "t")
    victim = before[0]
    gone = threading.Event()

    def watch(event):
        if event.type == "DELETED":
            gone.set()

    cluster.zk.exists(L.broker_path(victim), watch=watch)
    cluster.brokers[victim].kill()
    killed_at = time.monotonic()
    assert cluster.zk.exists(L.broker_path(victim)) is not None  # a crash says nothing: the node stays
    assert gone.wait(60)
    # Not before the session could expire (half the timeout is a safe lower bound:
    # the session was last refreshed at most a third of the timeout before the kill).
    assert time.monotonic() - killed_at >= SESSION_MS / 1000 / 2
    after = wait_for_leaders(cluster.zk, "t", PARTITIONS, exclude=frozenset({victim}))
    moved = [p for p, b in before.items() if b == victim]
    assert moved and all(after[p] != victim for p in moved)
    _assert_the_new_leaders_serve_what_was_produced(cluster, more=20)


def test_bad_requests_get_errors_and_the_broker_keeps_serving(cluster):
    leader = leaders(cluster.zk, "t")[0]
    client = _client(cluster, leader)
    with pytest.raises(WireError) as info:
        client.call("Fetch", topic="nope", partition=0, offset=0)
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(WireError) as info:
        client.call("Fetch", topic="t", partition=99, offset=0)
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(WireError) as info:
        client.call("Fetch", topic="t", partition=0, offset=10**6)
    assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(WireError) as info:
        client.call("Produce", topic="t", partition=0, values="not a list")
    assert info.value.code is ErrorCode.INVALID_REQUEST
    host, port = broker_addresses(cluster.zk)[leader]
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(struct.pack(">I", 9) + b"not json!")
        assert read_frame(raw)["error"] == "INVALID_REQUEST"
        assert raw.recv(10) == b""
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(struct.pack(">I", 50_000_000))
        assert read_frame(raw)["error"] == "INVALID_REQUEST"
    assert client.call("Produce", topic="t", partition=0, values=["still", "serving"])["base_offset"] == 0
    follower = next(b for b in (1, 2, 3) if b != leader)
    with pytest.raises(WireError) as info:
        _client(cluster, follower).call("Produce", topic="t", partition=0, values=["x"])
    assert info.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_gracefully_stopped_broker_leaves_at_once(cluster):
    assert cluster.brokers[2].stop() == 0
    cluster.zk.sync(L.BROKER_IDS)
    # It closed its session before exiting, and the node went with the session.
    assert cluster.zk.exists(L.broker_path(2)) is None
    assert wait_for_leaders(cluster.zk, "t", PARTITIONS, exclude=frozenset({2}))


def test_a_broker_stopped_while_the_producer_writes_hands_over_every_record(cluster):
    """A graceful stop stops leading before the registration goes: its successor opens the shared log with every
    record the stopped broker acknowledged, and serves each at the offset it was acknowledged at. (In the other
    order the stopped broker appended after its successor had counted the file: a consumer found itself past the
    end of the log, and the successor's own records were read at wrong offsets.)"""
    _start_producer(cluster, rate=400)
    _wait_produced(cluster, at_least=50)
    before = leaders(cluster.zk, "t")
    victim = before[0]
    assert cluster.brokers[victim].stop() == 0
    after = wait_for_leaders(cluster.zk, "t", PARTITIONS, exclude=frozenset({victim}))
    assert all(after[p] != victim for p, b in before.items() if b == victim)
    _assert_the_new_leaders_serve_what_was_produced(cluster, more=50)


def test_cluster_up_serves_until_ctrl_c_and_leaves_nothing(tmp_path):
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from lab_cluster.leaks import find_leaks

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "cluster", "up", "--backend", "embedded",
                             "--brokers", "2", "--topic", "t:2", "--rate", "50", "--dir", str(tmp_path)],
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo), COLUMNS="200"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        brokers, kafka_bootstrap = {}, None
        for line in proc.stdout:
            m = re.match(r"\s+broker (\d+): 127\.0\.0\.1:(\d+) \(Kafka protocol: \d+\) leads t partitions \[(.*)\]",
                         line)
            if m:
                brokers[int(m.group(1))] = (int(m.group(2)), [int(p) for p in m.group(3).split(",") if p.strip()])
            if line.startswith("kafka bootstrap: "):
                kafka_bootstrap = line.removeprefix("kafka bootstrap: ").strip()
            if line.startswith("Ctrl-C"):
                break
        assert len(brokers) == 2, proc.stderr.read()
        assert kafka_bootstrap and len(kafka_bootstrap.split(",")) == 2
        port, led = brokers[1]
        client = WireClient("127.0.0.1", port)
        deadline = time.monotonic() + 30
        records = []
        while not records and time.monotonic() < deadline:
            records = client.call("Fetch", topic="t", partition=led[0], offset=0, max_wait_ms=500)["records"]
        assert records and records[0]["value"] == f"t/{led[0]}/0"  # the producer is producing
        client.close()
        # a real Kafka client on the printed Kafka listeners reads the same log
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition("t", led[0])])
            consumer.seek(TopicPartition("t", led[0]), 0)
            deadline, first = time.monotonic() + 30, []
            while not first and time.monotonic() < deadline:
                first = consumer.poll(timeout_ms=500).get(TopicPartition("t", led[0]), [])
            assert first and first[0].offset == 0 and first[0].value == f"t/{led[0]}/0".encode()
        finally:
            consumer.close()
    finally:
        interrupt(proc)
    assert "Traceback" not in proc.stderr.read()
    assert find_leaks(proc.pid) == []  # ZooKeeper, both brokers and the producer are gone
    assert (tmp_path / "traces" / "producer.jsonl").exists()  # --dir keeps the logs and traces


def test_cluster_up_rejects_a_bad_topic_spec():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-m", "experiments", "cluster", "up", "--topic", "t"], cwd=repo,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--topic 't' is not NAME:PARTITIONS" in result.stderr


@pytest.mark.parametrize("policy, expected", [("earliest", 0), ("latest", 5)])
def test_a_fetch_past_the_leaders_log_resets_by_auto_offset_reset(cluster, policy, expected):
    """As Kafka's consumer (`FetchCollector`): OFFSET_OUT_OF_RANGE resets the position by the policy, reported,
    and the next fetch reads from there; no error reaches the poll loop (a KIP-848 member's poll thread once
    died of it, in a broker bounce where the new leader held less of the log)."""
    from modern_coord.fetcher import Fetcher

    produce_values(cluster, 5, "reset")
    bootstrap = [("127.0.0.1", int(a.rsplit(":", 1)[1])) for a in cluster.bootstrap.split(",")]
    resets, processed = [], []
    fetcher = Fetcher(bootstrap, "reset-test", max_records=100, timeout_s=5, offset_reset=policy,
                      on_reset=lambda tp, was, now: resets.append((tp, was, now)))
    try:
        assert fetcher.refresh_metadata()
        position = fetcher.fetch(("t", 0), 10**6, lambda: False, lambda tp, o: processed.append(o))
        assert position == expected and resets == [(("t", 0), 10**6, expected)] and processed == []
        position = fetcher.fetch(("t", 0), position, lambda: False, lambda tp, o: processed.append(o))
        assert processed == list(range(expected, 5)) and position == 5
    finally:
        fetcher.close()
