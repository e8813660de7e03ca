"""A lab broker: registered in ZooKeeper, leading some partitions, serving them over TCP.

It stands in for a Kafka 0.8 broker (`KafkaServer`) with what the consumer
experiments need:

    STARTING --(wire server up, /brokers/ids/<id> created)--> RUNNING
    RUNNING  --stop(): session closed, node deleted at once--> STOPPED
    RUNNING  --process killed: the node stays until ZooKeeper expires the session

APIs served (see `wire.py` for the framing):

| API           | request fields                                        | answer                        |
|---------------|-------------------------------------------------------|-------------------------------|
| `Produce`     | topic, partition, values (list of strings)            | base_offset                   |
| `Fetch`       | topic, partition, offset, max_records, max_wait_ms    | records, high_watermark       |
| `ListOffsets` | topic, partition, which (`earliest` or `latest`)      | offset                        |
| `Metadata`    | (none)                                                | brokers, topics (leader per partition) |

A request for a partition this broker does not lead is answered
NOT_LEADER_OR_FOLLOWER; for a topic it does not know, UNKNOWN_TOPIC_OR_PARTITION.

Two listeners serve these APIs, and whatever plug-ins add: the lab's JSON
one (`port`, `wire.py`) and a Kafka one (`kafka_port`,
`lab_cluster/kafka_listener/`), which speaks Kafka's binary protocol to real
Kafka clients and answers through the same handlers. Both are in the
broker's registration, as Kafka 0.9+ lists a broker's listeners in
`endpoints` (`zk_layout.broker_registration`).

Plug-in point: `plugins` are `"module:function"` strings; each function is
called with the broker before it starts serving and may add APIs with
`broker.server.add_api(...)` (the coordinator era's group coordinator does),
read `broker.config` (the broker's `--config KEY=VALUE` settings), follow
partition leadership with `broker.on_leadership(callback)`, append to or
read the partitions this broker leads with `broker.leader_log(topic, p)`, and
read what it knows of the cluster with `broker.metadata()`. What
the function returns is kept; if it has a `stop()`, the broker calls it first
when it stops. The cluster package never imports a consumer family; the family
names itself.
"""

from __future__ import annotations

import importlib
import json
import threading

from kazoo.client import KazooClient

from ..kafka_listener.server import KafkaListener
from ..partition_log import PartitionLog
from ..ports import LOOPBACK
from ..trace import TraceRecorder
from ..wire import ErrorCode, Fields, ListOf, Maybe, WireError, WireServer, shape_checked
from . import zk_layout as L
from .admin import broker_addresses
from .controller import Controller

# what each request of the broker's own APIs carries (`shape_checked`: a field of another shape is the client's
# INVALID_REQUEST, never a TypeError in a handler)
_PARTITION = {"topic": str, "partition": int}
PRODUCE = Fields({**_PARTITION, "values": ListOf(str)})
FETCH = Fields({**_PARTITION, "offset": int, "max_wait_ms": Maybe(int), "max_records": Maybe(int)})
LIST_OFFSETS = Fields({**_PARTITION, "which": Maybe(str)})


