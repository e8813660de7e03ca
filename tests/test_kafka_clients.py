"""Real Kafka clients against the lab's brokers, over Kafka's binary protocol (`lab_cluster/kafka_listener/`).

kafka-python's `KafkaConsumer`/`KafkaProducer` and confluent-kafka's `Consumer` (librdkafka) are pointed at the
brokers' Kafka listeners and must behave as against Kafka: join a group, get every partition, read exactly what
was produced, commit, resume from the commit, split and rebalance, be fenced; a lab consumer in the same group
agrees with them on the assignment.
"""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from conftest import PARTITIONS, trace_events, wait_for
from conftest import produce_values as produce

from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import recv_exactly

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse  # noqa: E402
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse  # noqa: E402
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse  # noqa: E402

logging.getLogger("kafka").setLevel(logging.ERROR)  # kafka-python logs every dropped connection at WARNING

ALL = {("t", p) for p in range(PARTITIONS)}
FAST_KP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "auto_offset_reset": "earliest",
           "enable_auto_commit": False, "retry_backoff_ms": 100}
FAST_RD = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
           "enable.auto.commit": False, "log_level": 3}


def kafka_bootstrap(cluster) -> str:
    return ",".join(f"127.0.0.1:{b.kafka_port}" for b in cluster.brokers.values())


def consume_kp(consumer: KafkaConsumer, want: int, timeout_s: float = 60) -> list[tuple[int, int, str]]:
    got: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=200).items():
            got += [(tp.partition, r.offset, r.value.decode()) for r in records]
    return got


def consume_rd(consumer, want: int, timeout_s: float = 60) -> list[tuple[int, int, str]]:
    got: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.offset(), message.value().decode()))
    return got


_OPEN: list = []  # every client a test opened: closed after it, whatever happened (`close_clients`)


@pytest.fixture(autouse=True)
def close_clients(cluster):
    """Closes them before the cluster stops (a client closing against stopped brokers waits out its timeouts)."""
    yield
    while _OPEN:
        client = _OPEN.pop()
        try:
            client.close()
        except Exception:  # closed already, or fenced
            pass


def kp_consumer(cluster, group: str, name: str, **overrides) -> KafkaConsumer:
    consumer = KafkaConsumer("t", bootstrap_servers=kafka_bootstrap(cluster), group_id=group, client_id=name,
                             **{**FAST_KP, **overrides})
    _OPEN.append(consumer)
    return consumer


def rd_consumer(cluster, group: str, name: str, **overrides):
    config = {"bootstrap.servers": kafka_bootstrap(cluster), "group.id": group, "client.id": name, **FAST_RD,
              **overrides}
    if config.get("group.protocol") == "consumer":  # KIP-848: the session and heartbeat are the broker's settings
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            config.pop(key, None)
    consumer = confluent_kafka.Consumer(config)
    _OPEN.append(consumer)
    consumer.subscribe(["t"])
    return consumer


