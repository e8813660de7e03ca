"""The cluster both consumer families run against.

This package is shared by `legacy_zk`, `modern_coord` and `experiments`, and
imports none of them. It holds:

- `zk/`: real ZooKeeper servers on demand (embedded JVM, containers, external);
- `faultproxy`: a TCP proxy that passes, delays, blackholes or resets a link;
- `fourlw`: ZooKeeper's four-letter words, parsed;
- `cleanup` and `leaks`: stopping everything the lab started, and checking it did.

Brokers, partition logs, the producer and the trace recorder join it next.
"""
