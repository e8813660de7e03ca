"""The group coordinator hosted by a broker: the plug-in that wires `GroupCoordinator` to the network.

Start a broker with it::

    python -m lab_cluster.broker --id 1 --zk ZK --trial-dir DIR \\
        --plugin modern_coord.coordinator.service:install \\
        --config offsets.topic.num.partitions=5 --config group.initial.rebalance.delay.ms=0

What it adds to the broker:

- `FindCoordinator` (group_id) -> node_id, host, port: the leader of partition
  ``abs(hash(group_id)) % offsets.topic.num.partitions`` of `__consumer_offsets`.
  The first request creates the topic (as Kafka auto-creates it) and is
  answered COORDINATOR_NOT_AVAILABLE until it has leaders.
- `JoinGroup`, `SyncGroup` (held open until the rebalance completes),
  `Heartbeat`, `LeaveGroup`, `OffsetCommit`, `OffsetFetch`, answered by the
  coordinator, and `DescribeGroups` (state, generation, leader, members).
- `ConsumerGroupHeartbeat` (KIP-848's consumer protocol, answered at once:
  `consumer_protocol.py`); its consumer groups' target assignments read the
  topics' partition counts from this broker's metadata.
  A static member names its `group_instance_id` in the first five (the
  coordinator reads it from the request as sent). Each request and its
  answer is recorded in the broker's trace as a `coordinator_request` event
  (api, group, member, generation, error).
- Leadership of an offsets partition makes this broker coordinator of its
  groups: it replays the partition's log (offset commits and group metadata)
  before answering for them (COORDINATOR_LOAD_IN_PROGRESS meanwhile); losing
  it unloads them (NOT_COORDINATOR). Because the lab's partition logs are
  shared files (no replication, `lab_cluster/partition_log.py`), the new
  leader after a broker failure reads every commit the old one wrote.
"""

from __future__ import annotations

import json
import threading

from lab_cluster.broker import zk_layout as L
from lab_cluster.broker.admin import write_topic
from lab_cluster.wire import Absent, ErrorCode, Fields, ListOf, Maybe, Pair, WireError

from .coordinator import CoordinatorConfig, GroupCoordinator, OffsetStore, answer

OFFSETS_TOPIC = "__consumer_offsets"
HELD_REQUEST_LIMIT_S = 600  # a held JoinGroup is answered by the rebalance timeout long before this
#: what each request carries, checked before the coordinator reads it (a field of another shape is answered
#: INVALID_REQUEST, as Kafka's request classes refuse what does not parse); ConsumerGroupHeartbeat checks its
#: own (`consumer_protocol.py: _validated`), FindCoordinator its group id (INVALID_GROUP_ID). `Absent`: the
#: coordinator reads the field with a default of its own, so a null is refused as well
_MEMBER = {"group_id": str, "member_id": str, "group_instance_id": Maybe(str), "client_id": Maybe(str)}
REQUESTS: dict[str, Fields] = {
    "JoinGroup": Fields({**_MEMBER, "member_id": Absent(str), "session_timeout_ms": int,
                         "rebalance_timeout_ms": Absent(int), "protocol_type": Absent(str),
                         "protocols": ListOf(Fields({"name": str, "metadata": Maybe(dict)}))}),
    "SyncGroup": Fields({**_MEMBER, "generation_id": int,
                         "assignments": Absent(ListOf(Fields({"member_id": str, "assignment": dict})))}),
    "Heartbeat": Fields({**_MEMBER, "generation_id": int}),
    "LeaveGroup": Fields({**_MEMBER, "member_id": Absent(str)}),
    "OffsetCommit": Fields({**_MEMBER, "member_id": Absent(str), "generation_id": Absent(int),
                            "offsets": ListOf(Fields({"topic": str, "partition": int, "offset": int}))}),
    "OffsetFetch": Fields({**_MEMBER, "member_id": Maybe(str), "member_epoch": Maybe(int),
                           "partitions": Maybe(ListOf(Pair(str, int)))}),
    "DescribeGroups": Fields({"group_id": str}),
}


class BrokerOffsetStore(OffsetStore):
    """Offset commits and group metadata as JSON records in this broker's `__consumer_offsets` partitions."""

    def __init__(self, broker):
        self.broker = broker

    def append(self, partition: int, record: dict) -> None:
        log = self.broker.leader_log(OFFSETS_TOPIC, partition)
        if log is None:
            raise WireError(ErrorCode.NOT_COORDINATOR, f"this broker no longer leads {OFFSETS_TOPIC}-{partition}")
        log.append([json.dumps(record, separators=(",", ":"))])

    def read_all(self, partition: int) -> list[dict]:
        log = self.broker.leader_log(OFFSETS_TOPIC, partition)
        records, offset = [], 0
        while log is not None:
            batch = log.read(offset, 10_000)
            if not batch:
                break
            records += [json.loads(r["value"]) for r in batch]
            offset = batch[-1]["offset"] + 1
        return records


