"""A subscribed topic's partitions grow: Kafka 0.8.2.2's `ZKTopicPartitionChangeListener`.

0.8.2.2's `ZookeeperConsumerConnector.reinitializeConsumer` subscribes one
listener to the data of `/brokers/topics/<topic>` for each topic of its topic
count (`zkClient.subscribeDataChanges(BrokerTopicsPath + "/" + topic,
topicPartitionChangeListener)`), after the child listener on the group's ids
and before the first `syncedRebalance`. What the listener does (read from the
0.8.2.2 jar's bytecode, `kafka_2.11-0.8.2.2.jar`):

- `handleDataChange(dataPath, data)`: `info("Topic info for path ... changed
  to <data>, triggering rebalance")`, then
  `loadBalancerListener.rebalanceEventTriggered()`, the same call as the group
  listener's `handleChildChange`: under the rebalancer's `lock` (a
  `ReentrantLock`), `isWatcherTriggered = true` and `cond.signalAll()`. No
  rebalance runs on zkclient's event thread: the watcher executor thread
  takes the flag and runs `syncedRebalance` (so changes that come together
  make one more rebalance). Any Throwable is caught and logged ("Error while
  handling topic partition change"). (Older 0.8 sources call
  `syncedRebalance` right there, on the event thread; 0.8.2.2 does not.)
- `handleDataDeleted(dataPath)`: only `warn("Topic for path ... gets deleted,
  which should not happen at this time")`: no rebalance.

The listener reads nothing itself: zkclient's event re-arms the watch
(`exists`) and reads the data (`getData`) before calling it
(`watches.GroupWatches`), and the rebalance that follows reads the topic's
partitions again, as every attempt does (`view.read_view`, 0.8's
`AssignmentContext` → `getPartitionsForTopics`), so the new partitions get
owners in that rebalance.

**What the lab adds: the record.** When the data handed to the listener shows
more partitions than the consumer knew, it records `partitions_seen` (member,
topic, `partitions`, `before`, `via: "listener"`). "Knew" is the newest
version of the topic's znode the consumer has read (`rules.partitions_learnt`),
by this listener or by a rebalance's `getPartitionsForTopics`
(`LegacyConsumer._rebalance` calls `rebalance_read` with the view). A
rebalance that reads the grown znode before the listener's event is
delivered (the event thread busy, or the change came during an attempt)
records it itself (`via: "rebalance"`), and the listener then finds nothing
new: one `partitions_seen` per member per growth, where it first read it.
The first read of a topic is no news (nothing smaller was known); an
unreadable znode teaches nothing, and the rebalance is triggered all the same
(0.8 only logs the data).

The flag is the one the group's listener raises (`LegacyConsumer._triggered`,
a `threading.Event`: its `set()` is 0.8's `isWatcherTriggered = true` and
`cond.signalAll()` under the Event's own lock), and the watcher thread
(`LegacyConsumer._rebalance_loop`) takes it, so the thread model is 0.8.2.2's.

Departures, stated: zkclient hands `handleDataChange` the data only; here it
also gets the znode's stat (for its version, `mzxid`), which only the record
uses. 0.8's info and warn log lines are not recorded (the firing itself is,
as every watch's: `zk_watch_fired` with its event type, CHANGED or DELETED).

(Before this listener, issue 39, the lab raised the flag for any event on a
topic's znode, its deletion included; 0.8.2.2 does not rebalance on a
deletion, and neither does the lab now. The watch itself, its re-arming reads
and its count in the ZooKeeper cross-check are as they were: one
`zk_watch_fired` per notification, and no `zk_watch_unheard` at close, since
a consumer's own close changes no topic's znode.)

    >>> from types import SimpleNamespace
    >>> class Trace:
    ...     def record(self, kind, **fields): print(kind, fields)
    >>> listener = TopicPartitionChangeListener("g_c1", Trace(), lambda: print("rebalanceEventTriggered"))
    >>> listener.rebalance_read({"t": [0, 1, 2, 3]}, {"t": 10})  # the first rebalance read 4 partitions
    >>> data = b'{"version":1,"partitions":{"0":[1],"1":[2],"2":[3],"3":[1],"4":[2],"5":[3]}}'
    >>> listener.handle_data_change("/brokers/topics/t", data, SimpleNamespace(mzxid=20))
    partitions_seen {'member': 'g_c1', 'topic': 't', 'partitions': 6, 'before': 4, 'via': 'listener'}
    rebalanceEventTriggered
    >>> listener.handle_data_deleted("/brokers/topics/t")  # 0.8.2.2: a warning, no rebalance
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from lab_cluster.broker import zk_layout as L
from lab_cluster.trace import TraceRecorder

from .rules import TopicKnown, partitions_learnt


class TopicPartitionChangeListener:
    """0.8.2.2's `ZKTopicPartitionChangeListener`, one for all the consumer's topics (zkclient's data listener on
    each `/brokers/topics/<topic>`); `rebalance_event_triggered` is the consumer's
    `loadBalancerListener.rebalanceEventTriggered`."""

    def __init__(self, member: str, trace: TraceRecorder, rebalance_event_triggered: Callable[[], None]):
        self.member = member
        self.trace = trace
        self._rebalance_event_triggered = rebalance_event_triggered
        self._lock = threading.Lock()  # the event thread (listener) and the watcher thread (rebalance) both learn
        self._known: dict[str, TopicKnown] = {}

    # -- zkclient's IZkDataListener, on the event thread ---------------------------------------------------------
    def handle_data_change(self, path: str, data: bytes, stat) -> None:
        """0.8: log the new data, then `rebalanceEventTriggered()`. The lab records what it learnt first."""
        count = _partition_count(data)
        if count is not None:
            self._learn(_topic_of(path), stat.mzxid, count, via="listener")
        self._rebalance_event_triggered()

    def handle_data_deleted(self, path: str) -> None:
        """0.8.2.2: `warn("Topic for path <path> gets deleted, which should not happen at this time")`, and nothing
        else: no rebalance (deleting a topic was not supported yet)."""

    # -- the rebalance's reads -----------------------------------------------------------------------------------
    def rebalance_read(self, partitions: Mapping[str, list[int]], mzxids: Mapping[str, int | None]) -> None:
        """What a rebalance attempt read of its topics (`view.View`: each topic's partitions, and its znode's
        mzxid, None for a topic with no znode)."""
        for topic, mzxid in mzxids.items():
            if mzxid is not None:
                self._learn(topic, mzxid, len(partitions[topic]), via="rebalance")

    def known(self, topic: str) -> int | None:
        """The partition count of the newest version of `topic`'s znode read so far."""
        with self._lock:
            known = self._known.get(topic)
        return None if known is None else known[1]

    def _learn(self, topic: str, mzxid: int, count: int, *, via: str) -> None:
        with self._lock:
            self._known[topic], before = partitions_learnt(self._known.get(topic), mzxid, count)
            if before is not None:
                self.trace.record("partitions_seen", member=self.member, topic=topic, partitions=count,
                                  before=before, via=via)


def _topic_of(path: str) -> str:
    """`/brokers/topics/<topic>` -> topic (a topic's name has no slash)."""
    return path.rsplit("/", 1)[-1]


def _partition_count(data: bytes | None) -> int | None:
    """How many partitions the topic znode's data lists; None if it cannot be read as Kafka's JSON."""
    try:
        return len(L.parse_topic_assignment(data))
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
