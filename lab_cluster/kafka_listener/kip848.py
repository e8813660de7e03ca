"""ConsumerGroupHeartbeat (KIP-848's consumer protocol) on the Kafka listener.

kafka-python has no schema for this API (its docs list KIP-848 as not
supported), so its messages come from kio (Aiven's dataclasses, generated
from Kafka's own JSON schemas, `kio.schema.consumer_group_heartbeat`); the
request header and response header are kafka-python's, as for every other API.

On Kafka's wire the protocol names topics by id (KIP-516), where the lab's
coordinator names them: the translation maps ids to names with the topic ids
the brokers keep in ZooKeeper (`zk_layout.new_topic_id`) and back. Version 1
(Kafka 4.0, the only one librdkafka sends) has the member make its own id
(KIP-1082): a join without one is INVALID_REQUEST, as in Kafka's
`throwIfConsumerGroupHeartbeatRequestIsInvalid`; version 0 lets the
coordinator make it.
"""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import dataclass

from kafka.protocol.api_header import RequestHeader, ResponseHeader
from kafka.protocol.api_key import ApiKey
from kio.schema.consumer_group_heartbeat import v0, v1
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from ..wire import ErrorCode

_VERSIONS = {0: v0, 1: v1}
_SIZE_BYTES = 4


@dataclass(frozen=True)
class ServedHeartbeat:
    """ConsumerGroupHeartbeat in `messages.SERVED`: the same interface as `messages.Served`, kio's codec."""

    key: ApiKey = ApiKey.ConsumerGroupHeartbeat
    min_version: int = 0
    max_version: int = 1

    @property
    def name(self) -> str:
        return self.key.name

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def decode(self, frame: bytes, version: int):
        buffer = io.BytesIO(frame)
        header = RequestHeader.decode(buffer, flexible=True)  # every version of this API is flexible
        request, _ = entity_reader(_VERSIONS[version].request.ConsumerGroupHeartbeatRequest)(
            memoryview(frame), buffer.tell())
        return request, header.client_id or ""

    def encode(self, values: dict, version: int, correlation_id: int) -> bytes:
        schema = _VERSIONS[version].response
        assignment = values.get("assignment")
        response = schema.ConsumerGroupHeartbeatResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            error_code=KioErrorCode(int(values["error_code"])), error_message=values.get("error_message"),
            member_id=values.get("member_id"), member_epoch=i32(values.get("member_epoch", 0)),
            heartbeat_interval=i32Timedelta.parse(datetime.timedelta(milliseconds=values.get("heartbeat_interval_ms",
                                                                                              0))),
            assignment=None if assignment is None else schema.Assignment(topic_partitions=tuple(
                schema.TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in partitions))
                for topic_id, partitions in assignment)))
        body = io.BytesIO()
        entity_writer(schema.ConsumerGroupHeartbeatResponse)(body, response)
        header = ResponseHeader(correlation_id=correlation_id).encode(flexible=True)
        payload = bytes(header) + body.getvalue()
        return len(payload).to_bytes(_SIZE_BYTES, "big") + payload


def heartbeat(apis, request, version: int, client_id: str) -> dict:
    """The coordinator's answer to one heartbeat, topics by id on the way in and out."""
    ids = apis.topic_uuids()
    names = {i: name for name, i in ids.items()}
    if version >= 1 and request.member_epoch == 0 and not request.member_id:
        return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "MemberId can't be empty."}
    owned = None
    if request.topic_partitions is not None:  # an id no topic has any more cannot be owned: left out
        owned = [{"topic": names[tp.topic_id], "partitions": list(tp.partitions)}
                 for tp in request.topic_partitions if tp.topic_id in names]
    timeout = request.rebalance_timeout
    lab = apis.call("ConsumerGroupHeartbeat", client_id, version=0, group_id=request.group_id,
                    member_id=request.member_id, member_epoch=int(request.member_epoch),
                    instance_id=request.instance_id, rack_id=request.rack_id,
                    rebalance_timeout_ms=-1 if timeout is None else int(timeout.total_seconds() * 1000),
                    subscribed_topic_names=None if request.subscribed_topic_names is None
                    else list(request.subscribed_topic_names),
                    subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1+
                    server_assignor=request.server_assignor,
                    topic_partitions=owned)
    assignment = lab.get("assignment")
    return {"error_code": lab["error_code"], "error_message": lab.get("message"),
            "member_id": lab.get("member_id"), "member_epoch": lab.get("member_epoch", 0),
            "heartbeat_interval_ms": lab.get("heartbeat_interval_ms", 0),
            "assignment": None if assignment is None else [
                (ids.get(row["topic"], uuid.UUID(int=0)), row["partitions"])
                for row in assignment["topic_partitions"]]}
