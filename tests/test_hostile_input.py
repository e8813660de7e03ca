"""Hostile but well-framed input on both of a broker's listeners, generated (`experiments/bench/hostile_frames.py`).

One broker in this process, with every plug-in the lab's families use (the
group coordinator, RocketMQ's and TubeMQ's services), on the session's
ZooKeeper. Hypothesis draws the generators' `Random`, so a failing example
is a seed it shrinks and prints. The rules checked are each listener's:

- the JSON listener answers every well-framed request with one of Kafka's
  error codes, never UNKNOWN_SERVER_ERROR (a handler that broke on the input);
- the Kafka listener answers, or closes the connection because the request
  does not decode (as Kafka does), never because a handler broke;
- neither holds a request it is not meant to hold: JoinGroup and SyncGroup
  wait for the rebalance and a Fetch at the log's end waits its max_wait_ms,
  as Kafka's do; anything else unanswered within 10 s is a hang.

The socket-level volume (tens of thousands of frames at a broker process,
crashes, hangs, memory) is the benchmark `bench hostile`.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import uuid

import pytest
from conftest import kazoo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.bench.hostile_frames import (
    EXAMPLES,
    HELD_BY_DESIGN,
    hostile_value,
    kafka_frame,
    kafka_seeds,
    lab_request,
)
from experiments.engine.families import BROKER_PLUGINS, FAMILIES
from lab_cluster.broker.admin import create_topic, wait_for_metadata
from lab_cluster.broker.broker import Broker
from lab_cluster.java_hash import java_string_hash
from lab_cluster.kafka_listener.messages import SERVED
from lab_cluster.kafka_listener.server import ConnectionMustClose
from lab_cluster.wire import Channel, ErrorCode

PATIENCE_S = 10  # a guard against a hang, not a speed assertion
EXAMPLES_EACH = 300


@pytest.fixture(scope="module")
def broker(zk, tmp_path_factory):
    chroot = f"/hostile/{uuid.uuid4().hex[:10]}"
    admin = kazoo(zk.connect)
    admin.ensure_path(chroot)
    b = Broker(1, zk.connect + chroot, str(tmp_path_factory.mktemp("hostile")), plugins=BROKER_PLUGINS,
               config={"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}).start()
    client = kazoo(zk.connect + chroot)
    create_topic(client, "t", 2, [1], replication_factor=1)
    wait_for_metadata(client, "t", 2)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="hostile")
    b.pool = pool
    ours, theirs = socket.socketpair()  # the connection a request arrives on (RocketMQ's APIs key clients by it)
    b.channel = Channel(ours, ("127.0.0.1", 0))
    yield b
    pool.shutdown(wait=False, cancel_futures=True)
    ours.close()
    theirs.close()
    b.stop()
    for c in (client, admin):
        c.stop()
        c.close()
    admin2 = kazoo(zk.connect)
    admin2.delete(chroot, recursive=True)
    admin2.stop()
    admin2.close()


def _within_patience(broker, api: str, call):
    """`call()`'s result, or None where it is still held by design after PATIENCE_S; fails on a hang."""
    future = broker.pool.submit(call)
    try:
        return future.result(timeout=PATIENCE_S)
    except concurrent.futures.TimeoutError:
        assert api in HELD_BY_DESIGN, f"{api} was not answered within {PATIENCE_S} s"
        return None


# -- the generators themselves -------------------------------------------------------------------------
def test_every_api_a_broker_with_every_plug_in_serves_has_an_example(broker):
    assert set(EXAMPLES) == set(broker.server.apis)


@settings(deadline=None)  # a test asserts no time
@given(st.randoms(use_true_random=False))
def test_hostile_values_are_json_and_requests_keep_the_lab_s_framing(rng):
    json.dumps(hostile_value(rng))
    request = lab_request(rng)
    assert {"api", "version", "correlation_id", "client_id"} <= set(request)
    json.dumps(request)


# -- the JSON listener ----------------------------------------------------------------------------------
KNOWN_CODES = {int(c) for c in ErrorCode} - {int(ErrorCode.UNKNOWN_SERVER_ERROR)}


@settings(max_examples=EXAMPLES_EACH, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False))
def test_the_json_listener_answers_every_hostile_request_with_a_known_error(broker, rng):
    request = json.loads(json.dumps(lab_request(rng)))  # as the server reads it off the wire
    answer = _within_patience(broker, str(request["api"]), lambda: broker.server.dispatch(request, broker.channel))
    if answer is None:
        return
    assert answer["error_code"] in KNOWN_CODES, (request, answer)
    json.dumps(answer)  # it can be sent


BAD_TOPIC = {"topic": [1, "a", None], "partition": 0}  # the shape that once broke Fetch and ListOffsets


