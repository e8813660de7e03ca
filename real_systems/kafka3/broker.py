"""A Kafka 3.9.2 broker in ZooKeeper mode as a child JVM of the trial: Kafka's own `kafka.Kafka`, unchanged,
under the lab's `ReadyWhenListening` (READY once its listener accepts).

Its settings are 3.9.2's defaults but for what a trial needs: its id, one PLAINTEXT listener on loopback, its
log directory in the trial's, the trial's ZooKeeper with the session timeout the lab's own brokers use (6 s
where 3.9's default is 18 s), and no topic made by a request for one (the trial writes its topic's znode, which
a ZooKeeper-mode controller reads as `kafka-topics.sh` once wrote it; a `grow` rewrites it, and the controller's
`PartitionModificationsHandler` creates the partitions it does not know: the znode's `version` is not read, its
`topic_id`, the lab's, is kept). Everything about groups is Kafka's
default: `group.initial.rebalance.delay.ms` 3 s, the classic protocol's coordinator, the offsets topic's 50
partitions with 3 replicas.
"""

from __future__ import annotations

from pathlib import Path

from lab_cluster.ports import free_port

from ..brokers import LOG4J, broker_home, start_jvm, write_properties


def start(broker_id: int, zk_connect: str, trial_dir: str | Path, *, session_timeout_ms: int = 6000,
          port: int = 0, config: dict[str, str] | None = None):
    """One real Kafka 3.9.2 broker; its `port` and `kafka_port` are both its one listener."""
    port = port or free_port()
    home = broker_home(trial_dir, "kafka3", broker_id)
    props = write_properties(home / "server.properties", {
        "broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": home / "logs",
        "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": session_timeout_ms,
        "auto.create.topics.enable": "false", **(config or {})})
    (home / "log4j.properties").write_text(LOG4J)
    broker = start_jvm(f"broker-{broker_id}", trial_dir, "kafka3", "lab.real.ReadyWhenListening",
                       [str(port), "kafka.Kafka", str(props)], heap_mb=512,
                       properties={"log4j.configuration": f"file:{home / 'log4j.properties'}"})
    broker.broker_id, broker.port, broker.kafka_port = broker_id, port, port
    return broker
