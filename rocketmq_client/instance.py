"""What a RocketMQ consumer asks of the brokers, over the lab's wire: RocketMQ 4.9.8's `MQClientInstance`.

One connection per broker, read all the time (`lab_cluster.wire.DuplexClient`,
as RocketMQ's Netty remoting client keeps one channel per address): requests
and answers, and the broker's NOTIFY_CONSUMER_IDS_CHANGED pushes, which wake
the consumer's rebalance (`on_notify`). A broker is the same channel for
heartbeats, the consumer-id list, offsets, locks and pulls.

- `update_route(topic)` (`updateTopicRouteInfoFromNameServer`): `Metadata`
  from a broker, a queue per partition named after the broker that leads it,
  which replaces the topic's queue set (`updateTopicSubscribeInfo` puts it in
  `RebalanceImpl.topicSubscribeInfoTable`). That is all a route refresh does:
  a topic grown meanwhile rebalances nobody at once (RocketMQ's only
  `rebalanceImmediately` calls are at start and on NOTIFY_CONSUMER_IDS_CHANGED,
  and a broker notifies for its consumer table, never for a topic's queues);
  its new queues are allocated at the next RebalanceService tick, up to
  `pollNameServerInterval` + `rocketmq.client.rebalance.waitInterval` (50 s by
  default) after they appeared, unless a member's join or leave wakes it
  sooner. A refresh that finds more queues than the
  client ever knew of the topic records `partitions_seen` (lab only: RocketMQ
  logs "the topic[...] route info changed");
- `send_heartbeat_to_all_brokers` (`sendHeartbeatToAllBrokerWithLock`):
  `HEART_BEAT` to every broker of the route, a failure only noted; skipped if
  another thread's heartbeat is under way (its tryLock);
- `find_consumer_id_list` (`findConsumerIdList`): `GET_CONSUMER_LIST_BY_GROUP`
  to ONE broker of the route, picked at random;
- `query_offset` / `persist_offset` (`RemoteBrokerOffsetStore`):
  `QUERY_CONSUMER_OFFSET` (5 s) / `UPDATE_CONSUMER_OFFSET` (oneway) to the
  queue's broker; `max_offset`: `ListOffsets` (6 s);
- `lock` / `lock_batch` / `unlock` / `unlock_batch`: `LOCK_BATCH_MQ` /
  `UNLOCK_BATCH_MQ` (1 s; the unlock of a queue let go is oneway);
- `pull` (`PULL_MESSAGE`): the records from an offset, carrying the
  consumer's in-memory offset for the broker to store (the COMMIT_OFFSET
  flag, `DefaultMQPushConsumerImpl.pullMessage`), without waiting at the broker;
- `unregister_client`: `UNREGISTER_CLIENT` to every broker, errors ignored.

Every request waits as RocketMQ's does (the constants below; the rest
`mqClientApiTimeout`, 3 s), and a synchronous one that times out closes its
channel (`invokeSync`), which the broker sees as the client gone (a change).
A pull is RocketMQ's asynchronous one: its 30 s timeout fails the pull only;
oneway requests never wait.

It implements `rebalance.Broker`, so `RebalanceImpl` runs on it unchanged.

Departures, stated:
- a pull does not long-poll (RocketMQ's broker holds an empty pull up to
  15 s): an empty pull is answered at once and the consumer pauses 50 ms;
- a pull is waited for by the consumer's one pull thread (`consumer.py`),
  where RocketMQ's callback frees its thread: a broker that does not answer
  holds every other queue's pull up to 30 s (RocketMQ pulls the other queues
  meanwhile), so under a cut or a long delay the lab pulls its healthy
  brokers' queues less often;
- the lab's broker answers a oneway request (RocketMQ's does not); the
  answer only dates the trace's `commit` event, `accepted` when it arrives,
  `failed` if the channel closes first, and nothing waits for it;
- each route update replaces the broker table with that topic's brokers
  (RocketMQ adds per topic, MQClientInstance.java:637-639, and removes
  brokers no topic names at each heartbeat tick, :288, 386-428): the same
  with one topic, as in every experiment; with several, a broker only another
  topic uses would be forgotten until that topic's next refresh;
- a partition whose leader is unknown (a new one before its election, or
  one in a failover) is no queue of any broker, so it is left out of the
  route until it has a leader (RocketMQ's route lists a broker's queues as
  soon as the broker registers the topic's new `readQueueNums`); and a queue
  whose leader moves is renamed (`broker-<new leader>`), where a RocketMQ
  queue never leaves its broker. So `partitions_seen` counts queue ids (the
  partitions) ever in the topic's route, not queues by broker: a queue that
  comes back after a failover, under a new name or the same, is not new;
- RocketMQ replaces the cached route only when it changed
  (`topicRouteDataIsChange`) or a subscribed topic has none yet
  (`isNeedUpdateTopicRouteInfo`); the lab replaces it on every refresh, which
  leaves the same queue set;
- the client side's 120 s idle close (NettyRemotingClient.java:185, 684-689,
  `clientChannelMaxIdleTimeSeconds`) is not modelled: a running consumer
  writes at least every heartbeat interval, so it would not fire.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from lab_cluster.broker.client import metadata_from_any
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import DuplexClient, WireError

from .rebalance import MessageQueue, OffsetNotFound

Address = tuple[str, int]

# What each request waits for, as RocketMQ 4.9.8's client; the rest wait `mqClientApiTimeout` (3 000 ms).
#: `DefaultMQPushConsumerImpl.CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND`: a pull (async: a timeout fails only the pull)
PULL_TIMEOUT_MS = 30_000
#: `RemoteBrokerOffsetStore.fetchConsumeOffsetFromBroker` (1000 * 5)
QUERY_CONSUMER_OFFSET_TIMEOUT_MS = 5_000
#: `MQAdminImpl.timeoutMillis`, the max offset's
MAX_OFFSET_TIMEOUT_MS = 6_000
#: `RebalanceImpl.lock`/`lockAll`/`unlock`/`unlockAll`: LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
LOCK_TIMEOUT_MS = 1_000


def broker_name(broker_id: int | str) -> str:
    """The RocketMQ broker name of a lab broker: `broker-<id>`."""
    return f"broker-{broker_id}"


class BrokerRefused(Exception):
    """A broker answered a request with a RocketMQ code other than SUCCESS."""


class MQClientInstance:
    def __init__(self, client_id: str, bootstrap: list[Address], trace: TraceRecorder, *, timeout_ms: int,
                 on_notify: Callable[[str], None], rng: random.Random | None = None,
                 via: dict[Address, Address] | None = None):
        self.client_id, self.bootstrap, self.trace = client_id, list(bootstrap), trace
        self.via = dict(via or {})  # the lab's fault proxies: every address it contacts goes through its own
        self.timeout_s = timeout_ms / 1000
        self.on_notify = on_notify
        self.rng = rng or random.Random()
        self._lock = threading.Lock()
        self._heartbeat_lock = threading.Lock()  # `lockHeartbeat`: a heartbeat already under way is not repeated
        self.broker_addr_table: dict[str, Address] = {}  # broker name -> address, of the routes it knows
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}  # topic -> its queues (readable brokers)
        self.queue_ids_known: dict[str, set[int]] = {}  # topic -> every queue id its routes ever had (lab only)
        self._channels: dict[str, DuplexClient] = {}

    # -- routes --------------------------------------------------------------------------
    def update_route(self, topic: str) -> bool:
        """Refresh `topic`'s queues and brokers from any broker's Metadata; False if none answered (the old
        route is kept, as RocketMQ keeps its table when the name server cannot be reached).

        The new queue set is only stored: the rebalance that allocates it is the next RebalanceService tick's.
        If it holds queue ids this client never had in the topic's route, `partitions_seen` is recorded with
        `partitions`, how many it knows now, and `before`, how many it knew (not at the topic's first route,
        when it knew none: that is learning the topic, not its growth)."""
        with self._lock:
            known = list(self.broker_addr_table.values())
        metadata = metadata_from_any([self.via.get(a, a) for a in known + self.bootstrap], client_id=self.client_id,
                                     timeout_s=self.timeout_s)
        if metadata is None or topic not in metadata["topics"]:
            return False
        brokers = {int(i): (b["host"], b["port"]) for i, b in metadata["brokers"].items()}
        leaders = {int(p): leader for p, leader in metadata["topics"][topic].items() if leader in brokers}
        with self._lock:
            self.topic_subscribe_info[topic] = {(topic, broker_name(leader), p) for p, leader in leaders.items()}
            self.broker_addr_table = {broker_name(b): brokers[b] for b in sorted(set(leaders.values()))}
            before = self.queue_ids_known.get(topic)
            self.queue_ids_known[topic] = now = (before or set()) | set(leaders)
            if before is not None and len(now) > len(before):  # traced before a rebalance can read the new set
                self.trace.record("partitions_seen", member=self.client_id, topic=topic, partitions=len(now),
                                  before=len(before))
        return True

    def queues(self, topic: str) -> set[MessageQueue] | None:
        """`topicSubscribeInfoTable.get(topic)`: its queues, or None if no route was ever had."""
        with self._lock:
            return set(self.topic_subscribe_info[topic]) if topic in self.topic_subscribe_info else None

    def route_brokers(self) -> list[str]:
        with self._lock:
            return sorted(self.broker_addr_table)

    # -- the channels ---------------------------------------------------------------------
    def _channel(self, name: str) -> DuplexClient:
        with self._lock:
            if name not in self._channels:
                if name not in self.broker_addr_table:
                    raise ConnectionError(f"no address for {name}: it is in no route this client knows")
                host, port = self.via.get(self.broker_addr_table[name], self.broker_addr_table[name])
                self._channels[name] = DuplexClient(host, port, client_id=self.client_id, timeout_s=self.timeout_s,
                                                    on_push=lambda frame, b=name: self._pushed(b, frame))
            return self._channels[name]

    def _pushed(self, name: str, frame: dict) -> None:
        """`ClientRemotingProcessor.notifyConsumerIdsChanged`: whatever group it names, rebalance at once."""
        if frame.get("push") == "NOTIFY_CONSUMER_IDS_CHANGED":
            self.trace.record("notified", member=self.client_id, broker=name, group=frame.get("consumer_group"))
            self.on_notify(name)

    def _call(self, name: str, api: str, *, timeout_ms: int | None = None, **body) -> dict:
        """One synchronous request to broker `name` (`invokeSync`: a timeout closes the channel); its RocketMQ
        answer, or BrokerRefused / ConnectionError. `timeout_ms`: `mqClientApiTimeout` unless given."""
        timeout_s = self.timeout_s if timeout_ms is None else timeout_ms / 1000
        try:
            answer = self._channel(name).call(api, timeout_s=timeout_s, **body)
        except WireError as exc:
            raise BrokerRefused(f"{api}: {exc}") from None
        return self._checked(answer)

    @staticmethod
    def _checked(answer: dict) -> dict:
        if answer.get("code", "SUCCESS") not in ("SUCCESS",):
            raise BrokerRefused(answer.get("code"))
        return answer

    def _oneway(self, name: str, api: str, on_outcome: Callable[[str, str], None], **body) -> None:
        """`invokeOneway`: send and go on; nothing waits, so nothing times out or closes the channel. The lab's
        broker answers anyway, and only for the trace: `on_outcome("accepted" | "failed", error)` on the
        channel's reader thread. Raises ConnectionError if it cannot be sent."""
        def answered(frame: dict | None) -> None:
            if frame is None:
                on_outcome("failed", "ConnectionError: the channel closed before the broker's answer came")
            elif frame.get("error_code", 0) != 0:
                on_outcome("failed", f"BrokerRefused: {frame.get('error')}: {frame.get('message', '')}")
            elif frame.get("code", "SUCCESS") != "SUCCESS":
                on_outcome("failed", f"BrokerRefused: {frame.get('code')}")
            else:
                on_outcome("accepted", "NONE")
        self._channel(name).send_oneway(api, on_answer=answered, **body)

    def _failed(self, api: str, broker: str, exc: Exception) -> None:
        self.trace.record("rocketmq_request_failed", member=self.client_id, api=api, broker=broker,
                          error=f"{exc.__class__.__name__}: {exc}")

    # -- membership -----------------------------------------------------------------------
    def send_heartbeat_to_all_brokers(self, group: str, topics: dict[str, int]) -> int | None:
        """HEART_BEAT (this client's one ConsumerData) to every broker of the route; how many answered, or None
        if another thread's heartbeat was under way (`sendHeartbeatToAllBrokerWithLock`'s tryLock fails: "lock
        heartBeat, but failed", and this one is not sent)."""
        if not self._heartbeat_lock.acquire(blocking=False):
            self.trace.record("rocketmq_request_failed", member=self.client_id, api="HEART_BEAT", broker="(all)",
                              error="lock heartBeat, but failed: another heartbeat is under way")
            return None
        try:
            answered = 0
            for name in self.route_brokers():
                try:
                    self._call(name, "HEART_BEAT", client_id=self.client_id,
                               consumer_data=[{"group": group, "topics": topics}])
                    answered += 1
                except (ConnectionError, BrokerRefused) as exc:
                    self._failed("HEART_BEAT", name, exc)  # RocketMQ logs it; the next tick tries again
            return answered
        finally:
            self._heartbeat_lock.release()

    def find_consumer_id_list(self, topic: str, group: str) -> tuple[str | None, list[str] | None]:
        """(the broker asked, its id list), or (broker, None) when it failed: `findBrokerAddrByTopic` picks one
        broker of the topic's route at random; with none, the route is refreshed and asked again
        (`findConsumerIdList`)."""
        names = self._topic_brokers(topic)
        if not names and self.update_route(topic):
            names = self._topic_brokers(topic)
        if not names:
            return None, None
        name = self.rng.choice(names)
        try:
            return name, [str(i) for i in self._call(name, "GET_CONSUMER_LIST_BY_GROUP",
                                                     consumer_group=group)["consumer_id_list"]]
        except (ConnectionError, BrokerRefused) as exc:
            self._failed("GET_CONSUMER_LIST_BY_GROUP", name, exc)
            return name, None

    def _topic_brokers(self, topic: str) -> list[str]:
        with self._lock:
            return sorted({mq[1] for mq in self.topic_subscribe_info.get(topic, ())})

    def unregister_client(self, group: str) -> None:
        for name in self.route_brokers():
            try:
                self._call(name, "UNREGISTER_CLIENT", client_id=self.client_id, consumer_group=group)
            except (ConnectionError, BrokerRefused) as exc:
                self._failed("UNREGISTER_CLIENT", name, exc)

    # -- rebalance.Broker: offsets and locks at the queue's broker ------------------------------
    def query_offset(self, group: str, mq: MessageQueue) -> int:
        try:
            return int(self._call(mq[1], "QUERY_CONSUMER_OFFSET", timeout_ms=QUERY_CONSUMER_OFFSET_TIMEOUT_MS,
                                  consumer_group=group, topic=mq[0], queue_id=mq[2])["offset"])
        except BrokerRefused:
            raise OffsetNotFound(mq) from None  # QUERY_NOT_FOUND: RocketMQ's readOffset answers -1

    def max_offset(self, mq: MessageQueue) -> int:
        try:
            return int(self._channel(mq[1]).call("ListOffsets", timeout_s=MAX_OFFSET_TIMEOUT_MS / 1000, topic=mq[0],
                                                 partition=mq[2], which="latest")["offset"])
        except WireError as exc:
            raise ConnectionError(f"max offset of {mq}: {exc}") from None

    def persist_offset(self, group: str, mq: MessageQueue, offset: int,
                       on_outcome: Callable[[str, str], None]) -> None:
        """`updateConsumeOffsetToBroker(mq, offset, isOneway=true)`: oneway, so it never waits, times out or
        closes the channel; `on_outcome` hears the broker's answer (see `_oneway`). Raises ConnectionError if it
        cannot be sent."""
        self._oneway(mq[1], "UPDATE_CONSUMER_OFFSET", on_outcome, consumer_group=group, topic=mq[0],
                     queue_id=mq[2], commit_offset=offset)

    def lock_batch(self, group: str, name: str, mqs: list[MessageQueue]) -> set[MessageQueue] | None:
        """LOCK_BATCH_MQ (1 000 ms): the queues the broker granted, or None if it could not be asked."""
        try:
            answer = self._call(name, "LOCK_BATCH_MQ", timeout_ms=LOCK_TIMEOUT_MS, consumer_group=group,
                                client_id=self.client_id, mq_set=[list(mq) for mq in mqs])
        except (ConnectionError, BrokerRefused) as exc:
            self._failed("LOCK_BATCH_MQ", name, exc)
            return None
        return {tuple(mq) for mq in answer.get("lock_ok_mq_set", [])}

    def lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        return mq in (self.lock_batch(group, mq[1], [mq]) or ())

    def unlock(self, group: str, mq: MessageQueue, client_id: str) -> None:
        """`RebalanceImpl.unlock(mq, oneway=true)`, as a queue is let go."""
        def outcome(result: str, error: str) -> None:
            if result != "accepted":
                self._failed("UNLOCK_BATCH_MQ", mq[1], ConnectionError(error))
        try:
            self._oneway(mq[1], "UNLOCK_BATCH_MQ", outcome, consumer_group=group, client_id=client_id,
                         mq_set=[list(mq)])
        except ConnectionError as exc:
            self._failed("UNLOCK_BATCH_MQ", mq[1], exc)

    def unlock_batch(self, group: str, name: str, mqs: list[MessageQueue]) -> None:
        """`RebalanceImpl.unlockAll(oneway=false)`, at shutdown: one UNLOCK_BATCH_MQ per broker, 1 000 ms."""
        try:
            self._call(name, "UNLOCK_BATCH_MQ", timeout_ms=LOCK_TIMEOUT_MS, consumer_group=group,
                       client_id=self.client_id, mq_set=[list(mq) for mq in mqs])
        except (ConnectionError, BrokerRefused) as exc:
            self._failed("UNLOCK_BATCH_MQ", name, exc)

    # -- messages ----------------------------------------------------------------------------------
    def pull(self, group: str, mq: MessageQueue, offset: int, max_records: int,
             commit_offset: int | None = None) -> list[dict]:
        """The records of `mq` from `offset` (PULL_MESSAGE on its broker, no wait), or ConnectionError /
        BrokerRefused. `commit_offset`: the offset the broker stores for `group` as it answers (RocketMQ's
        COMMIT_OFFSET flag; None: the flag is not set).

        As RocketMQ's pull (`CommunicationMode.ASYNC`, 30 000 ms): a timeout fails this pull only and leaves
        the channel open (`invokeAsync`); the caller pulls the queue again later."""
        commit = {} if commit_offset is None else {"commit_offset": commit_offset}
        try:
            answer = self._channel(mq[1]).call("PULL_MESSAGE", timeout_s=PULL_TIMEOUT_MS / 1000,
                                               close_on_timeout=False, consumer_group=group, topic=mq[0],
                                               queue_id=mq[2], queue_offset=offset, max_msg_nums=max_records, **commit)
        except WireError as exc:
            raise BrokerRefused(f"PULL_MESSAGE: {exc}") from None
        return self._checked(answer)["records"]

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