@pytest.mark.parametrize(("api", "body"), [
    ("Fetch", {**BAD_TOPIC, "offset": 0}),
    ("Fetch", {"topic": {"t": 0}, "partition": 0, "offset": 0}),
    ("Fetch", {"topic": "t", "partition": [0], "offset": 0}),
    ("Fetch", {"topic": "t", "partition": True, "offset": 0}),
    ("Fetch", {"topic": "t", "partition": 0, "offset": "0"}),
    ("Fetch", {"topic": "t", "partition": 0, "offset": 0, "max_wait_ms": [1]}),
    ("Fetch", {"topic": "t", "partition": 0, "offset": 0, "max_records": "ten"}),
    ("ListOffsets", {**BAD_TOPIC, "which": "latest"}),
    ("ListOffsets", {"topic": "t", "partition": 0, "which": ["latest"]}),
    ("Produce", {**BAD_TOPIC, "values": ["v"]}),
])
def test_the_broker_s_own_apis_refuse_a_field_of_the_wrong_type_as_invalid_request(broker, api, body):
    answer = broker.server.dispatch({"api": api, "version": 1, "correlation_id": 3, **body})
    assert (answer["error"], answer["correlation_id"]) == ("INVALID_REQUEST", 3), answer


@pytest.mark.parametrize(("api", "body"), [
    ("Produce", {"topic": "t", "partition": 0, "values": ["ok", "\udcff"]}),  # Kafka fetches of it would fail
    ("JoinGroup", {"group_id": "g", "client_id": "\udcff", "session_timeout_ms": 6000, "protocols": []}),
    ("FindCoordinator", {"group_id": "\udcff"}),
])
def test_text_that_is_not_unicode_is_refused_before_it_reaches_a_log_or_a_group(broker, api, body):
    answer = broker.server.dispatch({"api": api, "version": 1, **body})
    assert answer["error"] == "INVALID_REQUEST" and "not valid Unicode" in answer["message"], answer
    assert broker.server.dispatch({"api": "ListOffsets", "version": 1, "topic": "t", "partition": 0})["offset"] == 0


@pytest.mark.parametrize(("api", "body", "field"), [
    ("OffsetCommit", {"group_id": "g", "member_id": "m", "generation_id": {}, "offsets": []}, "generation_id"),
    ("OffsetFetch", {"group_id": "g", "partitions": [[1, "a", None]]}, "partitions[0]"),
    ("SyncGroup", {"group_id": "g", "generation_id": 1, "member_id": {"topic": "x"}}, "member_id"),
    ("LeaveGroup", {"group_id": "g", "member_id": [1]}, "member_id"),
    ("JoinGroup", {"group_id": "g", "session_timeout_ms": "6000", "protocols": []}, "session_timeout_ms"),
])
def test_the_coordinator_refuses_a_field_of_the_wrong_shape_naming_it(broker, api, body, field):
    answer = broker.server.dispatch({"api": api, "version": 1, "correlation_id": 5, **body})
    assert answer["error"] == "INVALID_REQUEST" and f"{api}: {field} must be" in answer["message"], answer


def test_a_string_with_a_lone_surrogate_hashes_as_java_s():
    assert java_string_hash("\udcff") == 0xDCFF and java_string_hash("a\ud83d") == 97 * 31 + 0xD83D


def test_a_kafka_request_whose_string_is_not_utf8_is_malformed_and_closes(broker):
    from kafka.protocol.admin.groups import DescribeGroupsRequest

    request = DescribeGroupsRequest[0](groups=["g"])
    request.with_header(correlation_id=1, client_id="hostile")
    frame = bytes(request.encode(header=True, framed=True)).replace(b"\x00\x01g", b"\x00\x01\xff")
    with pytest.raises(ConnectionMustClose, match=r"malformed DescribeGroups v0 request \(UnicodeDecodeError"):
        broker.kafka_listener.answer(frame[4:])


def test_a_fetch_with_good_fields_is_still_served(broker):
    broker.server.dispatch({"api": "Produce", "version": 1, "topic": "t", "partition": 1, "values": ["a", "b"]})
    answer = broker.server.dispatch({"api": "Fetch", "version": 1, "topic": "t", "partition": 1, "offset": 0})
    assert answer["error"] == "NONE" and [r["value"] for r in answer["records"]][:2] == ["a", "b"]


# -- the Kafka listener ---------------------------------------------------------------------------------
SEEDS = kafka_seeds()


