"""Kafka's request and response messages, and the versions the lab's Kafka listener serves.

The codec is kafka-python's (3.x): its message classes are generated from
Kafka's own JSON schemas (`kafka/protocol/schemas/resources/*.json`), and
decode requests as well as responses, so the lab writes no byte of Kafka's
encoding by hand. Field names are the schemas' in snake case
(`GroupInstanceId` -> `group_instance_id`).

`SERVED` is the version profile the listener advertises in ApiVersions: per
API the range both real clients the lab runs can use. The classic group APIs
stay below their first flexible version (both clients' maxima); ApiVersions
v3 answers librdkafka's first request; Metadata, OffsetCommit, OffsetFetch and
ConsumerGroupHeartbeat go as far as KIP-848's clients need (flexible there,
which kafka-python's classes and kio encode alike):

| API | versions | why these |
|---|---|---|
| ApiVersions | 0-3 | v3 answers librdkafka's first request in one round trip |
| Metadata | 1-12 | v10+ names topics by id, which KIP-848's clients need; leader epochs are -1 (unknown) |
| FindCoordinator | 0-2 | librdkafka's maximum is 2 |
| JoinGroup | 4-5 | a new member always gets MEMBER_ID_REQUIRED (KIP-394), which v4+ expects; v5: `group.instance.id` |
| SyncGroup, Heartbeat | 0-3 | v3 carries `group.instance.id`; v4 is flexible |
| LeaveGroup | 0-1 | librdkafka's maximum; v3's batch of members is what static members would need |
| OffsetCommit | 2-9 | v7 carries `group.instance.id`, v9 the member epoch (KIP-848) |
| OffsetFetch | 1-9 | v2 answers "all partitions"; v8 batches groups; v9 carries the member and its epoch (KIP-848) |
| ListOffsets | 1-5 | v1 is the first with one offset per partition |
| Fetch | 4-6 | RecordBatch v2 (magic 2), and below v7: no fetch sessions |
| Produce | 3-7 | RecordBatch v2, for real producers |
| DescribeGroups | 0-4 | v4 carries each member's `group.instance.id` |
| ConsumerGroupHeartbeat | 0-1 | KIP-848; in v1 (Kafka 4.0, librdkafka's) the member makes its id |

Sources: kafka-python 3.0's `coordinator/base.py` and `consumer/fetcher.py`,
librdkafka 2.x's `rdkafka_request.c` and `rdkafka_feature.c`
(read in those clients' own sources). JoinGroup starts at v4
because the lab's coordinator always hands a new member its id with
MEMBER_ID_REQUIRED first, as Kafka does for v4+ only (a v0-3 member would be
added at once); both clients use v5.

`build(cls, values)` makes a message from plain values, nested dicts and lists
included, so that each API's translation reads as the schema does.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from .kip848 import ServedHeartbeat

try:  # where kafka-python keeps DescribeGroups
    from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse
except ImportError:  # pragma: no cover - kafka-python moved it
    from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse


@dataclass(frozen=True)
class Served:
    """One API the listener serves: its classes and the versions it advertises."""

    key: ApiKey
    request: type
    response: type
    min_version: int
    max_version: int

    @property
    def name(self) -> str:
        return self.key.name

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def decode(self, frame: bytes, version: int) -> tuple[object, str]:
        """(the request, its header's client id) from a request frame (without its size); ValueError for a
        null where the schema allows none, which Kafka's parser refuses (`SchemaException`) and kafka-python's
        reads as None."""
        request = self.request.decode(frame, version=version, header=True)
        where = null_where_not_nullable(request, version)
        if where:
            raise ValueError(f"non-nullable field {where} was serialized as null")
        return request, request.header.client_id or ""

    def encode(self, values: dict, version: int, correlation_id: int) -> bytes:
        """The framed response, header included, at `version`."""
        response = build(self.response[version], values)
        response.with_header(correlation_id=correlation_id)
        return bytes(response.encode(header=True, framed=True))


SERVED: dict[int, Served] = {s.key: s for s in (
    Served(ApiKey.Produce, ProduceRequest, ProduceResponse, 3, 7),
    Served(ApiKey.Fetch, FetchRequest, FetchResponse, 4, 6),
    Served(ApiKey.ListOffsets, ListOffsetsRequest, ListOffsetsResponse, 1, 5),
    Served(ApiKey.Metadata, MetadataRequest, MetadataResponse, 1, 12),
    Served(ApiKey.OffsetCommit, OffsetCommitRequest, OffsetCommitResponse, 2, 9),
    Served(ApiKey.OffsetFetch, OffsetFetchRequest, OffsetFetchResponse, 1, 9),
    Served(ApiKey.FindCoordinator, FindCoordinatorRequest, FindCoordinatorResponse, 0, 2),
    Served(ApiKey.JoinGroup, JoinGroupRequest, JoinGroupResponse, 4, 5),
    Served(ApiKey.Heartbeat, HeartbeatRequest, HeartbeatResponse, 0, 3),
    Served(ApiKey.LeaveGroup, LeaveGroupRequest, LeaveGroupResponse, 0, 1),
    Served(ApiKey.SyncGroup, SyncGroupRequest, SyncGroupResponse, 0, 3),
    Served(ApiKey.DescribeGroups, DescribeGroupsRequest, DescribeGroupsResponse, 0, 4),
    Served(ApiKey.ApiVersions, ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    ServedHeartbeat(),  # KIP-848, with kio's codec (`kip848.py`)
)}


def api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"api-{key}"


def build(cls, values: dict):
    """A message (or nested struct) of class `cls` from `values`: dicts become the schema's nested structs,
    lists of dicts its arrays of structs; fields left out take the schema's defaults."""
    fields = cls._struct.fields
    kwargs = {}
    for name, value in values.items():
        field = fields[name]
        if field.is_struct_array() and value is not None:
            value = [build(field.data_class, v) if isinstance(v, dict) else v for v in value]
        elif field.is_struct() and isinstance(value, dict):
            value = build(field.data_class, value)
        kwargs[name] = value
    return cls(**kwargs)


def null_where_not_nullable(message, version: int, where: str = "") -> str | None:
    """The first field of a decoded message (or nested struct) that is null though its schema says it may not
    be at `version`, as `a.b[2].c`; None if there is none."""
    for name, field in message._struct.fields.items():
        if not field.for_version_q(version):
            continue
        value = getattr(message, name, None)
        path = f"{where}.{name}" if where else name
        if value is None:
            # a uuid is never null on the wire: kafka-python reads the zero uuid (which clients send for "no id")
            # as None
            if not field.nullable_for_version_q(version) and field.type_str != "uuid":
                return path
        elif field.is_struct_array():
            for i, item in enumerate(value):
                found = null_where_not_nullable(item, version, f"{path}[{i}]")
                if found:
                    return found
        elif field.is_struct():
            found = null_where_not_nullable(value, version, path)
            if found:
                return found
    return None


def first_error(values) -> int:
    """The first non-zero `error_code` anywhere in an answer's values (0 if none)."""
    if isinstance(values, dict):
        code = values.get("error_code")
        if code:
            return int(code)
        values = list(values.values())
    if isinstance(values, list):
        for v in values:
            if isinstance(v, (dict, list)):
                code = first_error(v)
                if code:
                    return code
    return 0
