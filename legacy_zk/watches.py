"""The consumer's one-time watches: 0.8's `ZKRebalancerListener`, `ZKTopicPartitionChangeListener`
and the broker-change subscription.

A ZooKeeper watch fires once. The consumer sets three kinds, each on a read
its rebalance makes anyway (so re-arming costs no extra request):

- children of `/consumers/<group>/ids`: a consumer joined or left;
- children of `/brokers/ids`: a broker joined or left (`watch_broker_ids`:
  always, or only when a rebalance found no broker, as 0.8.2.2 did);
- data of `/brokers/topics/<t>` for each subscribed topic: partitions changed.

When one fires, `GroupWatches.fired` records `zk_watch_fired` (path, event
type) and calls `on_change`, which only raises the consumer's "rebalance
needed" flag. The rebalance thread then coalesces a burst of events into one
rebalance, whose reads re-arm the watches. Every member of the group holds the
same watch on `/consumers/<group>/ids`, so every membership change notifies
every member: the herd.
"""

from __future__ import annotations

from collections.abc import Callable

from kazoo.protocol.states import WatchedEvent

from lab_cluster.trace import TraceRecorder


class GroupWatches:
    def __init__(self, trace: TraceRecorder, on_change: Callable[[], None]):
        self.trace = trace
        self.on_change = on_change

    def fired(self, event: WatchedEvent) -> None:
        """The watcher passed to every watched read (kazoo calls it once per firing)."""
        self.trace.record("zk_watch_fired", path=event.path, event_type=event.type, zk_state=event.state)
        self.on_change()
