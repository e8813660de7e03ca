"""Brokers: registered in ZooKeeper as Kafka 0.8's were, leading partitions, serving them over TCP.

- `zk_layout`: the znodes and JSON Kafka 0.8 wrote;
- `controller`: the elected broker that picks partition leaders;
- `broker`: the broker itself and its APIs (Produce, Fetch, ListOffsets, Metadata);
- `admin`: create a topic; `BrokerProcess` (in `admin`) runs a broker as a child process.
"""