def rd_assignment(consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def _values(got) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for partition, _, value in sorted(got):
        out.setdefault(partition, []).append(value)
    return out


# -- raw requests, encoded by kafka-python's classes --------------------------------------------------
def kafka_call(port: int, request, version: int, response_cls, correlation_id: int = 1):
    """Send one request on a new connection and decode the answer (None if the broker closed the connection)."""
    request.with_header(correlation_id=correlation_id, client_id="raw-test")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        return _read_answer(sock, response_cls, version)


def _read_answer(sock, response_cls, version):
    head = _recv(sock, 4)
    if not head:
        return None
    (size,) = struct.unpack(">i", head)
    return response_cls.decode(_recv(sock, size), version=version, header=True)


def _recv(sock, n: int) -> bytes:
    return recv_exactly(sock, n) or b""  # b"": the broker closed the connection


# -- one real client at a time ---------------------------------------------------------------------
def test_kafka_python_consumes_exactly_what_was_produced_commits_and_a_restart_resumes(cluster):
    written = produce(cluster, 5, "a")
    consumer = kp_consumer(cluster, "kp", "kp-1")
    got = consume_kp(consumer, 5 * PARTITIONS)
    assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == ALL
    assert _values(got) == written  # every record once, in offset order, with its content
    consumer.commit()
    assert {p: consumer.committed(TopicPartition("t", p)) for p in range(PARTITIONS)} == {
        p: 5 for p in range(PARTITIONS)}
    consumer.close()

    more = produce(cluster, 3, "b")
    again = kp_consumer(cluster, "kp", "kp-2")
    got = consume_kp(again, 3 * PARTITIONS)
    assert _values(got) == more  # resumed from the committed offsets: nothing of the first batch again
    assert min(offset for _, offset, _ in got) == 5
    again.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_librdkafka_consumes_exactly_what_was_produced_commits_and_a_restart_resumes(cluster, protocol):
    """`consumer`: KIP-848's protocol (ConsumerGroupHeartbeat v1, topics by id, commits under the member epoch)."""
    written = produce(cluster, 5, "a")
    consumer = rd_consumer(cluster, "rd", "rd-1", **{"group.protocol": protocol})
    got = consume_rd(consumer, 5 * PARTITIONS)
    assert rd_assignment(consumer) == ALL
    assert _values(got) == written
    committed = consumer.commit(asynchronous=False)
    assert {(tp.partition, tp.offset) for tp in committed} == {(p, 5) for p in range(PARTITIONS)}
    consumer.close()

    more = produce(cluster, 3, "b")
    again = rd_consumer(cluster, "rd", "rd-2", **{"group.protocol": protocol})
    got = consume_rd(again, 3 * PARTITIONS)
    assert _values(got) == more
    again.close()

    def group_apis() -> set[str]:
        apis = {e["f"]["api"] for b in cluster.brokers
                for e in trace_events(cluster.dir, f"broker-{b}", "kafka_request")
                if e["f"]["client"] in ("rd-1", "rd-2")}
        return {"JoinGroup", "SyncGroup", "Heartbeat", "ConsumerGroupHeartbeat"} & apis
    # the brokers write their traces as they go, buffered: wait until what they served is on disk
    expected = {"ConsumerGroupHeartbeat"} if protocol == "consumer" else {"JoinGroup", "SyncGroup", "Heartbeat"}
    wait_for(lambda: group_apis() >= expected, timeout_s=30, what="the brokers' traces of the group requests")
    assert group_apis() == expected, sorted({(e["f"]["client"], e["f"]["api"]) for b in cluster.brokers
                                            for e in trace_events(cluster.dir, f"broker-{b}", "kafka_request")})


def test_a_lab_kip848_consumer_and_librdkafka_share_a_consumer_group_and_one_takes_all_when_the_other_leaves(
        cluster):
    from modern_coord.config import ConsumerConfig
    from modern_coord.kip848_consumer import Kip848Consumer

    trace = TraceRecorder(cluster.dir, trial="t", design="consumer-848", actor="lab-1")
    lab = Kip848Consumer(ConsumerConfig.from_dict({
        "group.id": "kip848", "bootstrap.servers": cluster.bootstrap, "client.id": "lab-1",
        "group.protocol": "consumer", "auto.offset.reset": "earliest"}), ["t"], trace, name="lab-1").start()
    rd = rd_consumer(cluster, "kip848", "rd-1", **{"group.protocol": "consumer"})
    try:
        def split():
            consume_rd(rd, 1, timeout_s=0.1)
            mine, theirs = set(lab.assignment()), rd_assignment(rd)
            return mine and theirs and not (mine & theirs) and mine | theirs == ALL
        wait_for(split, timeout_s=90, what="the coordinator's target split between the lab and librdkafka")
        rd.close()  # a leave heartbeat (epoch -1): the coordinator gives the lab consumer everything

        wait_for(lambda: set(lab.assignment()) == ALL, timeout_s=60, what="the lab consumer to own every partition")
    finally:
        lab.stop()
        trace.close()


def test_a_kafka_python_producer_writes_into_the_lab_logs_and_a_lab_consumer_reads_it(cluster):
    from conftest import _fetch_all

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks=1, linger_ms=5)
    _OPEN.append(producer)
    futures = [producer.send("t", value=f"kp/{i}".encode(), partition=i % PARTITIONS) for i in range(20)]
    producer.flush()
    offsets = {(f.get(timeout=10).partition, f.get(timeout=10).offset) for f in futures}
    producer.close()
    assert offsets == {(p, o) for p in range(PARTITIONS) for o in range(20 // PARTITIONS)}
    for p in range(PARTITIONS):  # read back through the lab's JSON Fetch: the same log
        assert [v for _, v in _fetch_all(cluster, p)] == [f"kp/{i}" for i in range(20) if i % PARTITIONS == p]


def test_a_record_the_lab_logs_cannot_hold_is_refused_not_changed(cluster):
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks=1, retries=0)
    _OPEN.append(producer)
    with pytest.raises(KafkaError) as refused:
        producer.send("t", key=b"k", value=b"v", partition=0).get(timeout=10)
    assert "InvalidRecord" in type(refused.value).__name__ or "INVALID_RECORD" in str(refused.value).upper()
    producer.close()


# -- groups of real clients ------------------------------------------------------------------------
class KpPoller:
    """A kafka-python consumer polled back to back in a thread of its own, as an application's poll loop (and the
    lab's member, `kafka_clients/kafka_python_member.py`) polls it.

    A test that polls it in turn with other clients leaves gaps between its polls, and kafka-python 3.0.12 throws
    away a join that completes in such a gap and joins again (the race shown by
    `test_kafka_python_throws_away_a_join_that_completed_between_two_polls...`); as the group's leader it then
    starts a round each time, and a group can rebalance for as long as the test waits."""

    def __init__(self, consumer: KafkaConsumer):
        import threading

        self.consumer = consumer
        self._lock = threading.Lock()
        self._got: list[tuple[int, int, str]] = []
        self._assigned: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kp-poller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self.consumer.poll(timeout_ms=100)
            with self._lock:
                self._got += [(tp.partition, r.offset, r.value.decode()) for tp, rs in batch.items() for r in rs]
                self._assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def got(self) -> list[tuple[int, int, str]]:
        with self._lock:
            return list(self._got)

    def assignment(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._assigned)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "kafka-python's poll did not return within 30 s"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_real_clients_split_the_partitions_and_one_takes_all_when_the_other_leaves(cluster, strategy):
    kp_strategy = {"range": kafka.coordinator.assignors.range.RangePartitionAssignor,
                   "cooperative-sticky": kafka.coordinator.assignors.sticky.sticky_assignor.StickyPartitionAssignor}
    if strategy == "cooperative-sticky":
        pytest.importorskip("kafka.coordinator.assignors.cooperative_sticky")
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        kp_strategy[strategy] = CooperativeStickyAssignor
    group = f"pair-{strategy}"
    a = KpPoller(kp_consumer(cluster, group, "kp-a", partition_assignment_strategy=[kp_strategy[strategy]]))
    b = rd_consumer(cluster, group, "rd-b", **{"partition.assignment.strategy": strategy})
    try:
        def split():
            b.poll(0.1)
            mine, theirs = a.assignment(), rd_assignment(b)
            return mine and theirs and not (mine & theirs) and mine | theirs == ALL
        wait_for(split, timeout_s=90, what=f"kafka-python and librdkafka to split the partitions ({strategy})")
        b.close()  # LeaveGroup: the coordinator rebalances at once
        wait_for(lambda: a.assignment() == ALL, timeout_s=60,
                 what="kafka-python to take every partition after librdkafka left")
    finally:
        a.stop()
        a.consumer.close()


def test_a_lab_consumer_kafka_python_and_librdkafka_in_one_group_agree_and_a_leave_rebalances_all(cluster):
    from modern_coord.config import ConsumerConfig
    from modern_coord.consumer import ModernConsumer

    partitions = {("t", p) for p in range(PARTITIONS)}
    trace = TraceRecorder(cluster.dir, trial="t", design="classic", actor="lab-1")
    lab = ModernConsumer(ConsumerConfig.from_dict({
        "group.id": "mixed", "bootstrap.servers": cluster.bootstrap, "client.id": "lab-1",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range"}), ["t"], trace, name="lab-1").start()
    kp = KpPoller(kp_consumer(cluster, "mixed", "kp-1"))
    rd = rd_consumer(cluster, "mixed", "rd-1", **{"partition.assignment.strategy": "range"})
    got_rd = []
    try:
        def three_way():
            got_rd.extend(consume_rd(rd, 1, timeout_s=0.1))
            views = [set(lab.assignment()), kp.assignment(), rd_assignment(rd)]
            return all(views) and sum(len(v) for v in views) == len(partitions) and set().union(*views) == partitions
        wait_for(three_way, timeout_s=90, what="the three members to agree on a range assignment")
        written = produce(cluster, 4, "m")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got_rd.extend(consume_rd(rd, 1, timeout_s=0.1))
            by_lab = {(e["partition"], e["offset"]) for e in trace_events(cluster.dir, "lab-1", "processed")}
            seen = by_lab | {(p, o) for p, o, _ in kp.got() + got_rd}
            if seen >= {(p, o) for p in written for o in range(4)}:
                break
        assert seen >= {(p, o) for p in written for o in range(4)}  # every produced message was processed

        lab.stop()  # its LeaveGroup rebalances the other two, who take its partitions between them

        def two_way():
            got_rd.extend(consume_rd(rd, 1, timeout_s=0.1))
            mine, theirs = kp.assignment(), rd_assignment(rd)
            return mine and theirs and mine | theirs == partitions and not (mine & theirs)
        wait_for(two_way, timeout_s=60, what="kafka-python and librdkafka to share the lab consumer's partitions")
    finally:
        lab.stop()
        trace.close()
        kp.stop()
        kp.consumer.close()
        rd.close()


# -- fencing ----------------------------------------------------------------------------------------
def test_a_commit_under_an_old_generation_or_an_unknown_member_is_fenced_as_by_kafka(cluster):
    from modern_coord.lookup import find_coordinator

    a = kp_consumer(cluster, "fence", "kp-a")
    wait_for(lambda: a.poll(timeout_ms=100) is not None and a.assignment(), timeout_s=60, what="kp-a's assignment")
    old = a._coordinator._generation  # (generation id, member id) kafka-python holds
    b = kp_consumer(cluster, "fence", "kp-b")

    def both():
        a.poll(timeout_ms=100)
        b.poll(timeout_ms=100)
        return a.assignment() and b.assignment() and a._coordinator._generation.generation_id > old.generation_id
    wait_for(both, timeout_s=60, what="a second generation with both members")
    found = find_coordinator("127.0.0.1", cluster.brokers[1].port, "fence", "test")
    coordinator_kafka_port = cluster.brokers[found["node_id"]].kafka_port

    def commit(generation: int, member: str) -> int:
        request = OffsetCommitRequest[7](group_id="fence", generation_id_or_member_epoch=generation,
                                         member_id=member, group_instance_id=None, topics=[
                                             OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                                                 OffsetCommitRequest.OffsetCommitRequestTopic
                                                 .OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                               committed_leader_epoch=-1,
                                                                               committed_metadata="")])])
        answer = kafka_call(coordinator_kafka_port, request, 7, OffsetCommitResponse)
        return answer.topics[0].partitions[0].error_code
    assert commit(old.generation_id, old.member_id) == 22  # ILLEGAL_GENERATION: the group moved on
    assert commit(a._coordinator._generation.generation_id, "no-such-member") == 25  # UNKNOWN_MEMBER_ID

    b.close()
    a.close()


def test_librdkafka_static_member_is_fenced_by_a_second_instance_with_its_id(cluster):
    first = rd_consumer(cluster, "static", "rd-1", **{"group.instance.id": "i-1"})
    wait_for(lambda: consume_rd(first, 1, timeout_s=0.1) is not None and rd_assignment(first) == ALL,
             timeout_s=60, what="the first instance's assignment")
    second = rd_consumer(cluster, "static", "rd-2", **{"group.instance.id": "i-1"})
    wait_for(lambda: consume_rd(second, 1, timeout_s=0.1) is not None and rd_assignment(second) == ALL,
             timeout_s=60, what="the second instance to take the identity over")
    errors = []
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:  # the first learns it is fenced at its next heartbeat
        message = first.poll(0.2)
        if message is not None and message.error() is not None:
            errors.append(message.error())
    # librdkafka makes FENCED_INSTANCE_ID fatal for the consumer, as Java's consumer throws FencedInstanceIdException
    assert errors and errors[0].code() == confluent_kafka.KafkaError._FATAL
    assert "Static consumer fenced by other consumer with same group.instance.id" in errors[0].str()
    second.close()
    first.close()


# -- the listener's own rules -----------------------------------------------------------------------
def test_api_versions_advertises_the_profile_and_answers_an_unknown_version_with_unsupported_version(cluster):
    from lab_cluster.kafka_listener.messages import SERVED

    port = cluster.brokers[1].kafka_port
    answer = kafka_call(port, ApiVersionsRequest[3](client_software_name="raw", client_software_version="1"), 3,
                        ApiVersionsResponse)
    assert answer.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} == {
        (s.key, s.min_version, s.max_version) for s in SERVED.values()}
    too_new = kafka_call(port, ApiVersionsRequest[4](client_software_name="raw", client_software_version="1"), 4,
                         ApiVersionsResponse)
    assert too_new.error_code == 35  # UNSUPPORTED_VERSION, with ApiVersions' own range to retry within (KIP-511)
    assert [(k.api_key, k.min_version, k.max_version) for k in too_new.api_keys] == [(18, 0, 3)]


