"""Where Kafka 0.8 kept cluster state in ZooKeeper, and the JSON it wrote there.

    /brokers/ids/<id>                          ephemeral, one per live broker
        {"version":4,"host":"127.0.0.1","port":9092,"jmx_port":-1,"timestamp":"1763600000000",
         "endpoints":["LAB://127.0.0.1:9092","PLAINTEXT://127.0.0.1:9093"],
         "listener_security_protocol_map":{"LAB":"PLAINTEXT","PLAINTEXT":"PLAINTEXT"}}
    /brokers/topics/<topic>                    replica assignment, and the topic's id (Kafka 2.8+, KIP-516)
        {"version":1,"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"kQ8mAK9eTbyXs2jA5Hh2Bw"}
    /brokers/topics/<topic>/partitions/<p>/state   leader and ISR, written by the controller
        {"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}
    /controller                                ephemeral: who the controller is
        {"version":1,"brokerid":1,"timestamp":"1763600000000"}
    /controller_epoch                          how many controllers there have been

Keys and value types are Kafka 0.8's (note `timestamp` is a string of
milliseconds and partition numbers are string keys), except the broker's
registration, which has Kafka 0.10.2's form (version 4, KIP-103): one endpoint
per listener, named. A lab broker has two: `LAB`, the lab's JSON protocol
that every lab consumer speaks, and `PLAINTEXT`, Kafka's binary protocol for
real Kafka clients. `host` and `port` stay, as in Kafka, for readers of the
older form: they are the `LAB` listener's, since the lab's ZooKeeper-era
consumers (Kafka 0.8's readers of this node) speak the lab's protocol.

    >>> reg = json.loads(broker_registration("127.0.0.1", 9092, 9093, timestamp_ms=1))
    >>> reg["port"], reg["endpoints"]
    (9092, ['LAB://127.0.0.1:9092', 'PLAINTEXT://127.0.0.1:9093'])
    >>> endpoint(reg, KAFKA_LISTENER), endpoint(reg, LAB_LISTENER)
    (('127.0.0.1', 9093), ('127.0.0.1', 9092))
"""

from __future__ import annotations

import base64
import json
import uuid

from lab_cluster.clock import wall_clock_ms

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"

NO_LEADER = -1
LAB_LISTENER = "LAB"  # the lab's JSON protocol (`wire.py`)
KAFKA_LISTENER = "PLAINTEXT"  # Kafka's binary protocol (`lab_cluster/kafka_listener/`)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_registration(host: str, port: int, kafka_port: int | None = None, timestamp_ms: int | None = None) -> bytes:
    endpoints = [f"{LAB_LISTENER}://{host}:{port}"]
    if kafka_port is not None:
        endpoints.append(f"{KAFKA_LISTENER}://{host}:{kafka_port}")
    return _dump({"version": 4, "host": host, "port": port, "jmx_port": -1,
                  "timestamp": str(timestamp_ms if timestamp_ms is not None else wall_clock_ms()),
                  "endpoints": endpoints,
                  "listener_security_protocol_map": {name.split("://")[0]: "PLAINTEXT" for name in endpoints}})


def endpoint(registration: dict, listener: str) -> tuple[str, int] | None:
    """(host, port) of a listener in a parsed registration; a registration without endpoints (Kafka 0.8's
    form) has only the `LAB` one, in `host` and `port`."""
    for entry in registration.get("endpoints") or []:
        name, _, address = entry.partition("://")
        if name == listener:
            host, _, port = address.rpartition(":")
            return host, int(port)
    if listener == LAB_LISTENER:
        return registration["host"], registration["port"]
    return None


def parse_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def topic_assignment(replicas: dict[int, list[int]], topic_id: str | None = None) -> bytes:
    """The topic's znode: its replicas and, if given, its id (`new_topic_id()`), which KIP-848's consumer protocol
    names topics by on Kafka's wire."""
    out = {"version": 1, "partitions": {str(p): list(r) for p, r in sorted(replicas.items())}}
    if topic_id is not None:
        out["topic_id"] = topic_id
    return _dump(out)


def new_topic_id() -> str:
    """A topic id as Kafka writes it: a random UUID in URL-safe base64 without padding (`Uuid.toString`).

    >>> len(new_topic_id()), uuid.UUID(bytes=topic_uuid(new_topic_id()).bytes).version
    (22, 4)
    """
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def topic_uuid(topic_id: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def parse_topic_id(data: bytes) -> str | None:
    return json.loads(data).get("topic_id")


def parse_topic_assignment(data: bytes) -> dict[int, list[int]]:
    return {int(p): list(r) for p, r in json.loads(data)["partitions"].items()}


def partition_state(leader: int, leader_epoch: int, isr: list[int], controller_epoch: int) -> bytes:
    return _dump({"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                  "leader_epoch": leader_epoch, "isr": list(isr)})


def controller_data(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(wall_clock_ms())})


def assign_replicas(partitions: int, brokers: list[int], replication_factor: int) -> dict[int, list[int]]:
    """Round-robin replica placement (Kafka's AdminUtils, with a fixed start index).

    >>> assign_replicas(4, [1, 2, 3], 2)
    {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 2]}
    """
    brokers = sorted(brokers)
    rf = min(replication_factor, len(brokers))
    return {p: [brokers[(p + j) % len(brokers)] for j in range(rf)] for p in range(partitions)}
