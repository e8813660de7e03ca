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
from experiments.engine.families import BROKER_PLUGINS
from lab_cluster.broker.admin import create_topic, wait_for_metadata
from lab_cluster.broker.broker import Broker
from lab_cluster.kafka_listener.messages import SERVED
from lab_cluster.kafka_listener.server import ConnectionMustClose
from lab_cluster.wire import ErrorCode

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
    yield b
    pool.shutdown(wait=False, cancel_futures=True)
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
    answer = _within_patience(broker, str(request["api"]), lambda: broker.server.dispatch(request))
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
    ("Fetch", {"topic": "t", "partition": 0, "offset": 0, "max_records": -1}),
    ("ListOffsets", {**BAD_TOPIC, "which": "latest"}),
    ("ListOffsets", {"topic": "t", "partition": 0, "which": ["latest"]}),
    ("Produce", {**BAD_TOPIC, "values": ["v"]}),
])
def test_the_broker_s_own_apis_refuse_a_field_of_the_wrong_type_as_invalid_request(broker, api, body):
    answer = broker.server.dispatch({"api": api, "version": 1, "correlation_id": 3, **body})
    assert (answer["error"], answer["correlation_id"]) == ("INVALID_REQUEST", 3), answer


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