def test_unserved_versions_and_malformed_frames_close_the_connection_and_the_broker_keeps_serving(cluster):
    port = cluster.brokers[1].kafka_port
    # Metadata v13 is not advertised: Kafka closes the connection for a version it has not enabled
    assert kafka_call(port, MetadataRequest[13](topics=None), 13, MetadataResponse) is None
    for junk in (b"\x00\x00\x00\x03abc",  # shorter than a request header
                 struct.pack(">i", 8) + struct.pack(">hhi", 57, 0, 1),  # an API the lab does not serve
                 struct.pack(">i", 10) + struct.pack(">hhih", 3, 1, 1, 100),  # a header that lies about its length
                 struct.pack(">i", -5)):  # a negative size
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(junk)
            assert _recv(sock, 4) == b""  # closed, nothing answered
    answer = kafka_call(port, MetadataRequest[1](topics=None), 1, MetadataResponse)  # still serving
    assert {t.name for t in answer.topics} >= {"t"}
    assert {b.port for b in answer.brokers} == {b.kafka_port for b in cluster.brokers.values()}
    wait_for(lambda: len(trace_events(cluster.dir, "broker-1", "kafka_connection_closed")) == 5, timeout_s=10,
             what="the five closed connections in the broker's trace")
    reasons = [e["f"]["reason"] for e in trace_events(cluster.dir, "broker-1", "kafka_connection_closed")]
    assert sum("not served" in r for r in reasons) == 2 and sum("malformed" in r for r in reasons) == 1


