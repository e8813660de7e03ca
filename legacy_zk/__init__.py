"""The ZooKeeper-era consumer, after Kafka 0.8's `ZookeeperConsumerConnector`.

Every consumer registers under `/consumers/<group>/ids`, watches that node and
`/brokers/ids`, and rebalances itself: DESIGN.md §2. Not built yet (issue 4).
"""