@settings(max_examples=EXAMPLES_EACH, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False))
def test_the_kafka_listener_answers_or_closes_a_mutated_request_and_no_handler_breaks(broker, rng):
    frame = kafka_frame(rng, SEEDS)[4:]
    api = SERVED.get(int.from_bytes(frame[:2], "big", signed=True)) if len(frame) >= 2 else None
    name = api.name if api is not None else "?"

    def answer():
        try:
            return broker.kafka_listener.answer(frame)
        except ConnectionMustClose as exc:
            return exc

    outcome = _within_patience(broker, name, answer)
    if isinstance(outcome, ConnectionMustClose):
        assert "failed in the lab" not in str(outcome), str(outcome)
    elif outcome is not None:
        assert isinstance(outcome, bytes) and int.from_bytes(outcome[:4], "big") == len(outcome) - 4


def test_every_seed_is_a_served_request_the_listener_answers(broker):
    assert {SERVED[int.from_bytes(seed[4:6], "big")].name for seed in SEEDS} == \
        {s.name for s in SERVED.values()} - {"ConsumerGroupHeartbeat"}
    for seed in SEEDS:
        assert isinstance(broker.kafka_listener.answer(seed[4:]), bytes)


# -- the CLI's inputs and the consumer hosts' state lines --------------------------------------------------
text = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["", "=", "a=", "=b", "2,x", "0", "-1", "1,,2", "99999999", "127.0.0.1:", ":2181", "h:99999", "a:1/", "/c"])
CONFIG_KEYS = ["session.timeout.ms", "heartbeat.interval.ms", "rebalance.backoff.ms", "rebalance.max.retries",
               "zookeeper.session.timeout.ms", "partition.assignment.strategy", "group.instance.id",
               "auto.offset.reset", "max.poll.interval.ms", "auto.commit.interval.ms", "enable.auto.commit",
               "consumeThreadMax", "pullBatchSize", "heartbeatBrokerInterval", "consumerBalancePeriodMs",
               "group.protocol", "group.remote.assignor", "client.id"]


def _clear_or_none(call):
    """`call()`'s result, or None where it refused with a LabError that says what to do."""
    from lab_cluster.errors import LabError

    try:
        return call()
    except LabError as exc:
        assert exc.problem.strip() and exc.fix.strip(), exc
        return None


@settings(deadline=None)  # a test asserts no time
@given(st.lists(text, max_size=4))
def test_config_overrides_parse_or_are_refused_clearly(pairs):
    from lab_cluster.properties import parse_overrides

    parsed = _clear_or_none(lambda: parse_overrides(pairs))
    assert parsed is None or all(isinstance(k, str) and k for k in parsed)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(FAMILIES)), st.dictionaries(st.sampled_from(CONFIG_KEYS), text, max_size=4))
def test_every_family_takes_a_config_or_refuses_it_clearly(design, overrides):
    family = FAMILIES[design]
    props = {"group.id": "g", family.address_config: "127.0.0.1:2181", **overrides}
    _clear_or_none(lambda: family.configure(props, "c1"))


@settings(deadline=None)  # a test asserts no time
@given(text)
def test_a_connect_string_parses_to_servers_or_is_refused_clearly(connect):
    from lab_cluster.zk.external import parse_connect

    parsed = _clear_or_none(lambda: parse_connect(connect))
    if parsed is not None:
        addresses, chroot = parsed
        assert addresses and all(a.host and 0 < a.client_port < 65536 for a in addresses)
        assert chroot == "" or chroot.startswith("/")


@settings(deadline=None)  # a test asserts no time
@given(text, text)
def test_grid_options_parse_or_are_refused_clearly(consumers, designs):
    from experiments.catalogue import EXPERIMENTS
    from experiments.cli.run import _designs, _int_list

    counts = _clear_or_none(lambda: _int_list(consumers, "--consumers"))
    assert counts is None or all(n >= 1 for n in counts)
    herd = EXPERIMENTS["herd"]
    chosen = _clear_or_none(lambda: _designs(designs, herd, "standard"))
    assert chosen is None or set(chosen) <= set(herd.designs)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=4), max_leaves=12)
state_lines = st.fixed_dictionaries({}, optional={"actor": st.sampled_from(["c1", "c2"]) | json_values,
                                                  "state": st.sampled_from(["stable", "consuming"]) | json_values,
                                                  "gave_up": st.booleans() | json_values,
                                                  "generation": st.integers(0, 3) | json_values,
                                                  "partitions": st.lists(st.integers(0, 3)) | json_values})


@settings(deadline=None)  # a test asserts no time
@given(st.lists(state_lines.map(json.dumps) | st.text(max_size=20), max_size=6))
def test_the_group_watch_judges_any_line_a_host_prints_without_breaking(lines):
    from experiments.engine.group_watch import GroupWatch

    watch = GroupWatch("classic", partitions=4, quiet_s=0)
    for line in lines:
        watch.update(line)
    verdict = watch.problem(["c1", "c2"], since_ns=0)
    assert verdict is None or isinstance(verdict, str)