class CoordinatorService:
    def __init__(self, broker):
        self.broker = broker
        try:
            self.config = CoordinatorConfig.from_properties(broker.config)
        except ValueError as exc:
            raise SystemExit(f"broker {broker.broker_id}: bad coordinator setting: {exc}") from None
        self.store = BrokerOffsetStore(broker)
        self.coordinator = GroupCoordinator(self.store, self.config, on_event=self._event,
                                            topic_partitions=broker.partition_count)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="coordinator-timers", daemon=True)
        server = broker.server
        server.add_api("FindCoordinator", (1,), self._find_coordinator)
        server.add_api("JoinGroup", (1,), self._held(self.coordinator.join_group, "JoinGroup"))
        server.add_api("SyncGroup", (1,), self._held(self.coordinator.sync_group, "SyncGroup"))
        server.add_api("Heartbeat", (1,), self._direct(self.coordinator.heartbeat, "Heartbeat"))
        server.add_api("LeaveGroup", (1,), self._direct(self.coordinator.leave_group, "LeaveGroup"))
        server.add_api("OffsetCommit", (1,), self._direct(self.coordinator.commit_offsets, "OffsetCommit"))
        server.add_api("OffsetFetch", (1,), self._direct(self.coordinator.fetch_offsets, "OffsetFetch"))
        server.add_api("ConsumerGroupHeartbeat", (0,), self._direct(self.coordinator.consumer.heartbeat,
                                                                    "ConsumerGroupHeartbeat"))
        server.add_api("DescribeGroups", (1,), self._describe)
        broker.on_leadership(self._leadership_changed)
        self._ticker.start()

    def _event(self, kind: str, **fields) -> None:
        self.broker.record(kind, **fields)

    def _tick(self) -> None:
        while not self._stop.wait(0.01):
            with self.coordinator.lock:
                self.coordinator.timers.run_due()

    # -- request adapters ----------------------------------------------------------------
    def _recorded(self, api: str, request: dict, result: dict) -> dict:
        self.broker.record("coordinator_request", api=api, group=request.get("group_id"),
                           member=request.get("member_id") or result.get("member_id"),
                           generation=result.get("generation_id", result.get("member_epoch",
                                                                             request.get("generation_id"))),
                           error=result.get("error", "NONE"), client=request.get("client_id"))
        return result

    def _direct(self, handler, api: str):
        def handle(request: dict) -> dict:
            try:
                if api in REQUESTS:
                    REQUESTS[api].require(api, request)
                result = handler(request)
            except WireError as exc:
                result = answer(exc.code, exc.message)
            return self._recorded(api, request, result)
        return handle

    def _held(self, handler, api: str):
        """JoinGroup and SyncGroup are answered when the group is ready: this connection's thread waits."""
        def handle(request: dict) -> dict:
            done = threading.Event()
            box: list[dict] = []

            def respond(result: dict) -> None:
                box.append(result)
                done.set()
            try:
                REQUESTS[api].require(api, request)
                handler(request, respond)
            except WireError as exc:
                respond(answer(exc.code, exc.message))
            if not done.wait(HELD_REQUEST_LIMIT_S):
                respond(answer(ErrorCode.REQUEST_TIMED_OUT, "the coordinator never completed this request"))
            return self._recorded(api, request, box[0])
        return handle

    def _describe(self, request: dict) -> dict:
        """Kafka's DescribeGroups (one group): state, generation, protocol, leader and member ids."""
        REQUESTS["DescribeGroups"].require("DescribeGroups", request)
        group_id = request.get("group_id")
        with self.coordinator.lock:
            error = self.coordinator.owner_error(group_id)
            if error is not None:
                raise WireError(error, f"broker {self.broker.broker_id} does not coordinate {group_id!r}")
            return self.coordinator.describe(group_id)

    # -- FindCoordinator -----------------------------------------------------------------
    def _find_coordinator(self, request: dict) -> dict:
        group_id = request.get("group_id")
        if not isinstance(group_id, str) or not group_id:
            raise WireError(ErrorCode.INVALID_GROUP_ID, "group_id must be a non-empty string")
        if not self.broker.knows_topic(OFFSETS_TOPIC):
            self._create_offsets_topic()
            raise WireError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {OFFSETS_TOPIC}; retry")
        partition = self.coordinator.partition_for(group_id)
        leader = self.broker.leader_address(OFFSETS_TOPIC, partition)
        if leader is None:
            raise WireError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{partition} has no leader")
        node_id, host, port = leader
        return {"node_id": node_id, "host": host, "port": port, "offsets_partition": partition}

    def _create_offsets_topic(self) -> None:
        """Kafka 0.9's `createGroupMetadataTopic` (AdminUtils.createTopic): the brokers, then the topic's path; if it
        exists already (this broker's metadata has not caught up yet), nothing is written (TopicExistsException)."""
        zk = self.broker.zk
        brokers = sorted(int(i) for i in zk.get_children(L.BROKER_IDS))
        if zk.exists(L.topic_path(OFFSETS_TOPIC)):
            return
        partitions = self.config.offsets_topic_num_partitions
        if write_topic(zk, OFFSETS_TOPIC, L.assign_replicas(partitions, brokers, 3)):  # else another broker's
            self.broker.record("offsets_topic_created", partitions=partitions)

    # -- leadership of offsets partitions --------------------------------------------------
    def _leadership_changed(self, topic: str, partition: int, leads: bool) -> None:
        if topic != OFFSETS_TOPIC:
            return
        if leads:
            self.coordinator.begin_loading(partition)
            threading.Thread(target=self._load, args=(partition,), name=f"load-offsets-{partition}",
                             daemon=True).start()
        else:
            self.coordinator.unload_partition(partition)

    def _load(self, partition: int) -> None:
        self.coordinator.load_partition(partition, self.store.read_all(partition))

    def stop(self) -> None:
        self._stop.set()


def install(broker) -> CoordinatorService:
    """The broker plug-in entry point (`--plugin modern_coord.coordinator.service:install`)."""
    return CoordinatorService(broker)  # the broker stops it (its timer thread) when it stops
