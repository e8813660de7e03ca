"""What a RocketMQ broker knows of a consumer group: the channels that heartbeat it, and when it tells them.

After RocketMQ 4.9.8's `broker/client/ConsumerManager.java` and
`ConsumerGroupInfo.java`, without I/O: a channel is whatever identifies one
client connection (the plug-in uses its connection), time comes from a clock
in milliseconds, and what the broker does on a change is the listener's
(`ConsumerIdsChangeListener`; the plug-in's sends NOTIFY_CONSUMER_IDS_CHANGED).

Every broker keeps its own table, group -> {channel: (client id, last
heartbeat)}, built only from the heartbeats that reach *it*: nothing makes two
brokers' tables agree. Membership changes by four roads:

- `register_consumer` (HEART_BEAT): a channel new to the group is added, a
  known one's heartbeat time refreshed. CHANGE if the channel is new or the
  group's topic set changed, and the group's notify flag is on.
- `unregister_consumer` (UNREGISTER_CLIENT, a clean shutdown): the channel is
  removed. CHANGE if the group's notify flag is on.
- `do_channel_close_event` (the connection closed or broke): the channel
  is removed from every group. CHANGE always. (In RocketMQ also when it
  idled 120 s, below.)
- `scan_not_active_channel` (every 10 s): a channel without a heartbeat for
  more than 120 s is closed and removed. **No CHANGE**: the others learn at
  their next periodic rebalance (20 s).

A group left without channels is removed (UNREGISTER), except by the scan,
which removes it silently. `find_consumer_id_list` answers the group's
client ids, one per channel in the order they registered, unsorted (the
client sorts); an unknown or empty group is an error (SYSTEM_ERROR, "no
consumer for this group"), which leaves the asking client's assignment as it was.

Worked example: c1 and c2 heartbeat; c2 then falls silent::

    >>> clock = [0]
    >>> events = []
    >>> m = ConsumerManager(lambda event, group, channels: events.append((event, group, channels)),
    ...                     clock=lambda: clock[0])
    >>> m.register_consumer("g", "conn-1", "c1", ["t"])
    True
    >>> m.register_consumer("g", "conn-2", "c2", ["t"])
    True
    >>> m.find_consumer_id_list("g"), events[-1]
    (['c1', 'c2'], ('CHANGE', 'g', ['conn-1', 'conn-2']))
    >>> clock[0] = 100_000; m.register_consumer("g", "conn-1", "c1", ["t"])  # c1's next heartbeat: no change
    False
    >>> clock[0] = 120_001; m.scan_not_active_channel()   # c2's last heartbeat was 120.001 s ago
    ['conn-2']
    >>> m.find_consumer_id_list("g"), events[-1][0]       # dropped, and nobody was told
    (['c1'], 'CHANGE')
    >>> len([e for e in events if e[0] == "CHANGE"])
    2

Departures from RocketMQ, stated: RocketMQ's broker also closes a channel
with no traffic either way for 120 s (NettyRemotingServer.java:215, 479-485,
`serverChannelMaxIdleTimeSeconds`), a channel close and so a CHANGE
(ClientHousekeepingService.java:80-84); the lab's broker does not, as only
the wire server sees a channel's every frame (`lab_cluster/wire.py`, not
this plug-in's). A live consumer pulls all the time, so this matters only
for one cut off without a close: there the silent scan drops it (120 s
after its last heartbeat, checked every 10 s) and nobody is told, where in
RocketMQ the idle close (120 s after its last frame, a pull at most moments
before the cut) may come first and tell the group at once; the survivors
of a cut then take its queues at their next 20 s rebalance rather than on a
push. The REGISTER event (which only feeds the
broker's filter server) and the consume type, message model and
consume-from-where a group records are left out; a subscription is its topic
and `sub_version` (tags and expressions are not modelled).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from lab_cluster.clock import monotonic_ms

#: `ConsumerManager.CHANNEL_EXPIRED_TIMEOUT` (1000 * 120): a channel without a heartbeat this long is dropped
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000
#: `ClientHousekeepingService`: the scan runs every 10 s (after 10 s)
SCAN_INTERVAL_MS = 10_000

Channel = Hashable
#: (event, group, channels): "CHANGE" with the group's channels now, or "UNREGISTER" with none
ConsumerIdsChangeListener = Callable[[str, str, list], None]


class NoConsumer(Exception):
    """`GET_CONSUMER_LIST_BY_GROUP` of an unknown or empty group: SYSTEM_ERROR, "no consumer for this group"."""


@dataclass
class ClientChannelInfo:
    channel: Channel
    client_id: str
    last_update_ms: int


@dataclass
class ConsumerGroupInfo:
    """One group on one broker: its channels (insertion-ordered) and its subscription table (topic -> version)."""

    group: str
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, int] = field(default_factory=dict)

    def update_channel(self, channel: Channel, client_id: str, now_ms: int) -> bool:
        """`updateChannel`: True only for a channel new to the group; every call refreshes its heartbeat time.

        A known channel that now says another client id is overwritten (RocketMQ logs it as a "[BUG]") and is
        no change."""
        old = self.channels.get(channel)
        if old is None:
            self.channels[channel] = ClientChannelInfo(channel, client_id, now_ms)
            return True
        if old.client_id != client_id:
            self.channels[channel] = ClientChannelInfo(channel, client_id, now_ms)
        old.last_update_ms = now_ms
        return False

    def update_subscription(self, subscriptions: dict[str, int]) -> bool:
        """`updateSubscription`: True only when a topic is added or removed. A newer `sub_version` (sent after
        every rebalance whose result changed) replaces the entry without being a change.

        The table is the group's, not a client's: clients of one group that subscribe different topics
        make it change at each other's heartbeats."""
        updated = False
        for topic, version in subscriptions.items():
            if topic not in self.subscriptions:
                self.subscriptions[topic], updated = version, True
            elif version > self.subscriptions[topic]:
                self.subscriptions[topic] = version
        for topic in [t for t in self.subscriptions if t not in subscriptions]:
            del self.subscriptions[topic]
            updated = True
        return updated

    def client_ids(self) -> list[str]:
        """`getAllClientId`: one per channel, in registration order (a client with two channels twice)."""
        return [info.client_id for info in self.channels.values()]