class Broker:
    def __init__(self, broker_id: int, zk_connect: str, logs_dir: str, *, port: int = 0,
                 session_timeout_s: float = 6.0, trace: TraceRecorder | None = None,
                 plugins: tuple[str, ...] = (), config: dict[str, str] | None = None, kafka_port: int = 0):
        self.broker_id = broker_id
        self.zk_connect = zk_connect
        self.logs_dir = logs_dir
        self.trace = trace
        self.session_timeout_s = session_timeout_s
        self.config = dict(config or {})
        self._leadership_listeners: list = []
        self.server = WireServer(port=port, name=f"broker-{broker_id}")
        self.port = self.server.port
        self.kafka_listener = KafkaListener(self, port=kafka_port)
        self.kafka_port = self.kafka_listener.port
        self._appended = threading.Condition()  # told of every Produce: a Kafka Fetch of many partitions waits on it
        self._appends = 0
        self.zk: KazooClient | None = None
        self.controller: Controller | None = None
        self._lock = threading.RLock()
        self._assignments: dict[str, dict[int, list[int]]] = {}
        self._topic_ids: dict[str, str] = {}  # topic -> its id (Kafka 2.8+), from its znode
        self._leaders: dict[tuple[str, int], int] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._stopping = False  # set by `stop`: leads nothing from then on, whatever ZooKeeper still says
        self._brokers: dict[int, tuple[str, int]] = {}
        self._kafka_brokers: dict[int, tuple[str, int]] = {}
        self._controller = L.NO_LEADER
        self._watched_topics: set[str] = set()
        self.server.add_api("Produce", (1,), shape_checked("Produce", self._produce, PRODUCE))
        self.server.add_api("Fetch", (1,), shape_checked("Fetch", self._fetch, FETCH))
        self.server.add_api("ListOffsets", (1,), shape_checked("ListOffsets", self._list_offsets, LIST_OFFSETS))
        self.server.add_api("Metadata", (1,), self._metadata)
        self.plugins = []  # what each plug-in function returned: stopped first in stop()
        for spec in plugins:
            module, _, func = spec.partition(":")
            self.plugins.append(getattr(importlib.import_module(module), func)(self))

    def record(self, kind: str, **fields) -> None:
        if self.trace is not None:
            self.trace.record(kind, broker=self.broker_id, **fields)

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> Broker:
        self.server.start()
        self.kafka_listener.start()
        self.zk = KazooClient(hosts=self.zk_connect, timeout=self.session_timeout_s)
        self.zk.start(timeout=30)
        self.zk.ensure_path(L.BROKER_IDS)
        self.zk.ensure_path(L.BROKER_TOPICS)
        self.zk.create(L.broker_path(self.broker_id), L.broker_registration(LOOPBACK, self.port, self.kafka_port),
                       ephemeral=True)
        self.record("broker_registered", port=self.port, kafka_port=self.kafka_port,
                    session=f"0x{self.zk.client_id[0]:x}")
        self.zk.ChildrenWatch(L.BROKER_IDS, self._on_brokers)
        self.zk.ChildrenWatch(L.BROKER_TOPICS, self._on_topics)
        self.zk.DataWatch(L.CONTROLLER, self._on_controller)
        self.controller = Controller(self.zk, self.broker_id, on_event=self.record)
        self.controller.start()
        return self

    def stop(self) -> None:
        """Leave gracefully: stop the plug-ins, stop leading (the logs closed: a Produce or Fetch now gets
        NOT_LEADER_OR_FOLLOWER), close the session (the registration goes at once, and the controller moves
        leadership), stop serving.

        The logs close before the session does. In the other order the broker kept appending to a log after its
        registration went, while the partition's new leader had already opened the shared file and counted its
        records: those late records were missing from the new leader's count, and a consumer that had read them
        was past the end of its log (seen: OFFSET_OUT_OF_RANGE, offset 200 outside [0, 199], in a standard run's
        broker bounce). Kafka's controlled shutdown likewise moves leadership away before the broker goes."""
        for plugin in self.plugins:
            if hasattr(plugin, "stop"):
                try:
                    plugin.stop()
                except Exception as exc:  # noqa: BLE001 - one plug-in's failure must not keep the broker registered
                    self.record("plugin_stop_failed", plugin=type(plugin).__name__,
                                error=f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._stopping = True
            for log in self._logs.values():
                log.close()
            self._logs.clear()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None
        self.kafka_listener.stop()
        self.server.stop()
        self.record("broker_stopped")

    # -- what this broker knows, from ZooKeeper watches ----------------------------
    def _on_brokers(self, ids):
        brokers = broker_addresses(self.zk, ids)
        kafka = broker_addresses(self.zk, ids, listener=L.KAFKA_LISTENER)
        with self._lock:
            self._brokers = brokers
            self._kafka_brokers = kafka

    def _on_controller(self, data, stat, event=None):
        with self._lock:
            self._controller = L.parse_controller(data) if data else L.NO_LEADER

    def _on_topics(self, topics):
        for topic in topics:
            if topic not in self._watched_topics:
                self._watched_topics.add(topic)
                self.zk.DataWatch(L.topic_path(topic), lambda data, stat, event=None, t=topic:
                                  self._on_assignment(t, data))

    def _on_assignment(self, topic: str, data: bytes | None) -> None:
        if not data:
            return
        assignment = L.parse_topic_assignment(data)
        topic_id = L.parse_topic_id(data)
        with self._lock:
            known = self._assignments.get(topic, {})
            self._assignments[topic] = assignment
            if topic_id is not None:
                self._topic_ids[topic] = topic_id
        for partition in assignment:
            if partition not in known:
                self.zk.DataWatch(L.partition_state_path(topic, partition),
                                  lambda d, s, event=None, t=topic, p=partition: self._on_state(t, p, d))

    def _on_state(self, topic: str, partition: int, data: bytes | None) -> None:
        if not data:
            return
        leader = json.loads(data)["leader"]
        key = (topic, partition)
        with self._lock:
            was = self._leaders.get(key)
            self._leaders[key] = leader
            if leader == self.broker_id and key not in self._logs and not self._stopping:
                # Open (again): earlier leaders may have appended since we last led.
                self._logs[key] = PartitionLog.open(self.logs_dir, topic, partition)
            elif leader != self.broker_id and key in self._logs:
                self._logs.pop(key).close()
        if was != leader:
            self.record("leader_seen", topic=topic, partition=partition, leader=leader)
            if self.broker_id in (was, leader):
                for listener in self._leadership_listeners:
                    listener(topic, partition, leader == self.broker_id)

    # -- for plug-ins -------------------------------------------------------------------
    def on_leadership(self, listener) -> None:
        """Call `listener(topic, partition, leads)` whenever this broker starts or stops leading a partition."""
        self._leadership_listeners.append(listener)

    def leader_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a partition this broker leads, or None."""
        with self._lock:
            return self._logs.get((topic, partition))

    def led_partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) this broker leads now."""
        with self._lock:
            return sorted(self._logs)

    def leader_address(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        """(broker id, host, port) of the partition's leader as this broker knows it, or None."""
        with self._lock:
            leader = self._leaders.get((topic, partition), L.NO_LEADER)
            address = self._brokers.get(leader)
        return (leader, *address) if address else None

    def kafka_address(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of a broker's Kafka listener, as its registration says, or None."""
        with self._lock:
            return self._kafka_brokers.get(broker_id)

    def topic_ids(self) -> dict[str, str]:
        """{topic: its id} as the topics' znodes say (Kafka 2.8+'s topic ids)."""
        with self._lock:
            return dict(self._topic_ids)

    def appends_seen(self) -> int:
        """How many Produce requests this broker has appended so far (for `wait_for_append`)."""
        with self._appended:
            return self._appends

    def wait_for_append(self, seen: int, timeout_s: float) -> bool:
        """Block until a Produce appends after `seen` of them were counted, or `timeout_s`; True if one did."""
        with self._appended:
            return self._appended.wait_for(lambda: self._appends > seen, timeout_s)

    def partition_count(self, topic: str) -> int:
        """How many partitions `topic` has, as this broker's metadata says (0: no such topic)."""
        with self._lock:
            return len(self._assignments.get(topic, {}))

    def knows_topic(self, topic: str) -> bool:
        with self._lock:
            return topic in self._assignments

    def _log_for(self, request: dict) -> PartitionLog:
        topic, partition = request["topic"], request["partition"]
        with self._lock:
            if topic not in self._assignments or partition not in self._assignments[topic]:
                raise WireError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
            log = self._logs.get((topic, partition))
            if log is None:
                leader = self._leaders.get((topic, partition), L.NO_LEADER)
                if leader == L.NO_LEADER:
                    raise WireError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
                raise WireError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is led by {leader}")
            return log

    # -- API handlers ----------------------------------------------------------------
    def _produce(self, request: dict) -> dict:
        base_offset = self._log_for(request).append(request["values"])
        with self._appended:
            self._appends += 1
            self._appended.notify_all()
        return {"base_offset": base_offset}

    def _fetch(self, request: dict) -> dict:
        offset = request["offset"]
        max_wait_ms = min(request.get("max_wait_ms") or 0, 30_000)
        max_records = 500 if request.get("max_records") is None else request["max_records"]
        log = self._log_for(request)
        if max_wait_ms > 0 and offset == log.log_end_offset:
            log.wait_for(offset, max_wait_ms / 1000)
        records = log.read(offset, max_records)
        return {"records": records, "high_watermark": log.log_end_offset}

    def _list_offsets(self, request: dict) -> dict:
        which = request.get("which") or "latest"
        log = self._log_for(request)
        if which not in ("earliest", "latest"):
            raise WireError(ErrorCode.INVALID_REQUEST, "which must be 'earliest' or 'latest'")
        return {"offset": 0 if which == "earliest" else log.log_end_offset}

    def metadata(self) -> dict:
        """What a `Metadata` request answers: {"brokers": {id: {host, port, kafka_port}}, "topics": {t: {p:
        leader}}, "replicas": {t: {p: [broker ids]}}, "controller": id}."""
        return self._metadata({})

    def _metadata(self, request: dict) -> dict:
        with self._lock:
            return {"brokers": {str(i): {"host": host, "port": port,
                                         "kafka_port": self._kafka_brokers.get(i, (None, None))[1]}
                                for i, (host, port) in self._brokers.items()},
                    "topics": {t: {str(p): self._leaders.get((t, p), L.NO_LEADER) for p in a}
                               for t, a in self._assignments.items()},
                    "replicas": {t: {str(p): list(r) for p, r in a.items()} for t, a in self._assignments.items()},
                    "controller": self._controller}