def _produce_raw(port: int, topic: str, records: bytes, acks: int = 1):
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

    request = ProduceRequest[7](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    return kafka_call(port, request, 7, ProduceResponse)


def _batch(*values: bytes) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(2, 0, batch_size=1 << 16)
    for value in values:
        builder.append(0, None, value, [])
    builder.close()
    return bytes(builder.buffer())


def test_produce_refuses_internal_topics_and_corrupt_batches_per_partition_as_kafka_does(cluster):
    from lab_cluster.broker.admin import leaders

    port = cluster.brokers[leaders(cluster.zk, "t")[0]].kafka_port
    answer = _produce_raw(port, "__consumer_offsets", _batch(b"x"))
    assert answer.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    corrupt = bytearray(_batch(b"v1", b"v2"))
    corrupt[-3] ^= 0xFF  # the batch's CRC no longer matches
    assert _produce_raw(port, "t", bytes(corrupt)).responses[0].partition_responses[0].error_code == 2
    assert _produce_raw(port, "t", _batch(b"fine")).responses[0].partition_responses[0].error_code == 0
    # acks=0 wants no answer; a failed acks=0 produce closes the connection so the producer refreshes metadata
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        from kafka.protocol.producer.produce import ProduceRequest
        request = ProduceRequest[7](transactional_id=None, acks=0, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="__consumer_offsets", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=_batch(b"x"))])])
        request.with_header(correlation_id=9, client_id="raw-test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        assert _recv(sock, 4) == b""


def test_list_offsets_by_time_finds_the_first_record_at_or_after_it(cluster):
    produce(cluster, 3, "early")
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cluster, 2, "late")
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster))
    _OPEN.append(consumer)
    found = consumer.offsets_for_times({TopicPartition("t", p): middle_ms for p in range(PARTITIONS)})
    assert {tp.partition: o.offset for tp, o in found.items()} == {p: 3 for p in range(PARTITIONS)}
    assert consumer.offsets_for_times({TopicPartition("t", 0): int(time.time() * 1000) + 60_000}) == {
        TopicPartition("t", 0): None}  # nothing that late: offset -1, which kafka-python reports as None


