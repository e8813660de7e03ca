"""The real systems, run beside the lab's own designs: their published jars, unchanged, as child JVMs.

Each system is one package here with one Maven module (`real_systems/pom.xml`,
built by `scripts/setup.sh` from Maven Central): a small Java driver of the
lab's own that starts the system's own classes and speaks the lab's process
protocol (`READY`, state lines, traces in the lab's format), and the `Family`
that registers it as a design (`experiments/engine/families.py`).

- `kafka08`: Kafka 0.8.2.2's own brokers and its own `ZookeeperConsumerConnector` (the ZooKeeper era, as
  shipped), on the trial's real ZooKeeper: the design `real-kafka-0.8.2.2`.
- `rocketmq49`: RocketMQ 4.9.7's own name server, brokers and push consumer: the design `real-rocketmq-4.9`.

`jars.py` finds what the build left; where it is missing (no Maven, or Maven Central could not be reached when
the lab was set up), a trial of a real system fails with a message that says so, and everything else runs.
"""
