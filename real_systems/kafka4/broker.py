"""A Kafka 4.1.1 node in KRaft mode as a child JVM of the trial: a broker and a controller in one process
(`process.roles=broker,controller`), Kafka's own `kafka.Kafka`, unchanged, under the lab's `ReadyWhenListening`.

A KRaft cluster has no ZooKeeper: its controllers elect a leader among themselves from a fixed list of voters
(`controller.quorum.voters`), and each node's storage is formatted with the cluster's id before it first starts
(Kafka's own `StorageTool format`, as `kafka-storage.sh` runs it). So the trial's three nodes share one
quorum file in the trial's directory (`kafka4/quorum.json`: the cluster id and each node's controller port),
made by the first node started. A node says READY once its controller listener accepts, which it does before
the quorum has a leader: the trial starts the nodes one after another, and the quorum forms when a majority
is up. The topic is then made through Kafka's admin API (`create_topic`), which waits for that, and grown
through it too (`add_partitions`: CreatePartitions, as `kafka-topics.sh --alter --partitions`).

Settings: Kafka 4.1.1's defaults but for the listeners on loopback, the log directory in the trial's, no topic
made by a request for one, and what a trial's design sets on its brokers (`TrialSpec.broker_overrides`: the
zombie's KIP-848 session and heartbeat, `group.consumer.*`). Its group coordinator is Kafka 4's, which speaks
both the classic protocol and KIP-848's consumer protocol (`group.coordinator.rebalance.protocols` default).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    KafkaError,
    TopicAlreadyExistsError,
)

from lab_cluster.errors import LabError, tail
from lab_cluster.ports import free_ports

from ..brokers import broker_home, start_jvm, write_properties
from ..jars import java_command

NODES = 3
_LOG4J2 = """status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stderr.ref = STDERR
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
"""


def _random_uuid() -> str:
    """A cluster id as Kafka's `Uuid.randomUuid()` makes one: a random UUID in URL-safe base64, never one whose
    text starts with "-" (the storage tool's argument parser would read it as an option: one id in 64 did, and
    failed a trial), nor the reserved zero and one.

    >>> all(not _random_uuid().startswith("-") for _ in range(1000))
    True
    """
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not text.startswith("-") and int.from_bytes(raw, "big") > 1:
            return text


def _quorum(trial_dir: str | Path) -> dict:
    """The trial's KRaft quorum: {"cluster_id", "controllers": {node id: port}}, made once per trial."""
    path = Path(trial_dir) / "kafka4" / "quorum.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        cluster_id = _random_uuid()
        ports = free_ports(NODES)
        path.write_text(json.dumps({"cluster_id": cluster_id,
                                    "controllers": {str(i + 1): p for i, p in enumerate(ports)}}))
    return json.loads(path.read_text())


def start(broker_id: int, zk_connect: str, trial_dir: str | Path, *, session_timeout_ms: int = 6000,
          port: int = 0, config: dict[str, str] | None = None):
    """Node `broker_id` (1 to 3) of the trial's KRaft cluster; `zk_connect` is not used (KRaft has no ZooKeeper)."""
    if not 1 <= broker_id <= NODES:
        raise LabError(f"Kafka 4's KRaft cluster here has {NODES} nodes (a fixed quorum), not node {broker_id}.",
                       f"Run its trials with brokers={NODES}.")
    quorum = _quorum(trial_dir)
    controller = quorum["controllers"][str(broker_id)]
    port = port or free_ports(1)[0]
    home = broker_home(trial_dir, "kafka4", broker_id)
    props = write_properties(home / "server.properties", {
        "process.roles": "broker,controller", "node.id": broker_id,
        "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in quorum["controllers"].items()),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": home / "logs", "auto.create.topics.enable": "false",
        # a trial stops its nodes one after another at its end: the last one's controlled shutdown would wait out
        # a quorum that has lost its majority (30 s each trial, seen); none of these trials stops a node before
        "controlled.shutdown.enable": "false", **(config or {})})
    log4j = home / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    logging = {"log4j2.configurationFile": str(log4j)}
    if not (home / "logs" / "meta.properties").exists():  # a restarted node keeps its formatted storage
        _format(props, quorum["cluster_id"], logging)
    broker = start_jvm(f"broker-{broker_id}", trial_dir, "kafka4", "lab.real.ReadyWhenListening",
                       [str(controller), "kafka.Kafka", str(props)], heap_mb=512, properties=logging)
    broker.broker_id, broker.port, broker.kafka_port = broker_id, port, port
    return broker