def test_a_consumer_group_heartbeat_v0_lets_the_coordinator_make_the_member_id(cluster):
    import datetime
    import io

    from kafka.protocol.api_header import RequestHeader
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
    from kio.schema.consumer_group_heartbeat.v0.response import ConsumerGroupHeartbeatResponse
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i32, i32Timedelta

    from modern_coord.lookup import find_coordinator

    found = find_coordinator("127.0.0.1", cluster.brokers[1].port, "cgh-v0", "test")
    while found.get("error_code"):
        time.sleep(0.2)
        found = find_coordinator("127.0.0.1", cluster.brokers[1].port, "cgh-v0", "test")
    port = cluster.brokers[found["node_id"]].kafka_port
    body = io.BytesIO()
    entity_writer(ConsumerGroupHeartbeatRequest)(body, ConsumerGroupHeartbeatRequest(
        group_id="cgh-v0", member_id="", member_epoch=i32(0),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), subscribed_topic_names=("t",),
        topic_partitions=()))
    header = RequestHeader(request_api_key=68, request_api_version=0, correlation_id=5, client_id="raw-test")
    payload = bytes(header.encode(flexible=True)) + body.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv(sock, 4))
        frame = _recv(sock, size)
    assert struct.unpack(">i", frame[:4])[0] == 5  # the correlation id, then the header's tagged fields
    response, _ = entity_reader(ConsumerGroupHeartbeatResponse)(memoryview(frame), 5)
    assert int(response.error_code) == 0 and response.member_id and response.member_epoch == 1
    assert sorted(p for tp in response.assignment.topic_partitions for p in tp.partitions) == list(range(PARTITIONS))


