"""Client-side help for talking to brokers: find a partition's leader with a Metadata request.

Consumers of both eras bootstrap from a few broker addresses and ask any of
them who leads a partition, as Kafka clients do (TopicMetadataRequest in 0.8,
Metadata since), rather than reading ZooKeeper for it.
"""

from __future__ import annotations

from ..wire import WireClient, WireError


def metadata_from_any(addresses, *, client_id: str = "", timeout_s: float = 5.0) -> dict | None:
    """The `Metadata` answer of the first of `addresses` [(host, port), ...] that gives one, or None."""
    for host, port in addresses:
        probe = WireClient(host, port, client_id=client_id, timeout_s=timeout_s)
        try:
            return probe.call("Metadata")
        except (ConnectionError, WireError):
            continue
        finally:
            probe.close()
    return None


def find_leader(brokers: dict[int, tuple[str, int]], topic: str, partition: int) -> tuple[str, int] | None:
    """(host, port) of the partition's leader according to the first broker that answers, or None."""
    metadata = metadata_from_any(brokers.values())
    if metadata is None:
        return None
    leader = metadata["topics"].get(topic, {}).get(str(partition), -1)
    broker = metadata["brokers"].get(str(leader))
    return (broker["host"], broker["port"]) if broker is not None else None
