"""Each Kafka API, answered by the broker's own handlers: translate the request, call, translate the answer.

The lab's JSON APIs are per partition and per member (`Fetch` reads one
partition, `OffsetCommit` takes a list of offsets); Kafka's requests carry
topics with partitions. Every method here takes a decoded Kafka request and
returns the values of its response (`messages.build` makes the message): it
calls the very handlers the JSON listener calls (`WireServer.dispatch`), once
per partition where the lab's API is per partition, so a real client and a
lab consumer meet the same broker and the same coordinator.

What the lab's answers lack is filled the way a Kafka broker without the
feature would: no leader epochs (-1), no aborted transactions, the log start
offset 0 (the lab's logs are never truncated), the in-sync replicas only the
leader (no replication, `partition_log.py`). Errors are Kafka's codes, at the
level the schema has them (per partition, per group, or the whole answer).

Departures: Metadata never creates a topic (Kafka's auto.create.topics.enable;
the lab's experiments create theirs); FindCoordinator for a transactional id
is INVALID_REQUEST (no transactions); ListOffsets by time reads the log from
its start (no time index); DescribeGroups names the members and nothing more
of them; an OffsetCommit's metadata string is not kept (OffsetFetch answers "").
"""

from __future__ import annotations

import uuid

from ..broker.zk_layout import topic_uuid
from ..wire import ErrorCode
from . import kip848
from . import records as R
from . import subscriptions as S
from .messages import first_error

EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
NO_EPOCH = -1
NO_OPERATIONS = None  # "authorized operations not asked for": kafka-python writes Kafka's INT32 MIN
ZERO_UUID = uuid.UUID(int=0)
CLUSTER_ID = "rebalance-lab"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # Kafka's `Topic.isInternal`
FETCH_RECORDS_PER_PARTITION = 500


