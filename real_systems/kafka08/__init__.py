"""Kafka 0.8.2.2 itself: its own brokers and its own high-level consumer, `ZookeeperConsumerConnector`.

The design `real-kafka-0.8.2.2` is what the lab's `zookeeper` design reconstructs, run from the jars Kafka
published (`org.apache.kafka:kafka_2.11:0.8.2.2`, with zkclient 0.3 and ZooKeeper 3.4.6's client), on the
trial's real ZooKeeper. Its consumers are Kafka's code unchanged; the driver
(`real_systems/kafka08/src/main/java/lab/real/kafka08/`) only starts them (`ConsumerHost`), reads each
member's stream, and turns what the connector and its ZooKeeper client log into the lab's trace events
(`Observer`), so the same metrics apply. Its brokers are real 0.8.2.2 brokers (`broker.py`), which also serve
the producer (`real_systems/kafka_producer.py`).

How it departs from the lab's `zookeeper` design, by being the real thing:

- a member watches `/brokers/ids` only after a rebalance found no broker (0.8.2.2's code), where the lab's
  design watches it always by default (`legacy_zk/config.py: watch_broker_ids`);
- requests are recorded on their reply, not on their send (the ZooKeeper client logs replies);
- every member gets `consumer.id` = its actor name (a 0.8 setting), so that its trace names it.
"""

from lab_cluster.errors import LabError
from lab_cluster.family import Family, RealBrokers

from ..jars import java_command
from . import broker

NAME = "real-kafka-0.8.2.2"


def _configure(props: dict[str, str], actor: str) -> dict[str, str]:
    return dict(props)


def _build(*_):
    raise LabError(f"{NAME}'s consumers are Kafka's own, in a JVM: they run only as a host of their own.",
                   "Run them through a trial (python -m experiments run ...), not in the Python consumer host.")


def _host(args: list[str]) -> list[str]:
    """The command of a host of real 0.8.2.2 consumers, with the lab's host arguments (`consumer_host.py`)."""
    return java_command("kafka08", "lab.real.kafka08.ConsumerHost", [*args, "--design", NAME], heap_mb=256)


FAMILY = Family(
    NAME, f"{NAME} (Kafka 0.8.2.2's own consumer and brokers)", "darkred", marker="d", package="real_systems.kafka08",
    address="zk", address_config="zookeeper.connect",
    configure=_configure, build=_build, computes="member", settled_state="consuming", victim_link="zk",
    stops_by="0.8.2.2's shutdown: fetchers stopped, offsets committed, session closed",
    from_beginning={"auto.offset.reset": "smallest"},
    session_timeout_ms=lambda config: float(config.get("zookeeper.session.timeout.ms", 6000)),
    host_command=_host, brokers=RealBrokers("Kafka 0.8.2.2", broker.start, api_version="0.8.2"),
    counterpart="zookeeper")
