"""Kafka 4's own consumer group protocol (KIP-848): librdkafka with `group.protocol=consumer` on real Kafka 4.1.1
nodes in KRaft mode.

The design `real-kafka-4` stands beside the lab's `consumer-848`: both speak KIP-848's protocol, the lab's with
its own client and coordinator (`modern_coord/`), this one with librdkafka (the `librdkafka` design's client,
unchanged, `kafka_clients/librdkafka_member.py`) and the group coordinator Kafka 4 published
(`org.apache.kafka:kafka_2.13:4.1.1`). KRaft keeps the cluster's metadata in its controllers' quorum, not in
ZooKeeper (`broker.py`); the trial's ZooKeeper runs and is not used.

What the lab cannot see: Kafka's coordinator writes no lab trace, so its side of each request is not measured;
the client's callbacks are traced as in the `librdkafka` design.
"""

from kafka_clients import LIBRDKAFKA
from lab_cluster.family import Family, RealBrokers

from . import broker


def _configure(props: dict[str, str], actor: str) -> dict:
    return LIBRDKAFKA.configure({"group.protocol": "consumer", **props}, actor)


FAMILY = Family(
    "real-kafka-4", "real-kafka-4 (librdkafka, KIP-848, on Kafka 4.1.1's own KRaft nodes)", "teal", marker="H",
    package="real_systems.kafka4", address="kafka_bootstrap", address_config="bootstrap.servers",
    configure=_configure, build=LIBRDKAFKA.build, session_timeout_ms=LIBRDKAFKA.session_timeout_ms,
    computes="coordinator", settled_state="stable", victim_link="none", every_member_rebalances=False,
    stops_by="Consumer.close(): a commit if auto-commit is on, then a leave heartbeat (member epoch -1)",
    from_beginning=LIBRDKAFKA.from_beginning,
    brokers=RealBrokers("Kafka 4.1.1 (KRaft)", broker.start, create_topic=broker.create_topic,
                        add_partitions=broker.add_partitions),
    counterpart="consumer-848")
