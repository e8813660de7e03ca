"""Kafka's own group coordinator: real Kafka 3.9.2 brokers in ZooKeeper mode, joined by kafka-python.

The design `real-kafka-3.9` is the lab's `kafka-python` design with the lab's brokers taken away: the same
client, unchanged, in the same consumer host (`kafka_clients/kafka_python_member.py`), on brokers Kafka
published (`org.apache.kafka:kafka_2.13:3.9.2`), whose registrations, topic and controller live in the trial's
ZooKeeper as in the coordinator era. What the two designs measure differently is the coordinator: the lab's
(`modern_coord/coordinator/`) against Kafka's own.

What the lab cannot see here: Kafka's coordinator writes no lab trace, so the brokers' side of each request
(`coordinator_request`) is missing and `broker_requests_per_change` is 0; the clients' own callbacks are traced
as in the `kafka-python` design.
"""

from kafka_clients import KAFKA_PYTHON
from lab_cluster.family import Family, RealBrokers

from . import broker

FAMILY = Family(
    "real-kafka-3.9", "real-kafka-3.9 (kafka-python on Kafka 3.9.2's own brokers)", "indigo", marker="p",
    package="real_systems.kafka3", address="kafka_bootstrap", address_config="bootstrap.servers",
    configure=KAFKA_PYTHON.configure, build=KAFKA_PYTHON.build, session_timeout_ms=KAFKA_PYTHON.session_timeout_ms,
    computes="leader", settled_state="stable", victim_link="none", stops_by=KAFKA_PYTHON.stops_by,
    from_beginning=KAFKA_PYTHON.from_beginning, brokers=RealBrokers("Kafka 3.9.2", broker.start),
    counterpart="kafka-python")
