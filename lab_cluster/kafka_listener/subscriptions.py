"""A consumer group member's subscription and assignment: Kafka's bytes on one listener, the lab's JSON on the other.

In a classic group the coordinator never reads what members say to each
other: JoinGroup carries each member's subscription as opaque bytes, the
leader gets them all back, and SyncGroup carries the leader's assignment for
each member, relayed as opaque bytes too. Real clients encode both with
Kafka's `ConsumerProtocol` (`ConsumerProtocolSubscription` v0-3,
`ConsumerProtocolAssignment` v0-3); the lab's own consumers write JSON:

    subscription  {"topics": ["t"], "owned": [["t", 0]], "generation": 4, "user_data": "AAAAAw=="}
    assignment    {"partitions": [["t", 0], ["t", 1]], "user_data": "..."}

(`user_data`, base64, only where an assignor gave some: Kafka's `userData`
bytes, `lab_cluster/assignment/user_data.py`.)

One group can hold both kinds of member (a lab consumer, kafka-python and
librdkafka), so the Kafka listener translates at its edge:

- a subscription or assignment that arrives as Kafka bytes is kept in the
  lab's form, with the bytes themselves under `kafka_bytes` (base64): a Kafka
  member then gets back exactly the bytes another Kafka member sent, its
  `user_data` included (a sticky assignor's, say);
- one the lab's consumer wrote is encoded for a Kafka member from the lab's
  form (subscription v2: topics, user data, owned partitions, generation;
  assignment v0: partitions, user data), so that a Kafka client's assignor
  reads a lab member's user data as its own kind's, and the other way round.

    >>> s = from_kafka_subscription(to_kafka_subscription({"topics": ["t"], "owned": [["t", 1]], "generation": 3}))
    >>> s["topics"], s["owned"], s["generation"]
    (['t'], [['t', 1]], 3)
    >>> from_kafka_assignment(to_kafka_assignment({"partitions": [["t", 0], ["t", 2]]}))["partitions"]
    [['t', 0], ['t', 2]]
    >>> from_kafka_subscription(to_kafka_subscription({"topics": ["t"], "user_data": "AAAAAw=="}))["user_data"]
    'AAAAAw=='

Departures: under the
eager `sticky` strategy the lab's consumer puts its last assignment in
`owned` where Java's StickyAssignor puts it in `user_data`; a Kafka leader
running `sticky` therefore sees no history for a lab member. Bytes that are
not a ConsumerProtocol message are kept and relayed as they are, with an empty
lab form (though today's coordinator admits protocol type `consumer` only, so
a Kafka Connect worker, say, cannot join).
"""

from __future__ import annotations

import base64

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from lab_cluster.assignment.user_data import encode_user_data, user_data_of

SUBSCRIPTION_VERSION = 2  # topics, user data, owned partitions, generation: what the lab's JSON holds
ASSIGNMENT_VERSION = 0


def _by_topic(partitions) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(str(topic), []).append(int(partition))
    return [(topic, sorted(ps)) for topic, ps in sorted(grouped.items())]


def _kept(raw: bytes) -> str:
    return base64.b64encode(bytes(raw)).decode()


def _user_data(message) -> dict:
    """`{"user_data": base64}` for a decoded ConsumerProtocol message that carries user data, else `{}`."""
    data = getattr(message, "user_data", None)
    return {} if data is None else {"user_data": encode_user_data(bytes(data))}


def from_kafka_subscription(raw: bytes) -> dict:
    """The lab's form of a ConsumerProtocolSubscription, the bytes kept under `kafka_bytes`."""
    try:
        sub = ConsumerProtocolSubscription.decode(bytes(raw))
    except Exception:  # not a consumer subscription: relay it untouched
        return {"topics": [], "kafka_bytes": _kept(raw)}
    owned = [[t.topic, p] for t in (sub.owned_partitions or []) for p in t.partitions]
    return {"topics": list(sub.topics or []), "owned": owned,
            "generation": sub.generation_id if sub.generation_id is not None else -1, **_user_data(sub),
            "kafka_bytes": _kept(raw)}


def to_kafka_subscription(metadata: dict) -> bytes:
    """Kafka's bytes for a subscription in the lab's form (the bytes it came in, if it came from Kafka)."""
    if metadata.get("kafka_bytes"):
        return base64.b64decode(metadata["kafka_bytes"])
    owned = [ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
             for t, ps in _by_topic(metadata.get("owned") or [])]
    sub = ConsumerProtocolSubscription(version=SUBSCRIPTION_VERSION, topics=list(metadata.get("topics") or []),
                                       user_data=user_data_of(metadata), owned_partitions=owned,
                                       generation_id=int(metadata.get("generation", -1)))
    return bytes(sub.encode(version=SUBSCRIPTION_VERSION))


def from_kafka_assignment(raw: bytes) -> dict:
    """The lab's form of a ConsumerProtocolAssignment, the bytes kept under `kafka_bytes`."""
    if not raw:  # a follower's empty assignment in SyncGroup, or none yet
        return {"partitions": []}
    try:
        assignment = ConsumerProtocolAssignment.decode(bytes(raw))
    except Exception:
        return {"partitions": [], "kafka_bytes": _kept(raw)}
    partitions = [[t.topic, p] for t in (assignment.assigned_partitions or []) for p in t.partitions]
    return {"partitions": partitions, **_user_data(assignment), "kafka_bytes": _kept(raw)}


def to_kafka_assignment(assignment: dict | None) -> bytes:
    """Kafka's bytes for an assignment in the lab's form (the bytes it came in, if it came from Kafka)."""
    if not assignment:
        return b""
    if assignment.get("kafka_bytes"):
        return base64.b64decode(assignment["kafka_bytes"])
    partitions = [ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
                  for t, ps in _by_topic(assignment.get("partitions") or [])]
    return bytes(ConsumerProtocolAssignment(version=ASSIGNMENT_VERSION, assigned_partitions=partitions,
                                            user_data=user_data_of(assignment)).encode(version=ASSIGNMENT_VERSION))
