"""The Kafka listener's pieces without a cluster: the version profile, the ConsumerProtocol bridge, the records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("kafka")

from kafka.protocol.consumer.metadata import (  # noqa: E402
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.record.memory_records import MemoryRecordsBuilder  # noqa: E402

from lab_cluster.kafka_listener import records as R  # noqa: E402
from lab_cluster.kafka_listener import subscriptions as S  # noqa: E402
from lab_cluster.kafka_listener.messages import SERVED  # noqa: E402

topics = st.lists(st.sampled_from(["t", "u", "orders"]), min_size=1, max_size=3, unique=True)
owned = st.lists(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 20)), max_size=10, unique=True)


# -- the version profile --------------------------------------------------------------------------------
def test_the_profile_serves_what_the_issue_lists_within_what_kafka_python_can_encode():
    names = {s.name for s in SERVED.values()}
    assert names == {"ApiVersions", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat",
                     "LeaveGroup", "OffsetCommit", "OffsetFetch", "ListOffsets", "Fetch", "Produce",
                     "DescribeGroups", "ConsumerGroupHeartbeat"}
    for s in SERVED.values():
        if hasattr(s, "request"):  # ConsumerGroupHeartbeat's codec is kio's (`kip848.py`)
            assert 0 <= s.min_version <= s.max_version <= s.request.max_version
            assert s.max_version <= s.response.max_version


def test_fetch_stays_below_fetch_sessions_and_the_group_apis_below_their_flexible_versions():
    assert SERVED[1].max_version < 7  # Fetch v7 brings fetch sessions (KIP-227), which the lab does not keep
    for key in (11, 12, 13, 14):  # JoinGroup, Heartbeat, LeaveGroup, SyncGroup: what both clients use, non-flexible
        assert not SERVED[key].request.flexible_version_q(SERVED[key].max_version)
    # KIP-848's clients need topic ids (Metadata v10+) and the member epoch in commits and fetches (v9)
    assert SERVED[3].max_version >= 10 and SERVED[8].max_version >= 9 and SERVED[9].max_version >= 9


# -- subscriptions and assignments ------------------------------------------------------------------------
@given(topics, owned, st.integers(-1, 1000))
def test_a_lab_subscription_reads_back_in_kafka_pythons_own_decoder(subscribed, held, generation):
    raw = S.to_kafka_subscription({"topics": subscribed, "owned": [list(tp) for tp in held],
                                   "generation": generation})
    decoded = ConsumerProtocolSubscription.decode(raw)
    assert decoded.topics == subscribed
    assert {(t.topic, p) for t in decoded.owned_partitions for p in t.partitions} == set(held)
    assert decoded.generation_id == generation


@given(topics, owned, st.binary(max_size=20))
def test_a_kafka_subscription_keeps_its_bytes_and_reads_into_the_lab_form(subscribed, held, user_data):
    grouped: dict[str, list[int]] = {}
    for t, p in held:
        grouped.setdefault(t, []).append(p)
    raw = bytes(ConsumerProtocolSubscription(
        version=1, topics=subscribed, user_data=user_data,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
                          for t, ps in grouped.items()]).encode(version=1))
    lab = S.from_kafka_subscription(raw)
    assert lab["topics"] == subscribed and {tuple(tp) for tp in lab["owned"]} == set(held)
    assert lab["generation"] == -1  # v1 has no generation
    assert S.to_kafka_subscription(lab) == raw  # relayed byte for byte, user data included


@given(owned)
def test_assignments_cross_between_the_two_forms_without_loss(partitions):
    raw = S.to_kafka_assignment({"partitions": [list(tp) for tp in partitions]})
    if not partitions:
        assert ConsumerProtocolAssignment.decode(raw).assigned_partitions == []
    assert {tuple(tp) for tp in S.from_kafka_assignment(raw)["partitions"]} == set(partitions)
    assert S.to_kafka_assignment(S.from_kafka_assignment(raw)) == raw


def test_bytes_that_are_not_a_consumer_protocol_message_are_relayed_untouched():
    junk = b"\x00\x09not-a-subscription"
    assert S.to_kafka_subscription(S.from_kafka_subscription(junk)) == junk
    assert S.from_kafka_assignment(b"") == {"partitions": []}
    assert S.to_kafka_assignment({}) == b""


# -- records ----------------------------------------------------------------------------------------------
@given(st.lists(st.text(max_size=30), min_size=1, max_size=40), st.integers(0, 10_000))
def test_fetched_records_decode_to_the_logs_values_at_their_offsets(values, base):
    records = [{"offset": base + i, "ts_ms": 1_700_000_000_000 + i, "value": v} for i, v in enumerate(values)]
    raw, packed = R.encode_batch(records, 1 << 20)
    assert packed == len(values)
    assert R.decode_values(raw) == values


def test_a_byte_limit_smaller_than_one_record_still_returns_that_record_and_no_more():
    records = [{"offset": i, "ts_ms": 0, "value": "x" * 100} for i in range(5)]
    raw, packed = R.encode_batch(records, 10)
    assert packed == 1 and R.decode_values(raw) == ["x" * 100]


@pytest.mark.parametrize("key, value, headers, why", [
    (b"k", b"v", [], "without a key"), (None, b"v", [("h", b"1")], "without headers"),
    (None, None, [], "tombstone"), (None, b"\xff\xfe", [], "UTF-8")])
def test_a_produced_record_the_logs_cannot_hold_is_refused(key, value, headers, why):
    builder = MemoryRecordsBuilder(2, 0, batch_size=1 << 16)
    builder.append(0, key, value, headers)
    builder.close()
    with pytest.raises(R.RecordRefused, match=why):
        R.decode_values(bytes(builder.buffer()))
