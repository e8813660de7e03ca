"""Hostile input for a broker's two listeners: frames an attacker would send, drawn from a seeded `Random`.

Every generator is a function of a `random.Random`, so the benchmark
(`bench hostile`) replays a seed exactly and the property tests
(`tests/test_hostile_input.py`) drive the same generators with hypothesis's
`st.randoms()`:

- `lab_request(rng)`: a request of the lab's JSON wire (`lab_cluster/wire.py`)
  for an API a broker serves (its own, the group coordinator's, RocketMQ's and
  TubeMQ's plug-ins): a valid example of that API (`EXAMPLES`) with one to
  three of its fields given a hostile value (`hostile_value`: a list where a
  topic goes, a string where an offset goes, a huge or negative number, deep
  nesting, ...), removed, or joined by a field nobody reads; now and then an
  unknown API or version.
- `lab_frame(rng)`: bytes for the JSON listener: mostly a framed `lab_request`;
  else a frame that breaks the framing (not JSON, not UTF-8, not an object, a
  size beyond the limit, a frame cut short), which the server must answer
  INVALID_REQUEST and close.
- `kafka_frame(rng)`: bytes for the Kafka listener: a valid request of a served
  API and version (`kafka_seeds`, encoded by kafka-python's own classes) with
  bytes flipped, replaced, cut or appended. Kafka's framing makes a mutated
  length field likely, so most such frames no longer decode (the listener
  closes the connection, as Kafka does); the rest decode to requests with
  strange values that the handlers must answer.

What a correct server does with each is the rule of its listener: the JSON
listener answers every well-framed request with a known error code and never
UNKNOWN_SERVER_ERROR (that code means a handler broke on the input); the Kafka
listener answers or closes, and never closes because a handler broke ("failed
in the lab"). Neither hangs, and both go on serving.
"""

from __future__ import annotations

import json
import random
import struct