class KafkaApis:
    """The translations for one broker; `call(api, **fields)` is the broker's JSON dispatch."""

    def __init__(self, broker):
        self.broker = broker

    def call(self, api: str, client_id: str, version: int = 1, **fields) -> dict:
        """The broker's answer to one request of the lab's protocol (`version`: of that protocol's API)."""
        return self.broker.server.dispatch({"api": api, "version": version, "correlation_id": -1,
                                            "client_id": client_id, **fields})

    def topic_uuids(self) -> dict[str, uuid.UUID]:
        """{topic: its id}, as Kafka's wire carries it (KIP-516)."""
        return {name: topic_uuid(i) for name, i in self.broker.topic_ids().items()}

    # -- cluster and data ------------------------------------------------------------------
    def metadata(self, request, version: int, client_id: str) -> dict:
        lab = self.call("Metadata", client_id)
        brokers = [{"node_id": int(i), "host": b["host"], "port": b["kafka_port"], "rack": None}
                   for i, b in sorted(lab["brokers"].items(), key=lambda kv: int(kv[0])) if b.get("kafka_port")]
        ids = self.topic_uuids()
        names = {i: name for name, i in ids.items()}
        # v10+ may name a topic by its id alone (KIP-516)
        wanted = None if request.topics is None else [t.name or names.get(getattr(t, "topic_id", None), "")
                                                      for t in request.topics]
        topics = []
        for name in (sorted(lab["topics"]) if wanted is None else wanted):
            leaders = lab["topics"].get(name)
            if leaders is None:  # Kafka would create it (auto.create.topics.enable); the lab creates topics itself
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": ZERO_UUID, "is_internal": False, "partitions": []})
                continue
            replicas = lab.get("replicas", {}).get(name, {})
            partitions = []
            for p, leader in sorted(leaders.items(), key=lambda kv: int(kv[0])):
                error = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                partitions.append({"error_code": error, "partition_index": int(p), "leader_id": leader,
                                   "leader_epoch": NO_EPOCH, "replica_nodes": replicas.get(p, [leader]),
                                   "isr_nodes": [leader] if leader >= 0 else [], "offline_replicas": []})
            topics.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": ids.get(name, ZERO_UUID),
                           "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
                           "authorized_operations": NO_OPERATIONS})
        return {"brokers": brokers, "cluster_id": CLUSTER_ID, "controller_id": lab.get("controller", -1),
                "topics": topics, "authorized_operations": NO_OPERATIONS}

    def list_offsets(self, request, version: int, client_id: str) -> dict:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                out = {"partition_index": p.partition_index, "timestamp": -1, "offset": -1, "leader_epoch": NO_EPOCH}
                if p.timestamp < EARLIEST:  # -3 (max timestamp) and below: ListOffsets v7+, not served here
                    out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                elif p.timestamp >= 0:
                    out.update(self._offset_for_time(topic.name, p.partition_index, p.timestamp, client_id))
                else:
                    lab = self.call("ListOffsets", client_id, topic=topic.name, partition=p.partition_index,
                                    which="earliest" if p.timestamp == EARLIEST else "latest")
                    out["error_code"] = lab["error_code"]
                    out["offset"] = lab.get("offset", -1)
                partitions.append(out)
            topics.append({"name": topic.name, "partitions": partitions})
        return {"topics": topics}

    def _offset_for_time(self, topic: str, partition: int, timestamp_ms: int, client_id: str) -> dict:
        """Kafka's lookup by time: the first record whose timestamp is at or after `timestamp_ms` (offset and
        timestamp -1 if none). The lab's logs have no time index, so it reads the log from its start."""
        offset = 0
        while True:
            lab = self.call("Fetch", client_id, topic=topic, partition=partition, offset=offset,
                            max_records=FETCH_RECORDS_PER_PARTITION, max_wait_ms=0)
            if lab["error_code"] != 0 or not lab["records"]:
                return {"error_code": lab["error_code"], "offset": -1, "timestamp": -1}
            for record in lab["records"]:
                if record["ts_ms"] >= timestamp_ms:
                    return {"error_code": ErrorCode.NONE, "offset": record["offset"], "timestamp": record["ts_ms"]}
            offset = lab["records"][-1]["offset"] + 1

    def fetch(self, request, version: int, client_id: str) -> dict:
        """Read every partition without waiting; if nothing came and the request may wait, wait for the next
        append to any log of this broker (or `max_wait_ms`) and read once more."""
        seen = self.broker.appends_seen()
        answer = self._fetch_once(request, client_id)
        if not _has_records_or_error(answer) and request.max_wait_ms > 0 and request.min_bytes > 0:
            if self.broker.wait_for_append(seen, min(request.max_wait_ms, 30_000) / 1000):
                answer = self._fetch_once(request, client_id)
        return answer

    def _fetch_once(self, request, client_id: str) -> dict:
        budget = request.max_bytes if request.max_bytes and request.max_bytes > 0 else 1 << 30
        responses = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                lab = self.call("Fetch", client_id, topic=topic.topic, partition=p.partition,
                                offset=p.fetch_offset, max_records=FETCH_RECORDS_PER_PARTITION, max_wait_ms=0)
                records = b""
                if lab["error_code"] == 0 and budget > 0:
                    records, _ = R.encode_batch(lab["records"], min(p.partition_max_bytes, budget))
                    budget -= len(records)
                high_watermark = lab.get("high_watermark", -1)
                partitions.append({"partition_index": p.partition, "error_code": lab["error_code"],
                                   "high_watermark": high_watermark, "last_stable_offset": high_watermark,
                                   "log_start_offset": 0 if lab["error_code"] == 0 else -1,
                                   "aborted_transactions": None, "records": records})
            responses.append({"topic": topic.topic, "partitions": partitions})
        return {"throttle_time_ms": 0, "responses": responses}

    def produce(self, request, version: int, client_id: str) -> dict | None:
        """Append each partition's records. acks=0 wants no answer: none is sent, unless a partition failed,
        when Kafka closes the connection so that the producer refreshes its metadata (so does the lab)."""
        from .server import ConnectionMustClose

        responses = []
        for topic in request.topic_data:
            partitions = []
            for p in topic.partition_data:
                out = {"index": p.index, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
                if topic.name in INTERNAL_TOPICS:  # only Kafka's own writers append there (ReplicaManager)
                    out["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
                    partitions.append(out)
                    continue
                try:
                    values = R.decode_values(p.records)
                except R.RecordRefused as exc:
                    self.broker.record("kafka_record_refused", topic=topic.name, partition=p.index, reason=str(exc))
                    out["error_code"] = ErrorCode.INVALID_RECORD
                except Exception as exc:  # a batch that does not decode: Kafka's CorruptRecordException
                    self.broker.record("kafka_record_refused", topic=topic.name, partition=p.index,
                                       reason=f"corrupt batch ({exc.__class__.__name__}: {exc})")
                    out["error_code"] = ErrorCode.CORRUPT_MESSAGE
                else:
                    if not values:  # a batch cut short decodes to nothing (Kafka: INVALID_RECORD)
                        out["error_code"] = ErrorCode.INVALID_RECORD
                        partitions.append(out)
                        continue
                    lab = self.call("Produce", client_id, topic=topic.name, partition=p.index, values=values)
                    out["error_code"] = lab["error_code"]
                    out["base_offset"] = lab.get("base_offset", -1)
                    out["log_start_offset"] = 0 if lab["error_code"] == 0 else -1
                partitions.append(out)
            responses.append({"name": topic.name, "partition_responses": partitions})
        if request.acks == 0:
            if first_error(responses):
                raise ConnectionMustClose("an acks=0 Produce failed on some partition (Kafka closes the connection "
                                          "so that the producer refreshes its metadata)")
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    # -- the group coordinator ---------------------------------------------------------------
    def find_coordinator(self, request, version: int, client_id: str) -> dict:
        if version >= 1 and request.key_type != 0:  # 1 = a transactional id: the lab has no transactions
            return {"error_code": ErrorCode.INVALID_REQUEST, "error_message": "the lab coordinates groups only",
                    "node_id": -1, "host": "", "port": -1}
        lab = self.call("FindCoordinator", client_id, group_id=request.key)
        address = self.broker.kafka_address(lab.get("node_id", -1)) if lab["error_code"] == 0 else None
        if lab["error_code"] == 0 and address is None:  # it has no Kafka listener yet, as far as we know
            lab = {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "message": "no Kafka listener known yet"}
        host, port = address or ("", -1)
        return {"error_code": lab["error_code"], "error_message": lab.get("message") or None,
                "node_id": lab.get("node_id", -1) if address else -1, "host": host, "port": port}

    def join_group(self, request, version: int, client_id: str) -> dict:
        protocols = [{"name": p.name, "metadata": S.from_kafka_subscription(p.metadata)} for p in request.protocols]
        lab = self.call("JoinGroup", client_id, group_id=request.group_id, member_id=request.member_id,
                        group_instance_id=request.group_instance_id if version >= 5 else None,
                        session_timeout_ms=request.session_timeout_ms,
                        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1
                        else request.session_timeout_ms,
                        protocol_type=request.protocol_type, protocols=protocols)
        members = [{"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                    "metadata": S.to_kafka_subscription(m.get("metadata") or {})} for m in lab.get("members") or []]
        return {"error_code": lab["error_code"], "generation_id": lab.get("generation_id", -1),
                "protocol_name": lab.get("protocol_name") or "", "leader": lab.get("leader") or "",
                "member_id": lab.get("member_id") or request.member_id, "members": members}

    def sync_group(self, request, version: int, client_id: str) -> dict:
        assignments = [{"member_id": a.member_id, "assignment": S.from_kafka_assignment(a.assignment)}
                       for a in request.assignments or []]
        lab = self.call("SyncGroup", client_id, group_id=request.group_id, generation_id=request.generation_id,
                        member_id=request.member_id, group_instance_id=_instance(request, version, 3),
                        assignments=assignments)
        return {"error_code": lab["error_code"], "assignment": S.to_kafka_assignment(lab.get("assignment"))}

    def heartbeat(self, request, version: int, client_id: str) -> dict:
        lab = self.call("Heartbeat", client_id, group_id=request.group_id, generation_id=request.generation_id,
                        member_id=request.member_id, group_instance_id=_instance(request, version, 3))
        return {"error_code": lab["error_code"]}

    def leave_group(self, request, version: int, client_id: str) -> dict:
        lab = self.call("LeaveGroup", client_id, group_id=request.group_id, member_id=request.member_id)
        return {"error_code": lab["error_code"]}

    def offset_commit(self, request, version: int, client_id: str) -> dict:
        offsets = [{"topic": t.name, "partition": p.partition_index, "offset": p.committed_offset}
                   for t in request.topics for p in t.partitions]
        lab = self.call("OffsetCommit", client_id, group_id=request.group_id,
                        generation_id=request.generation_id_or_member_epoch, member_id=request.member_id,
                        group_instance_id=_instance(request, version, 7), offsets=offsets)
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                                            "error_code": lab["error_code"]} for p in t.partitions]}
                           for t in request.topics]}

    def offset_fetch(self, request, version: int, client_id: str) -> dict:
        if version >= 8:  # one request for many groups, each with its member (v9: KIP-848's member epoch)
            groups = []
            for g in request.groups:
                one = self._offset_fetch_group(g.group_id, g.topics, version, client_id,
                                               member_id=getattr(g, "member_id", None),
                                               member_epoch=getattr(g, "member_epoch", -1))
                groups.append({"group_id": g.group_id, "topics": one["topics"], "error_code": one["error_code"]})
            return {"groups": groups}
        return self._offset_fetch_group(request.group_id, request.topics, version, client_id)

    def _offset_fetch_group(self, group_id: str, requested, version: int, client_id: str, member_id=None,
                            member_epoch: int = -1) -> dict:
        wanted = None if requested is None else [[t.name, p] for t in requested for p in t.partition_indexes]
        fields = {"member_id": member_id, "member_epoch": member_epoch} if member_id is not None else {}
        lab = self.call("OffsetFetch", client_id, group_id=group_id, partitions=wanted, **fields)
        by_topic: dict[str, list[dict]] = {}
        for o in lab.get("offsets") or []:
            by_topic.setdefault(o["topic"], []).append({
                "partition_index": o["partition"], "committed_offset": o["offset"], "committed_leader_epoch": NO_EPOCH,
                "metadata": "", "error_code": ErrorCode.NONE})
        if version < 2 and lab["error_code"] != 0 and wanted:  # v0-1 have no top-level error: per partition
            for t, p in wanted:
                by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": -1,
                                                   "committed_leader_epoch": NO_EPOCH, "metadata": "",
                                                   "error_code": lab["error_code"]})
        return {"error_code": lab["error_code"],
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]}

    def describe_groups(self, request, version: int, client_id: str) -> dict:
        groups = []
        for group_id in request.groups:
            lab = self.call("DescribeGroups", client_id, group_id=group_id)
            members = [{"member_id": m, "group_instance_id": None, "client_id": "", "client_host": "",
                        "member_metadata": b"", "member_assignment": b""} for m in lab.get("members") or []]
            groups.append({"error_code": lab["error_code"], "group_id": group_id,
                           "group_state": lab.get("state", "Dead"), "protocol_type": "consumer",
                           "protocol_data": lab.get("protocol") or "", "members": members,
                           "authorized_operations": NO_OPERATIONS})
        return {"groups": groups}


def _instance(request, version: int, since: int):
    return request.group_instance_id if version >= since else None


def _has_records_or_error(answer: dict) -> bool:
    """Kafka answers a Fetch at once when it has data or any partition has an error."""
    return any(p["records"] or p["error_code"] for t in answer["responses"] for p in t["partitions"])


HANDLERS = {
    "Metadata": KafkaApis.metadata, "ListOffsets": KafkaApis.list_offsets, "Fetch": KafkaApis.fetch,
    "Produce": KafkaApis.produce, "FindCoordinator": KafkaApis.find_coordinator,
    "JoinGroup": KafkaApis.join_group, "SyncGroup": KafkaApis.sync_group, "Heartbeat": KafkaApis.heartbeat,
    "LeaveGroup": KafkaApis.leave_group, "OffsetCommit": KafkaApis.offset_commit,
    "OffsetFetch": KafkaApis.offset_fetch, "DescribeGroups": KafkaApis.describe_groups,
    "ConsumerGroupHeartbeat": kip848.heartbeat,
}