def test_kafka_python_throws_away_a_join_that_completed_between_two_polls_and_its_leader_starts_a_round(cluster):
    """kafka-python 3.0.12's race behind its extra rounds (`experiments/catalogue/herd.py`, `_like_the_labs_consumer`).

    The leader `a` polls with a 1 ms timeout until a poll returns with its JoinGroup still in flight, then stops
    polling while the join and sync complete on kafka-python's IO thread. Its next poll finds the join task done
    and sends a new JoinGroup instead of taking the result: never assigned in that generation, and the
    coordinator, seeing its leader rejoin a Stable group, starts another round."""
    import threading

    a = kp_consumer(cluster, "race", "a")
    wait_for(lambda: a.poll(timeout_ms=100) is not None and a.assignment() == {TopicPartition(*tp) for tp in ALL},
             what="a alone to own every partition")
    coordinator = a._coordinator  # kafka-python's ConsumerCoordinator: no public view of its join in flight
    first = coordinator._generation.generation_id
    b = kp_consumer(cluster, "race", "b")
    stop = threading.Event()

    def poll_b() -> None:
        while not stop.is_set():
            b.poll(timeout_ms=100)
    poller = threading.Thread(target=poll_b)
    poller.start()
    try:
        # a hears of b's join from its heartbeat; its JoinGroup goes out and the 1 ms poll returns before the answer
        wait_for(lambda: a.poll(timeout_ms=1) is not None and coordinator._join_task is not None, timeout_s=30,
                 what="a poll of a's that returned with its JoinGroup in flight")
        task = coordinator._join_task
        wait_for(lambda: task.is_done, timeout_s=30, what="a's join and sync to complete with no poll running")
        assert task.exception is None
        joined = coordinator._generation.generation_id
        assert joined == first + 1
        for _ in range(50):  # the next polls: a new JoinGroup, and, a being the leader, a new round
            a.poll(timeout_ms=100)
    finally:
        stop.set()
        poller.join()

    def leader_rejoined() -> list[dict]:
        return [e for b_ in cluster.brokers for e in trace_events(cluster.dir, f"broker-{b_}", "group_state")
                if e["f"].get("group") == "race" and e["f"].get("from") == "Stable"
                and e["f"].get("reason", "").startswith("member a-") and e["f"]["reason"].endswith("rejoined")]
    wait_for(lambda: leader_rejoined(), timeout_s=30, what="the coordinator's new round on a's rejoin")
    assert coordinator._generation.generation_id > joined  # the generation a joined was never taken up
