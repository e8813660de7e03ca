"""Registering a consumer in its group: `ZookeeperConsumerConnector.registerConsumerInZK`.

The registration is an ephemeral znode `/consumers/<group>/ids/<consumerId>`
holding Kafka 0.8's JSON, for a static subscription::

    {"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1763600000000"}

(`subscription` maps each topic to the number of streams, i.e. consumer
threads, this consumer runs for it.) Its existence is the consumer's
membership: it vanishes when the session ends (0.8 never deletes it: a
consumer that stops closes its session), which every other member's watch on
`/consumers/<group>/ids` then reports.

    >>> json.loads(registration_json({"t": 2}, 5))
    {'version': 1, 'subscription': {'t': 2}, 'pattern': 'static', 'timestamp': '5'}
"""

from __future__ import annotations

import json

from kazoo.exceptions import NodeExistsError, NoNodeError

from lab_cluster.clock import wall_clock_ms
from lab_cluster.trace import TraceRecorder

from . import znodes
from .zkclient import Stopping, TracedZk


def registration_json(subscription: dict[str, int], timestamp_ms: int | None = None) -> bytes:
    return json.dumps({"version": 1, "subscription": subscription, "pattern": "static",
                       "timestamp": str(timestamp_ms if timestamp_ms is not None else wall_clock_ms())},
                      separators=(",", ":")).encode()


def register(zk: TracedZk, trace: TraceRecorder, group: str, consumer_id: str, subscription: dict[str, int],
             backoff_s: float, stopping) -> None:
    """0.8's `registerConsumerInZK` through `createEphemeralPathExpectConflictHandleZKBug` (ZkUtils L272-299).

    If the ids node already exists (our previous session's, not yet expired by
    the server: ZOOKEEPER-1740), it is never deleted: with the same data the
    registration is done; otherwise the consumer sleeps `backoff_s` (its
    session timeout) and tries again until the node has gone. The data holds a
    timestamp, so a re-registration almost never matches and so waits.
    """
    zk.ensure_path(znodes.ids_path(group))
    path = znodes.consumer_path(group, consumer_id)
    data = registration_json(subscription)
    while True:
        try:
            zk.create(path, data, ephemeral=True)
            return
        except NodeExistsError:
            try:
                if zk.get(path)[0] == data:
                    return
            except NoNodeError:
                continue  # gone meanwhile: create it at once
            trace.record("registration_conflict", path=path, backoff_ms=int(backoff_s * 1000))
            if stopping.wait(backoff_s):
                raise Stopping("registration") from None


def thread_ids(consumer_id: str, streams: int) -> list[str]:
    """0.8's consumer thread ids: `<consumerId>-0`, `<consumerId>-1`, ..."""
    return [f"{consumer_id}-{n}" for n in range(streams)]