#: a valid request body of each API a broker with every plug-in serves, as the lab's own clients send it
#: (the field names are the handlers'; each module's docstring describes its bodies)
EXAMPLES: dict[str, dict] = {
    # the broker (`lab_cluster/broker/broker.py`)
    "Produce": {"topic": "t", "partition": 0, "values": ["a", "b"]},
    "Fetch": {"topic": "t", "partition": 0, "offset": 0, "max_records": 10, "max_wait_ms": 0},
    "ListOffsets": {"topic": "t", "partition": 0, "which": "latest"},
    "Metadata": {},
    # the group coordinator (`modern_coord/coordinator/service.py`)
    "FindCoordinator": {"group_id": "g"},
    "JoinGroup": {"group_id": "g", "member_id": "", "group_instance_id": None, "client_id": "c",
                  "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "protocol_type": "consumer",
                  "protocols": [{"name": "range", "metadata": {"topics": ["t"]}}]},
    "SyncGroup": {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
                  "assignments": {"m": [["t", 0]]}},
    "Heartbeat": {"group_id": "g", "member_id": "m", "group_instance_id": None, "generation_id": 1},
    "LeaveGroup": {"group_id": "g", "member_id": "m"},
    "OffsetCommit": {"group_id": "g", "member_id": "m", "generation_id": 1, "group_instance_id": None,
                     "offsets": [{"topic": "t", "partition": 0, "offset": 1}]},
    "OffsetFetch": {"group_id": "g", "partitions": [["t", 0]]},
    "DescribeGroups": {"group_id": "g"},
    "ConsumerGroupHeartbeat": {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None,
                               "rack_id": None, "rebalance_timeout_ms": 6000, "subscribed_topic_names": ["t"],
                               "server_assignor": "uniform", "topic_partitions": []},
    # RocketMQ's plug-in (`rocketmq_client/broker/service.py`)
    "HEART_BEAT": {"client_id": "c", "consumer_data": [{"group": "g", "topics": {"t": 1}}]},
    "UNREGISTER_CLIENT": {"client_id": "c", "consumer_group": "g"},
    "GET_CONSUMER_LIST_BY_GROUP": {"consumer_group": "g"},
    "UPDATE_CONSUMER_OFFSET": {"consumer_group": "g", "topic": "t", "queue_id": 0, "commit_offset": 1},
    "QUERY_CONSUMER_OFFSET": {"consumer_group": "g", "topic": "t", "queue_id": 0},
    "LOCK_BATCH_MQ": {"consumer_group": "g", "client_id": "c", "mq_set": [["t", "broker-1", 0]]},
    "UNLOCK_BATCH_MQ": {"consumer_group": "g", "client_id": "c", "mq_set": [["t", "broker-1", 0]]},
    "PULL_MESSAGE": {"consumer_group": "g", "topic": "t", "queue_id": 0, "queue_offset": 0, "max_msg_nums": 8},
    # TubeMQ's plug-ins (`tubemq_client/master/service.py`, `tubemq_client/broker/service.py`)
    "consumerRegisterC2MV2": {"client_id": "c", "group": "g", "topics": ["t"], "source_count": 0, "node_id": 0},
    "consumerHeartbeatC2MV2": {"client_id": "c", "group": "g", "reported": []},
    "consumerGetPartMetaInfoC2M": {"client_id": "c", "group": "g", "topics": ["t"]},
    "consumerCloseClientC2M": {"client_id": "c", "group": "g"},
    "consumerRegisterC2M": {"client_id": "c", "group": "g", "topics": ["t"]},
    "consumerHeartbeatC2M": {"client_id": "c", "group": "g", "held": [], "done": None},
    "consumerRegisterC2B": {"client_id": "c", "group": "g", "topic": "t", "partition_id": 0, "op_type": 1,
                            "read_status": 0, "curr_offset": -1},
    "consumerHeartbeatC2B": {"client_id": "c", "group": "g", "partitions": []},
    "getMessagesC2B": {"client_id": "c", "group": "g", "topic": "t", "partition_id": 0, "max_records": 8,
                       "last_pack_consumed": True},
    "consumerCommitC2B": {"client_id": "c", "group": "g", "topic": "t", "partition_id": 0,
                          "last_pack_consumed": True},
}
#: requests a server may hold open by design, as Kafka's coordinator holds JoinGroup and SyncGroup until the
#: rebalance completes (and a Fetch at the log's end waits up to its max_wait_ms): not a hang when unanswered
#: within a client's patience, so long as the server keeps serving everyone else
HELD_BY_DESIGN: frozenset[str] = frozenset({"JoinGroup", "SyncGroup", "Fetch"})

_SCALARS = (None, True, False, 0, -1, 1, 2**31, -(2**31) - 1, 2**63, -(2**63), 10**30, 1.5, float("1e308"),
            "", "t", "g", "\u0000", "\u202e", "\udcff", "x" * 5000)


def hostile_value(rng: random.Random, depth: int = 0):
    """A JSON value no handler expects where it finds it: a wrong type, an edge number, a long or odd
    string, or a list or object of such values (nested at most four deep)."""
    kind = rng.randrange(6 if depth < 4 else 3)
    if kind <= 1:
        return rng.choice(_SCALARS)
    if kind == 2:
        return rng.randint(-(2**70), 2**70) if rng.random() < 0.5 else "".join(
            chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(12)))
    if kind == 3:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 4:
        return {rng.choice(("topic", "partition", "", "0", "t")): hostile_value(rng, depth + 1)
                for _ in range(rng.randrange(3))}
    return [1, "a", None]  # the shape that found the broker's TypeErrors


def lab_request(rng: random.Random, apis: list[str] | None = None) -> dict:
    """One well-framed but hostile request of the lab's JSON wire (the frame's dict, header fields included)."""
    api = rng.choice(apis or sorted(EXAMPLES))
    body = dict(EXAMPLES.get(api, {}))
    for _ in range(rng.randint(1, 3)):
        action = rng.random()
        if body and action < 0.6:
            body[rng.choice(sorted(body))] = hostile_value(rng)
        elif body and action < 0.75:
            body.pop(rng.choice(sorted(body)))
        else:
            body[rng.choice(("extra", "topic", "offset", "partition", "api_key"))] = hostile_value(rng)
    frame = {"api": api, "version": 1, "correlation_id": rng.randrange(1, 2**31), "client_id": "hostile", **body}
    roll = rng.random()
    if roll < 0.03:
        frame["api"] = rng.choice(("NoSuchApi", "", "produce", 7))
    elif roll < 0.06:
        frame["version"] = rng.choice((0, 2, -1, "1", None, 1.0))
    elif roll < 0.08:
        frame["correlation_id"] = hostile_value(rng)
    return frame