class ConsumerManager:
    """One broker's consumer table; thread-safe (the plug-in calls it from every connection's thread)."""

    def __init__(self, listener: ConsumerIdsChangeListener, *, clock: Callable[[], int] = monotonic_ms,
                 channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS):
        self.listener = listener
        self.clock = clock
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._lock = threading.RLock()

    def register_consumer(self, group: str, channel: Channel, client_id: str, topics: Iterable[str] | dict,
                          notify: bool = True) -> bool:
        """`registerConsumer`, for one ConsumerData of a heartbeat. `topics`: a list, or {topic: sub_version}.

        `notify` is the group's `notifyConsumerIdsChangedEnable` (default true). Returns whether anything
        changed."""
        subscriptions = dict(topics) if isinstance(topics, dict) else {t: 0 for t in topics}
        with self._lock:
            info = self.groups.setdefault(group, ConsumerGroupInfo(group))
            new_channel = info.update_channel(channel, client_id, self.clock())
            new_topics = info.update_subscription(subscriptions)
            if (new_channel or new_topics) and notify:
                self.listener("CHANGE", group, list(info.channels))
            return new_channel or new_topics

    def unregister_consumer(self, group: str, channel: Channel, notify: bool = True) -> None:
        """`unregisterConsumer` (UNREGISTER_CLIENT, sent by a consumer that shuts down cleanly)."""
        with self._lock:
            info = self.groups.get(group)
            if info is None:
                return
            info.channels.pop(channel, None)
            if not info.channels:
                del self.groups[group]
                self.listener("UNREGISTER", group, [])
            if notify:
                self.listener("CHANGE", group, list(info.channels))

    def do_channel_close_event(self, channel: Channel) -> None:
        """`doChannelCloseEvent`: the connection closed (or broke, or idled): out of every group, CHANGE always."""
        with self._lock:
            for group, info in list(self.groups.items()):
                if info.channels.pop(channel, None) is None:
                    continue
                if not info.channels:
                    del self.groups[group]
                    self.listener("UNREGISTER", group, [])
                self.listener("CHANGE", group, list(info.channels))

    def scan_not_active_channel(self) -> list[Channel]:
        """`scanNotActiveChannel`: drop channels silent for more than the timeout; returns them, for the caller
        to close (a close then finds them gone and tells nobody). Fires no event."""
        now, dropped = self.clock(), []
        with self._lock:
            for group, info in list(self.groups.items()):
                for channel, client in list(info.channels.items()):
                    if now - client.last_update_ms > self.channel_expired_timeout_ms:
                        del info.channels[channel]
                        dropped.append(channel)
                if not info.channels:
                    del self.groups[group]
        return dropped

    def find_consumer_id_list(self, group: str) -> list[str]:
        """`GET_CONSUMER_LIST_BY_GROUP`: the group's client ids, or `NoConsumer`."""
        with self._lock:
            info = self.groups.get(group)
            ids = info.client_ids() if info is not None else []
        if not ids:
            raise NoConsumer(f"no consumer for this group, {group}")
        return ids
