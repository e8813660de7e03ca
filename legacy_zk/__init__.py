"""The ZooKeeper-era consumer, after Kafka 0.8's `ZookeeperConsumerConnector` (DESIGN.md §2).

Every consumer registers under `/consumers/<group>/ids`, watches that node and
`/brokers/ids`, and rebalances itself from what it reads, without knowing what
the others read. Start with `consumer.py`; the README lists the modules in the
order one rebalance goes through them.
"""

from lab_cluster.family import Family

FAMILY = Family("legacy", "ZooKeeper era (legacy_zk)", "tab:red", host_module="legacy_zk.host", address="zk",
                settled_state="consuming", victim_link="zk", from_beginning={"auto.offset.reset": "smallest"})