def _format(props: Path, cluster_id: str, logging: dict[str, str]) -> None:
    command = java_command("kafka4", "kafka.tools.StorageTool", ["format", "-t", cluster_id, "-c", str(props)],
                           properties=logging)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise LabError("Kafka 4's StorageTool could not format a node's storage.",
                       "Its output is below; check the node's settings in the trial's directory.",
                       details=tail(done.stdout + done.stderr))


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Make `topic` through Kafka's admin API (replicated on every node) and wait until every partition has a
    leader in the metadata: what `kafka-topics.sh --create` does on a KRaft cluster.

    The nodes are still coming up when it starts: one may refuse or drop a connection (seen in CI: "socket
    disconnected" from a node mid-start, which failed the trial), or answer that fewer than three nodes have
    registered. Each such retriable error is retried with a new admin client until `timeout_s` has passed."""
    _with_admin(bootstrap, f"Topic {topic} could not be made", timeout_s,
                lambda admin, deadline: _create_and_wait(admin, topic, partitions, deadline, timeout_s))


def add_partitions(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Grow `topic` to `partitions` partitions through Kafka's admin API (CreatePartitions, which the node asked
    forwards to the active controller; the controller places the new replicas) and wait until every partition has
    a leader in the metadata: what `kafka-topics.sh --alter --partitions` does on a KRaft cluster. Retried as
    `create_topic` is; a retry after a lost answer finds the topic grown already (INVALID_PARTITIONS, "already
    has" the count), which is done."""
    _with_admin(bootstrap, f"Topic {topic} could not grow to {partitions} partitions", timeout_s,
                lambda admin, deadline: _grow_and_wait(admin, topic, partitions, deadline, timeout_s))


def _with_admin(bootstrap: str, failure: str, timeout_s: float, action) -> None:
    """`action(admin, deadline)` with a new admin client on the nodes, again after each retriable error (or an
    `InvalidReplicationFactorError`: fewer than NODES nodes have registered yet) until `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        admin = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="lab-admin",
                                     request_timeout_ms=10000)
            action(admin, deadline)
            return
        except KafkaError as error:
            if not (error.retriable or isinstance(error, InvalidReplicationFactorError)):
                raise
            if time.monotonic() > deadline:
                raise LabError(f"{failure} on Kafka 4's nodes within {timeout_s:.0f} s: "
                               f"{type(error).__name__} ({error}).",
                               "Check the nodes' logs in the trial's directory (proc/broker-*.log).") from None
            time.sleep(0.5)  # the quorum has no leader yet, or a node is still starting
        finally:
            if admin is not None:
                admin.close()


def _create_and_wait(admin: KafkaAdminClient, topic: str, partitions: int, deadline: float, timeout_s: float) -> None:
    try:  # InvalidReplicationFactorError: fewer than NODES nodes have registered with the controller (retried)
        admin.create_topics([NewTopic(topic, partitions, NODES)])
    except TopicAlreadyExistsError:
        pass  # a retry after a lost answer
    _wait_for_leaders(admin, topic, partitions, deadline, timeout_s)


def _grow_and_wait(admin: KafkaAdminClient, topic: str, partitions: int, deadline: float, timeout_s: float) -> None:
    try:  # the total count; kafka-python 3's form (its `NewPartitions` is deprecated there)
        admin.create_partitions({topic: partitions})
    except InvalidPartitionsError:
        if len(_partitions(admin, topic)) != partitions:  # fewer than it has, or a bad count: not a lost answer
            raise
    _wait_for_leaders(admin, topic, partitions, deadline, timeout_s)


def _partitions(admin: KafkaAdminClient, topic: str) -> list[dict]:
    """The topic's partitions in the metadata of the node asked."""
    return admin.describe_topics([topic])[0].get("partitions", [])


def _wait_for_leaders(admin: KafkaAdminClient, topic: str, partitions: int, deadline: float, timeout_s: float) -> None:
    """Until the metadata names `partitions` partitions of `topic`, each with a leader."""
    while True:
        led = [p for p in _partitions(admin, topic) if p.get("leader_id", p.get("leader", -1)) >= 0]
        if len(led) == partitions:
            return
        if time.monotonic() > deadline:
            raise LabError(f"Topic {topic} did not get a leader for every partition within {timeout_s:.0f} s.",
                           "Check the nodes' logs in the trial's directory (proc/broker-*.log).")
        time.sleep(0.2)
