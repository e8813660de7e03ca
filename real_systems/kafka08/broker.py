"""A Kafka 0.8.2.2 broker as a child JVM of the trial: `lab.real.kafka08.Broker` (in this module's driver jar)
runs the broker's own `KafkaServerStartable` and says READY once it has registered in ZooKeeper.

Its settings are 0.8.2.2's defaults but for what a trial needs: its id, a port on loopback, its log directory
in the trial's, the trial's ZooKeeper with the session timeout the lab's own brokers use (6 s), and no topic
made by a request for one (`auto.create.topics.enable` false: the trial writes its topic's znode, as 0.8's
`kafka-topics.sh` does, and the controller elects the leaders). A `grow` rewrites that znode with the whole
assignment, as `kafka-topics.sh --alter --partitions` does: the controller's `AddPartitionsListener` creates the
partitions it does not know, and each consumer's `ZKTopicPartitionChangeListener` starts a rebalance.
"""

from __future__ import annotations

from pathlib import Path

from lab_cluster.ports import free_port

from ..brokers import LOG4J, broker_home, start_jvm, write_properties


def start(broker_id: int, zk_connect: str, trial_dir: str | Path, *, session_timeout_ms: int = 6000,
          port: int = 0, config: dict[str, str] | None = None):
    """One real Kafka 0.8.2.2 broker; its `port` and `kafka_port` are both its one (Kafka protocol) listener."""
    port = port or free_port()
    home = broker_home(trial_dir, "kafka08", broker_id)
    props = write_properties(home / "server.properties", {
        "broker.id": broker_id, "port": port, "host.name": "127.0.0.1", "log.dirs": home / "logs",
        "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": session_timeout_ms,
        "auto.create.topics.enable": "false", **(config or {})})
    (home / "log4j.properties").write_text(LOG4J)
    broker = start_jvm(f"broker-{broker_id}", trial_dir, "kafka08", "lab.real.kafka08.Broker", [str(props)],
                       properties={"log4j.configuration": f"file:{home / 'log4j.properties'}"})
    broker.broker_id, broker.port, broker.kafka_port = broker_id, port, port
    return broker
