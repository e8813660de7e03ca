"""The ZooKeeper-era consumer, after Kafka 0.8's `ZookeeperConsumerConnector` (`docs/design.md`).

Every consumer registers under `/consumers/<group>/ids`, watches that node and
`/brokers/ids`, and rebalances itself from what it reads, without knowing what
the others read. Start with `consumer.py`; `docs/learn.md` lists the modules
in the order one rebalance goes through them.
"""

from lab_cluster.family import Family

from .config import ConsumerConfig
from .consumer import LegacyConsumer

FAMILY = Family(
    "zookeeper", "zookeeper (Kafka 0.8, ZooKeeper era)", "tab:red", marker="o", package="legacy_zk",
    address="zk", address_config="zookeeper.connect",
    configure=lambda props, actor: ConsumerConfig.from_dict(props),
    build=lambda config, topics, trace, actor, on_change: LegacyConsumer(config, topics, trace, on_change=on_change),
    computes="member", settled_state="consuming", victim_link="zk",
    stops_by="fetchers stopped, committed, session closed (0.8's shutdown)",
    from_beginning={"auto.offset.reset": "smallest"},
    session_timeout_ms=lambda config: config.zookeeper_session_timeout_ms)
