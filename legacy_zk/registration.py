"""Registering a consumer in its group: `ZookeeperConsumerConnector.registerConsumerInZK`.

The registration is an ephemeral znode `/consumers/<group>/ids/<consumerId>`
holding Kafka 0.8's JSON, for a static subscription::

    {"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1763600000000"}

(`subscription` maps each topic to the number of streams, i.e. consumer
threads, this consumer runs for it.) Its existence is the consumer's
membership: it vanishes when the session ends, which every other member's
watch on `/consumers/<group>/ids` then reports.

    >>> json.loads(registration_json({"t": 2}, 5))
    {'version': 1, 'subscription': {'t': 2}, 'pattern': 'static', 'timestamp': '5'}
"""

from __future__ import annotations

import json

from kazoo.exceptions import NodeExistsError

from lab_cluster.broker.zk_layout import now_ms

from . import znodes
from .zkclient import TracedZk


def registration_json(subscription: dict[str, int], timestamp_ms: int | None = None) -> bytes:
    return json.dumps({"version": 1, "subscription": subscription, "pattern": "static",
                       "timestamp": str(timestamp_ms if timestamp_ms is not None else now_ms())},
                      separators=(",", ":")).encode()


def register(zk: TracedZk, group: str, consumer_id: str, subscription: dict[str, int]) -> None:
    """Create the ephemeral ids node (replacing a stale one left by our own expired session)."""
    zk.ensure_path(znodes.ids_path(group))
    path = znodes.consumer_path(group, consumer_id)
    try:
        zk.create(path, registration_json(subscription), ephemeral=True)
    except NodeExistsError:
        # 0.8's createEphemeralPathExpectConflictHandleZKBug: the node of our previous
        # session may not be gone yet; ZooKeeper removes it when that session expires.
        zk.delete(path)
        zk.create(path, registration_json(subscription), ephemeral=True)


def deregister(zk: TracedZk, group: str, consumer_id: str) -> None:
    try:
        zk.delete(znodes.consumer_path(group, consumer_id))
    except Exception:
        pass


def thread_ids(consumer_id: str, streams: int) -> list[str]:
    """0.8's consumer thread ids: `<consumerId>-0`, `<consumerId>-1`, ..."""
    return [f"{consumer_id}-{n}" for n in range(streams)]
