"""Starting brokers as processes, creating topics, and finding partition leaders.

    brokers = [start_broker(i, zk.connect, trial_dir) for i in (1, 2, 3)]
    create_topic(kazoo, "t", partitions=12, brokers=[1, 2, 3])   # replicas round-robin
    leaders = wait_for_leaders(kazoo, "t", 12)                   # {partition: broker id}
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from ..errors import LabError
from ..processes import LabProcess
from . import zk_layout as L


class BrokerProcess(LabProcess):
    """A broker running as its own process."""

    def __init__(self, broker_id: int, zk_connect: str, trial_dir: str | Path, *, session_timeout_ms: int = 6000,
                 trial: str = "adhoc", design: str = "cluster", plugins: tuple[str, ...] = (),
                 config: dict[str, str] | None = None, port: int = 0, kafka_port: int = 0):
        """`port` (the lab's JSON listener) and `kafka_port` (the Kafka listener) 0: any free port; a broker
        started again after a crash is given its old ones, as a Kafka broker's `listeners` stay what they were."""
        self.broker_id = broker_id
        args = ["--id", str(broker_id), "--zk", zk_connect, "--trial-dir", str(trial_dir), "--port", str(port),
                "--kafka-port", str(kafka_port),
                "--session-timeout-ms", str(session_timeout_ms), "--trial", trial, "--design", design]
        for plugin in plugins:
            args += ["--plugin", plugin]
        for key, value in (config or {}).items():
            args += ["--config", f"{key}={value}"]
        super().__init__(f"broker-{broker_id}", "lab_cluster.broker", args,
                         Path(trial_dir) / "proc" / f"broker-{broker_id}.log")
        self.port: int = self.info["port"]
        self.kafka_port: int = self.info["kafka_port"]


def start_broker(broker_id: int, zk_connect: str, trial_dir: str | Path, **kwargs) -> BrokerProcess:
    return BrokerProcess(broker_id, zk_connect, trial_dir, **kwargs)


def create_topic(zk: KazooClient, topic: str, partitions: int, brokers: list[int],
                 replication_factor: int = 3) -> dict[int, list[int]]:
    """Write the topic's replica assignment; the controller then elects its leaders.

    Idempotent for the same assignment, so a caller may retry it after a
    ConnectionLoss that hid whether the first write landed (`KazooClient.retry`)."""
    if partitions < 1:
        raise LabError(f"Topic {topic} needs at least one partition, not {partitions}.", "Use topic:N with N >= 1.")
    if not brokers:
        raise LabError(f"Topic {topic} cannot be created: no broker is registered.", "Start brokers first.")
    replicas = L.assign_replicas(partitions, brokers, replication_factor)
    write_topic(zk, topic, replicas)
    return replicas


def write_topic(zk: KazooClient, topic: str, replicas: dict[int, list[int]]) -> bool:
    """Write a topic's replica assignment; True if this call wrote it, False if it was there already with the
    same one (its id is then the first writer's); a LabError if it was there with another."""
    try:
        zk.create(L.topic_path(topic), L.topic_assignment(replicas, L.new_topic_id()), makepath=True)
        return True
    except NodeExistsError:
        if L.parse_topic_assignment(zk.get(L.topic_path(topic))[0]) != replicas:
            raise LabError(f"Topic {topic} exists already with another assignment.",
                           "Use a new topic name, or a fresh ZooKeeper.") from None
        return False


def add_partitions(zk: KazooClient, topic: str, partitions: int, brokers: list[int],
                   replication_factor: int = 3) -> dict[int, list[int]]:
    """Grow `topic` to `partitions` partitions, as Kafka's `kafka-topics.sh --alter --partitions` does in the
    ZooKeeper era (`AdminUtils.addPartitions`): the existing partitions keep their replicas, the new ones are
    placed round-robin after them, and the topic's znode is rewritten with the whole assignment (and its id).
    Every watcher of that znode hears a data change: the controller, which elects the new partitions' leaders,
    the brokers, and a ZooKeeper-era consumer's topic listener. Returns the new assignment.

    Idempotent for the same target, so a caller may retry it after a ConnectionLoss. A departure: Kafka starts
    the new partitions' round-robin at partition 0's first replica with a random shift; the lab continues its
    own fixed round-robin, as if the topic had been made with `partitions` at first."""
    data, stat = zk.get(L.topic_path(topic))
    current = L.parse_topic_assignment(data)
    if partitions == len(current):
        return current
    if partitions < len(current):
        raise LabError(f"Topic {topic} has {len(current)} partitions; it cannot shrink to {partitions}.",
                       "Kafka only adds partitions: give a larger count.")
    grown = {**current, **{p: r for p, r in L.assign_replicas(partitions, brokers, replication_factor).items()
                           if p not in current}}
    zk.set(L.topic_path(topic), L.topic_assignment(grown, L.parse_topic_id(data)), version=stat.version)
    return grown


def leaders(zk: KazooClient, topic: str) -> dict[int, int]:
    """{partition: leader broker id} as the partition state znodes say now."""
    out = {}
    for p in L.parse_topic_assignment(zk.get(L.topic_path(topic))[0]):
        try:
            out[p] = json.loads(zk.get(L.partition_state_path(topic, p))[0])["leader"]
        except NoNodeError:
            out[p] = L.NO_LEADER
    return out


def wait_for_leaders(zk: KazooClient, topic: str, partitions: int, timeout_s: float = 30.0,
                     exclude: frozenset[int] = frozenset()) -> dict[int, int]:
    """Wait until every partition has a live leader not in `exclude`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            current = leaders(zk, topic)
        except NoNodeError:
            current = {}
        if len(current) == partitions and all(v != L.NO_LEADER and v not in exclude for v in current.values()):
            return current
        if time.monotonic() > deadline:
            raise LabError(f"Topic {topic} did not get a leader for every partition within {timeout_s:.0f} s "
                           f"(now: {current}).", "Check the brokers' logs in the trial directory.")
        time.sleep(0.05)


def broker_addresses(zk: KazooClient, ids: list[str] | None = None,
                     listener: str = L.LAB_LISTENER) -> dict[int, tuple[str, int]]:
    """{broker id: (host, port)} of one listener (default: the lab's JSON one) from the registrations of `ids`
    (default: every registered broker); a broker without that listener is left out."""
    out = {}
    for i in ids if ids is not None else zk.get_children(L.BROKER_IDS):
        try:
            address = L.endpoint(json.loads(zk.get(L.broker_path(int(i)))[0]), listener)
        except NoNodeError:
            continue
        if address is not None:
            out[int(i)] = address
    return out


def wait_for_metadata(zk: KazooClient, topic: str, partitions: int, timeout_s: float = 30.0) -> dict[int, int]:
    """Wait until every partition has a leader and every live broker's Metadata agrees with ZooKeeper.

    Brokers learn about topics and leaders through ZooKeeper watches, a moment
    after the controller writes them; a client that asks too early is told
    UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER and must retry.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        expected = wait_for_leaders(zk, topic, partitions, max(0.1, deadline - time.monotonic()))
        want = {str(p): leader for p, leader in expected.items()}
        views = {broker_id: _topic_metadata(host, port, topic)
                 for broker_id, (host, port) in broker_addresses(zk).items()}
        if views and all(v == want for v in views.values()):
            return expected
        if time.monotonic() > deadline:
            raise LabError(f"Brokers did not agree on topic {topic}'s leaders within {timeout_s:.0f} s "
                           f"(ZooKeeper: {want}; brokers: {views}).", "Check the brokers' logs.")
        time.sleep(0.05)


def _topic_metadata(host: str, port: int, topic: str) -> dict | None:
    """One broker's view of a topic's leaders, or None if it does not answer."""
    from ..wire import WireClient, WireError

    client = WireClient(host, port, timeout_s=5)
    try:
        return client.call("Metadata")["topics"].get(topic)
    except (ConnectionError, WireError):
        return None
    finally:
        client.close()
