"""A RocketMQ push consumer (CLUSTERING), after RocketMQ 4.9.8's `DefaultMQPushConsumerImpl`.

Its service state (`ServiceState`)::

    CREATE_JUST --start()--> RUNNING --stop()--> SHUTDOWN_ALREADY

There is no "rebalancing" state: a RocketMQ consumer keeps consuming what it
holds while it rebalances, and nothing tells it that the group agrees.

Its threads, as RocketMQ's:

- **scheduled tasks** (`MQClientInstance.startScheduledTask`, one thread):
  the route every `pollNameServerInterval` (first after 10 ms; it only
  replaces the topic's queue set, so a topic's new queues wait for the next
  RebalanceService tick, `instance.py`), a heartbeat to every broker every
  `heartbeatBrokerInterval` (first after 1 s), every owned queue's offset to
  its broker every `persistConsumerOffsetInterval` (first after 10 s; each
  pull also carries its queue's offset, `instance.py`), and,
  orderly only, the queue locks renewed every 20 s (`lockMQPeriodically`);
- **RebalanceService**: waits `rocketmq.client.rebalance.waitInterval` (20 s)
  or until woken, then `doRebalance`; a broker's NOTIFY_CONSUMER_IDS_CHANGED
  wakes it (`instance.py`), and wake-ups during a rebalance fold into one;
- **pull and consume** (`PullMessageService` and the consume pool, as one
  thread here): each queue in the process-queue table whose pull is due, in
  turn, a batch of `pullBatchSize`, each message processed under the queue's
  consume lock unless its queue was dropped meanwhile (`ConsumeRequest`
  checks `isDropped` before it consumes). A failed pull is due again 1 s later
  (`pullTimeDelayMillsWhenException`). Orderly: a queue not locked is tried
  again 1 s later; its first pull re-reads its offset from the broker; the
  lock and its 30 s life are checked before every message.

`start()` (`DefaultMQPushConsumerImpl.start`, its last steps): the route,
a heartbeat to every broker, then a rebalance at once. `stop()` (`shutdown`,
in its order): consuming stops (orderly: every lock released), offsets
persisted, UNREGISTER_CLIENT to every broker, connections closed.

One rebalance is `rebalance.py`'s; it records `rebalance_begin`/`rebalance_end`,
`revoked` for the queues it let go and `assigned` (with `view`, the sorted id
list it allocated from, and `broker`, whom it asked) whenever its share or
its view changed. After a rebalance that changed the share, the consumer
heartbeats every broker again (`messageQueueChanged`).

Departures, stated (and see `instance.py` for offsets and pulls):

- the `%RETRY%<group>` topic is not subscribed (the lab's application never
  fails a message, so nothing is ever retried);
- pull and consume are one thread, so a queue is consumed by one thread at a
  time as an orderly consumer's is; a queue's pull waits for the others'
  consumption, so with a slow application (`lab.processing.ms` x
  `pullBatchSize` x queues held over 120 s) a queue is not pulled for 120 s
  and the next rebalance drops it as pull-expired and makes it anew (RocketMQ
  pulls while the pool consumes, so it does not);
- the orderly lock renewal runs on the scheduled thread (RocketMQ: the
  orderly service's own, ConsumeMessageOrderlyService.java:92, 96-107), so a
  slow renewal (1 s at most) delays a heartbeat or an offset persist;
- a late scheduled task runs once, not once per missed period (RocketMQ's
  are fixed-rate): after a stall the lab sends one heartbeat, not several;
- after a rebalance that changed the share, every topic's `subVersion` is
  bumped and one heartbeat follows all topics (RocketMQ bumps the changed
  topic's and heartbeats inside its rebalance, RebalanceImpl.java:298-305):
  the same with one topic;
- `start()` heartbeats every broker, then starts its threads; RocketMQ
  starts its RebalanceService inside `MQClientInstance.start()`, before that
  heartbeat, so its first allocation may read a broker's id list that does
  not list it yet, and its rebalance's own heartbeat may be skipped while
  `start()`'s holds the heartbeat lock (found running RocketMQ 4.9.7's own
  client beside this one, `real_systems/rocketmq49/`);
- `stop()` stops every thread first (RocketMQ's shutdown persists and
  unregisters while its scheduled tasks and pulls still run, and stops them
  after): the stopping consumer sends no heartbeat and consumes nothing more
  meanwhile, which only shortens its own end;
- a rebalance holds the process-queue table's lock across its requests
  (offsets, locks), so the pull thread's next round waits for it (RocketMQ's
  table is a concurrent map): a pause of one rebalance's round trips;
- no START_FAILED state: RocketMQ's start is left in it when a check throws
  (a bad config, a group already registered on the same client instance,
  DefaultMQPushConsumerImpl.java:589-651); the lab refuses a bad config
  before it builds a consumer, and each consumer has its own client id, so
  no lab start fails that way. A route or heartbeat that fails at start is
  only logged, in both, and retried on the timers.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

from lab_cluster.clock import monotonic_ms, wall_clock_ms
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder

from .config import ClientConfig
from .instance import BrokerRefused, MQClientInstance
from .rebalance import MessageQueue, OffsetNotFound, ProcessQueue, RebalanceImpl

#: `REBALANCE_LOCK_INTERVAL` (`rocketmq.client.rebalance.lockInterval`): orderly consumers renew their locks
REBALANCE_LOCK_INTERVAL_MS = 20_000
#: `ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME`: a lock not renewed for this long is not trusted by its holder
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000
#: `startScheduledTask`'s first runs: the route after 10 ms, a heartbeat after 1 s, offsets after 10 s
ROUTE_INITIAL_DELAY_MS, HEARTBEAT_INITIAL_DELAY_MS, PERSIST_INITIAL_DELAY_MS = 10, 1_000, 10_000
#: `pullTimeDelayMillsWhenException` (ClientConfig.java: 1000, copied by DefaultMQPushConsumerImpl's constructor):
#: a failed pull, and an orderly queue not locked at its broker, are pulled again this much later
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 1_000
#: `tryLockLaterAndReconsume`: an orderly queue whose lock could not be had again is consumed 3 s later
RECONSUME_LATER_WHEN_NOT_LOCKED_MS = 3_000
IDLE_PAUSE_S = 0.05  # a pull round that brought nothing waits this long (RocketMQ's broker would hold the pull)


class ServiceState(enum.Enum):
    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


class PushConsumer:
    def __init__(self, config: ClientConfig, topics: list[str], trace: TraceRecorder, *,
                 on_change: Callable[[PushConsumer], None] | None = None):
        self.config, self.topics, self.trace, self.on_change = config, sorted(topics), trace, on_change
        self.client_id = config.client_id
        self.group = config.consumer_group
        self.state = ServiceState.CREATE_JUST
        self.instance = MQClientInstance(self.client_id, config.brokers, trace, timeout_ms=config.mq_client_api_timeout,
                                         on_notify=lambda broker: self._wakeup.set(), via=config.via)
        # the rebalance asks offsets and locks of this consumer (`rebalance.Broker`), which asks the instance
        self.rebalance_impl = RebalanceImpl(self.group, self.client_id, self, strategy=config.strategy,
                                            orderly=config.orderly, consume_from_where=config.consume_from_where)
        self.sub_versions = {t: wall_clock_ms() for t in self.topics}  # `SubscriptionData.subVersion`
        self.rebalances = 0
        self._views: dict[str, list[str]] = {}  # topic -> the id list of its last recorded assignment
        self._table_lock = threading.RLock()  # the process-queue table: the rebalance and pull threads share it
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._pulling = False  # the pull thread waits for a pull's answer (stop need not wait for it)
        self._threads = [threading.Thread(target=target, name=f"{name}-{self.client_id}", daemon=True)
                         for name, target in (("scheduled", self._scheduled_tasks),
                                              ("rebalance", self._rebalance_service), ("pull", self._pull_service))]

    # -- public ------------------------------------------------------------------------------
    @property
    def ident(self) -> str:
        """How the group and the trace name it (`GroupMember`): its client id, `clientIP@instanceName`."""
        return self.client_id

    def start(self) -> PushConsumer:
        self.trace.record("consumer_start", member=self.client_id, config=self.config.as_record(), topics=self.topics)
        for topic in self.topics:
            self.instance.update_route(topic)
        self._set_state(ServiceState.RUNNING)
        self._heartbeat()
        self._wakeup.set()  # `rebalanceImmediately`
        for thread in self._threads:
            thread.start()
        return self

    def snapshot(self) -> MemberSnapshot:
        return MemberSnapshot(self.state.value, gave_up=False, partitions=self.partitions())

    def held(self) -> dict[MessageQueue, ProcessQueue]:
        """The queues it holds now (its process queues not dropped), read under the table's lock."""
        with self._table_lock:
            return {mq: pq for mq, pq in self.rebalance_impl.table.items() if not pq.dropped}

    def partitions(self) -> list[int]:
        return sorted(mq[2] for mq in self.held())

    def stop(self, timeout_s: float = 30.0) -> None:
        """`shutdown`: stop consuming (orderly: unlock all), persist offsets, unregister everywhere, close."""
        if self.state is not ServiceState.RUNNING:
            return
        self._stop.set()
        self._wakeup.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads[:2]:
            thread.join(max(0.0, deadline - time.monotonic()))
        pull = self._threads[2]
        # RocketMQ's pulls are asynchronous: shutdown waits for consumption, not for a pull's answer (which a
        # cut link would make 30 s); a pull answered from now on consumes nothing (`_stop` is set)
        while pull.is_alive() and not self._pulling and time.monotonic() < deadline:
            pull.join(0.05)
        with self._table_lock:
            held = sorted(self.rebalance_impl.table.items())
        if self.config.orderly:  # `unlockAll(false)`: one UNLOCK_BATCH_MQ per broker
            by_broker: dict[str, list[MessageQueue]] = {}
            for mq, _ in held:
                by_broker.setdefault(mq[1], []).append(mq)
            for name, mqs in sorted(by_broker.items()):
                self.instance.unlock_batch(self.group, name, mqs)
        self._persist_all("stop")
        self.instance.unregister_client(self.group)
        self.trace.record("revoked", member=self.client_id, partitions=[[mq[0], mq[2]] for mq, _ in held])
        self.instance.close()  # fails a pull still waiting for its answer, at once
        pull.join(max(0.0, deadline - time.monotonic()))  # so that nothing is traced after `consumer_stop`
        self._set_state(ServiceState.SHUTDOWN_ALREADY)
        self.trace.record("consumer_stop", member=self.client_id)

    # -- state ---------------------------------------------------------------------------------
    def _set_state(self, state: ServiceState) -> None:
        self.state = state
        self.trace.record("consumer_state", member=self.client_id, state=state.value)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # -- scheduled tasks -------------------------------------------------------------------------
    def _scheduled_tasks(self) -> None:
        """One thread, as MQClientInstance's scheduled executor: each task when it is due."""
        now = monotonic_ms()
        due = {"route": now + ROUTE_INITIAL_DELAY_MS,
               "heartbeat": now + HEARTBEAT_INITIAL_DELAY_MS,
               "persist": now + PERSIST_INITIAL_DELAY_MS}
        periods = {"route": self.config.poll_name_server_interval, "heartbeat": self.config.heartbeat_broker_interval,
                   "persist": self.config.persist_consumer_offset_interval}
        if self.config.orderly:
            due["lock"], periods["lock"] = now + 1_000, REBALANCE_LOCK_INTERVAL_MS
        tasks = {"route": lambda: [self.instance.update_route(t) for t in self.topics],
                 "heartbeat": self._heartbeat, "persist": lambda: self._persist_all("interval"),
                 "lock": self._lock_all}
        while not self._stop.is_set():
            task = min(due, key=due.get)
            if self._stop.wait(max(0, due[task] - monotonic_ms()) / 1000):
                return
            tasks[task]()
            due[task] = max(due[task] + periods[task], monotonic_ms())  # a late tick runs once, not many times

    def _heartbeat(self) -> None:
        self.instance.send_heartbeat_to_all_brokers(self.group, dict(self.sub_versions))

    def _persist_all(self, why: str) -> None:
        """`persistConsumerOffset`: every owned queue's offset to its broker. Nothing checks who sends it."""
        with self._table_lock:
            owned = [(mq, pq.offset) for mq, pq in sorted(self.rebalance_impl.table.items())
                     if not pq.dropped and pq.in_offset_table]  # `persistAll`: the offset table's queues only
        for mq, offset in owned:
            self._persist(mq, offset, why)

    def _persist(self, mq: MessageQueue, offset: int, why: str) -> None:
        """UPDATE_CONSUMER_OFFSET, oneway: nothing waits. Its `commit` event is traced when the broker's answer
        arrives (`accepted`, at about the time the broker stored it) or the channel closes first (`failed`)."""
        def traced(outcome: str, error: str) -> None:
            self.trace.record("commit", member=self.client_id, topic=mq[0], partition=mq[2], offset=offset,
                              outcome=outcome, error=error, why=why)
        try:
            self.instance.persist_offset(self.group, mq, offset, traced)
        except ConnectionError as exc:
            traced("failed", f"{exc.__class__.__name__}: {exc}")

    def _lock_all(self) -> None:
        """`RebalanceImpl.lockAll`: renew every held queue's lock, one batch per broker; a queue the broker did
        not grant is marked unlocked (its consumption waits). A broker that cannot be asked changes nothing: its
        queues stay as they were until their locks' 30 s life runs out (`isLockExpired`)."""
        with self._table_lock:
            by_broker: dict[str, list[MessageQueue]] = {}
            for mq in self.rebalance_impl.table:
                by_broker.setdefault(mq[1], []).append(mq)
        for name, mqs in sorted(by_broker.items()):
            granted = self.instance.lock_batch(self.group, name, sorted(mqs))
            if granted is None:
                continue  # "lockBatchMQ exception": logged, nothing marked
            now = monotonic_ms()
            with self._table_lock:
                for mq in mqs:
                    pq = self.rebalance_impl.table.get(mq)
                    if pq is not None:
                        pq.locked = mq in granted
                        if pq.locked:
                            pq.last_lock_ms = now

    # -- RebalanceService ----------------------------------------------------------------------
    def _rebalance_service(self) -> None:
        while not self._stop.is_set():
            self._wakeup.wait(self.config.rebalance_wait_interval / 1000)
            self._wakeup.clear()  # a wake-up that comes during the rebalance makes the next wait return at once
            if self._stop.is_set():
                return
            self.do_rebalance()

    def do_rebalance(self) -> None:
        """`RebalanceImpl.doRebalance`: every subscribed topic, from its route and one broker's id list."""
        self.rebalances += 1
        self.trace.record("rebalance_begin", member=self.client_id, rebalance=self.rebalances)
        changed_any, outcomes = False, []
        for topic in self.topics:
            queues = self.instance.queues(topic)
            broker, ids = self.instance.find_consumer_id_list(topic, self.group)
            with self._table_lock:
                outcome = self.rebalance_impl.rebalance_by_topic(topic, queues, ids)
            outcomes.append(outcome.kept or "ok")
            if outcome.kept:
                continue
            if outcome.removed:
                self.trace.record("revoked", member=self.client_id, partitions=[[t, q] for t, _, q in outcome.removed])
            if outcome.changed or outcome.view != self._views.get(topic):
                self._views[topic] = outcome.view
                with self._table_lock:
                    held = sorted(mq for mq in self.rebalance_impl.table if mq[0] == topic)
                self.trace.record("assigned", member=self.client_id, partitions=[[t, q] for t, _, q in held],
                                  view=",".join(outcome.view), broker=broker, rebalance=self.rebalances,
                                  skipped=[[t, q] for t, _, q in outcome.skipped])
            changed_any |= outcome.changed
        self.trace.record("rebalance_end", member=self.client_id, rebalance=self.rebalances,
                          outcome="ok" if all(o == "ok" for o in outcomes) else "; ".join(outcomes))
        if changed_any:  # `messageQueueChanged`: a new subVersion, heartbeats to every broker at once
            self.sub_versions = {t: wall_clock_ms() for t in self.topics}
            self._heartbeat()
        self._changed()

    # -- rebalance.Broker: what a rebalance asks, through the instance; a let-go queue's offset is traced ------
    def query_offset(self, group: str, mq: MessageQueue) -> int:
        return self.instance.query_offset(group, mq)

    def max_offset(self, mq: MessageQueue) -> int:
        return self.instance.max_offset(mq)

    def persist_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._persist(mq, offset, "removed")  # `removeUnnecessaryMessageQueue`: never raises (oneway in RocketMQ)

    def lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        return self.instance.lock(group, mq, client_id)

    def unlock(self, group: str, mq: MessageQueue, client_id: str) -> None:
        self.instance.unlock(group, mq, client_id)

    # -- pull and consume ------------------------------------------------------------------------
    def _pull_service(self) -> None:
        """`PullMessageService`: every queue whose pull is due, in turn; a round that brought nothing pauses."""
        while not self._stop.is_set():
            if not self._pull_round():
                self._stop.wait(IDLE_PAUSE_S)

    def _pull_round(self) -> bool:
        """One pass over the process-queue table; True if any pull brought anything."""
        with self._table_lock:
            queues = sorted(self.rebalance_impl.table.items())
        got_any = False
        for mq, pq in queues:
            if self._stop.is_set():
                break
            if pq.next_pull_ms <= monotonic_ms():
                got_any |= self._pull_once(mq, pq)
        return got_any

    def _pull_later(self, pq: ProcessQueue) -> bool:
        """`executePullRequestLater(pullRequest, pullTimeDelayMillsWhenException)`: the other queues go on."""
        pq.next_pull_ms = monotonic_ms() + PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
        return False

    def _pull_once(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """`pullMessage` of `mq` and the consumption of what it brought; True if it brought anything."""
        if pq.dropped:
            return False
        pq.last_pull_ms = monotonic_ms()  # before any check, as `pullMessage` sets `lastPullTimestamp`
        if self.config.orderly:
            if not pq.locked:
                return self._pull_later(pq)  # "pull message later because not locked in broker"
            if not pq.previously_locked:  # "the first time to pull message, so fix offset from broker"
                try:
                    pq.offset, stored = self.rebalance_impl.pull_from_where(mq)
                except (OSError, OffsetNotFound, BrokerRefused):
                    return self._pull_later(pq)
                pq.in_offset_table |= stored
                pq.previously_locked = True
        # the COMMIT_OFFSET flag: the in-memory offset rides on the pull when the offset table has one above 0
        commit_offset = pq.offset if pq.in_offset_table and pq.offset > 0 else None
        self._pulling = True
        try:
            records = self.instance.pull(self.group, mq, pq.offset, self.config.pull_batch_size, commit_offset)
        except (ConnectionError, BrokerRefused) as exc:
            if self._stop.is_set():
                return False  # the shutdown closed the channel under it
            self.trace.record("rocketmq_request_failed", member=self.client_id, api="PULL_MESSAGE", broker=mq[1],
                              error=f"{exc.__class__.__name__}: {exc}")  # `PullCallback.onException` logs it
            return self._pull_later(pq)
        finally:
            self._pulling = False
        if self._stop.is_set():
            return False  # answered after the shutdown began: nothing more is consumed or traced
        if commit_offset is not None and commit_offset != pq.last_pull_commit:
            # traced once per offset it carried (an idle queue's pulls carry the same one again and again)
            pq.last_pull_commit = commit_offset
            self.trace.record("commit", member=self.client_id, topic=mq[0], partition=mq[2], offset=commit_offset,
                              outcome="accepted", error="NONE", why="pull")
        pq.in_offset_table = True  # a pull result puts the queue in the offset table (its offset, or the next)
        for record in records:
            if not self._consume_one(mq, pq, record):
                break
        return bool(records)

    def _lock_held(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Orderly: the queue is locked and its lock younger than 30 s, or `lockOneMQ` just got it again."""
        if pq.locked and monotonic_ms() - pq.last_lock_ms <= REBALANCE_LOCK_MAX_LIVE_TIME_MS:
            return True
        if not self.instance.lock(self.group, mq, self.client_id):
            return False
        pq.locked, pq.last_lock_ms = True, monotonic_ms()
        return True

    def _consume_one(self, mq: MessageQueue, pq: ProcessQueue, record: dict) -> bool:
        """One message, under the queue's consume lock (`consumeMessageBatchMaxSize` 1); False: stop the batch.

        Not consumed if the queue was dropped meanwhile (`ConsumeRequest.run` checks `isDropped`), or, orderly,
        if its lock is gone or older than 30 s (checked before every message,
        ConsumeMessageOrderlyService.java:443-455) and locking it again fails: the rest is pulled again from
        the consumed offset, 3 s later (`tryLockLaterAndReconsume`)."""
        if self.config.orderly and not self._lock_held(mq, pq):
            pq.next_pull_ms = monotonic_ms() + RECONSUME_LATER_WHEN_NOT_LOCKED_MS
            return False
        with pq.consume_lock:
            if pq.dropped or self._stop.is_set():
                return False
            if self.config.lab_processing_ms:
                time.sleep(self.config.lab_processing_ms / 1000)
            self.trace.record("processed", topic=mq[0], partition=mq[2], offset=record["offset"],
                              member=self.client_id)
            pq.offset = record["offset"] + 1  # `updateOffset`: only while the queue is not dropped
        return True
