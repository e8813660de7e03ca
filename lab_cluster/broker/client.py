"""Client-side help for talking to brokers: find a partition's leader with a Metadata request.

Consumers of both eras bootstrap from a few broker addresses and ask any of
them who leads a partition, as Kafka clients do (TopicMetadataRequest in 0.8,
Metadata since), rather than reading ZooKeeper for it.
"""

from __future__ import annotations

from ..wire import WireClient, WireError


def find_leader(brokers: dict[int, tuple[str, int]], topic: str, partition: int) -> tuple[str, int] | None:
    """(host, port) of the partition's leader according to the first broker that answers, or None."""
    for host, port in brokers.values():
        probe = WireClient(host, port, timeout_s=5)
        try:
            metadata = probe.call("Metadata")
        except (ConnectionError, WireError):
            continue
        finally:
            probe.close()
        leader = metadata["topics"].get(topic, {}).get(str(partition), -1)
        broker = metadata["brokers"].get(str(leader))
        if broker is not None:
            return broker["host"], broker["port"]
    return None
