"""The cluster both consumer families run against.

This package is shared by `legacy_zk`, `modern_coord` and `experiments`, and
imports none of them. It holds:

- `zk/`: real ZooKeeper servers on demand (embedded JVM, containers, external);
- `broker/`, `wire.py`, `partition_log.py`, `producer.py`: brokers registered in
  ZooKeeper, their wire protocol, partition logs, a producer;
- `trace.py` and `events.py`: the trace every actor writes, and its vocabulary;
  `trace_reader.py`: reading traces back in Spark;
- `family.py`: what the lab needs to know of a consumer family;
- `consumer_host.py`: N consumers of a family in one process;
- `faults.py`, `faultproxy`: every fault, recorded; a TCP proxy that passes,
  delays, blackholes or resets a link;
- `fourlw`: ZooKeeper's four-letter words, parsed;
- `cleanup` and `leaks`: stopping everything the lab started, and checking it did.
"""