def lab_frame(rng: random.Random, max_frame_bytes: int = 1 << 20) -> tuple[bytes, bool]:
    """(bytes for the JSON listener, whether they are a well-framed request the server must answer and keep
    the connection open for); a broken frame is to be answered INVALID_REQUEST and closed."""
    if rng.random() < 0.9:
        body = json.dumps(lab_request(rng), separators=(",", ":")).encode()
        return struct.pack(">I", len(body)) + body, True
    broken = rng.choice((b"{not json", b"\xff\xfe\x00garbage", b"[1,2,3]", b'"a string"', b"null",
                         b'{"no_api": 1}', b"{}"))
    kind = rng.randrange(3)
    if kind == 0:
        return struct.pack(">I", len(broken)) + broken, False
    if kind == 1:  # a size beyond the server's limit: it must not try to read that much
        return struct.pack(">I", max_frame_bytes + rng.randrange(1, 2**20)) + broken, False
    return struct.pack(">I", len(broken) + 10) + broken, False  # a frame cut short: the sender goes away


def kafka_seeds() -> list[bytes]:
    """One valid request frame (size prefix included) of each API the Kafka listener serves, at its lowest
    and highest served version, encoded by kafka-python's own classes (ConsumerGroupHeartbeat, which kio
    encodes, is left out)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    from lab_cluster.kafka_listener.messages import SERVED, build

    records = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    records.append(timestamp=None, key=None, value=b"v", headers=[])
    records.close()
    values = {
        "Produce": {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": records.buffer()}]}]},
        "Fetch": {"replica_id": -1, "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
        "ListOffsets": {"replica_id": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]},
        "Metadata": {"topics": [{"name": "t"}]},
        "OffsetCommit": {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
        "OffsetFetch": {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
        "FindCoordinator": {"key": "g", "key_type": 0},
        "JoinGroup": {"group_id": "g", "session_timeout_ms": 6000, "rebalance_timeout_ms": 6000, "member_id": "",
                      "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"\x00\x00"}]},
        "Heartbeat": {"group_id": "g", "generation_id": 1, "member_id": "m"},
        "LeaveGroup": {"group_id": "g", "member_id": "m"},
        "SyncGroup": {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
        "DescribeGroups": {"groups": ["g"]},
        "ApiVersions": {},
    }
    seeds = []
    for served in SERVED.values():
        if served.name not in values:
            continue
        for version in sorted({served.min_version, served.max_version}):
            cls = served.request[version]
            known = {k: v for k, v in values[served.name].items() if k in cls._struct.fields}
            request = build(cls, known)
            request.with_header(correlation_id=1, client_id="hostile")
            seeds.append(bytes(request.encode(header=True, framed=True)))
    return seeds


def kafka_frame(rng: random.Random, seeds: list[bytes]) -> bytes:
    """A served request with its bytes mutated (the 4-byte size is rewritten to fit, most of the time, so that
    the listener reads the whole frame; the header's API key and version are left alone half of the time, so
    that mutations reach the bodies of served versions)."""
    frame = bytearray(rng.choice(seeds)[4:])
    keep = 8 if rng.random() < 0.5 else 0  # api key, version, correlation id
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(5)
        at = rng.randrange(keep, max(keep + 1, len(frame)))
        if kind == 0 and at < len(frame):  # flip a bit
            frame[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and at < len(frame):  # an edge byte
            frame[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        elif kind == 2:  # cut
            del frame[at:]
        elif kind == 3:  # insert
            frame[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:  # an edge 16- or 32-bit number
            frame[at:at + 4] = struct.pack(">i", rng.choice((-1, 0, 2**31 - 1, -(2**31), 0x7FFF0000)))
    size = len(frame) if rng.random() < 0.95 else rng.choice((-1, 0, len(frame) + 3, 2**31 - 1))
    return struct.pack(">i", size) + bytes(frame)
