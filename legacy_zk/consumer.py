"""The ZooKeeper-era consumer: Kafka 0.8.2.2's `ZookeeperConsumerConnector`, one per group member.

States and transitions::

    STARTING    --start(): session, registration, subscriptions, first rebalance---> REBALANCING
    REBALANCING --an attempt claimed its whole share---------------------------------> CONSUMING
    CONSUMING   --a watch fired, or a new session after expiry------------------------> REBALANCING
    REBALANCING --rebalance.max.retries attempts failed------------------------------> FAILED
    FAILED      --a later watch event: a new syncedRebalance--------------------------> REBALANCING
    any         --stop(): fetchers stopped, commit (if auto-commit), session closed---> STOPPED

FAILED is 0.8's `ConsumerRebalanceFailedException`: the consumer owns and
fetches nothing but stays registered, so the others' range split still counts
it and its share stays unconsumed. (0.8's watcher thread logged the exception
and went on waiting for events, which is why a later change can revive it.)

Its threads, as 0.8's: the **watcher executor** (`_rebalance_loop`) runs a
`syncedRebalance` whenever a listener raised the flag (a burst of events
makes one more rebalance, not one each); zkclient's **event thread**
(`watches.EventThread`) re-arms watches, calls the listeners (the group's
ids: `handleChildChange`; each topic's znode: `ZKTopicPartitionChangeListener`,
`topic_listener.py`, which records `partitions_seen` when a topic grew) and runs
`handleNewSession`; the **auto-commit** scheduler commits at a fixed rate;
one **fetcher** per owned partition, which queues what it fetches to its
partition's stream; one **stream iterator** per stream (`streams.py`), the
application's thread, which processes the chunks in turn.

This module does the requests, the threads and the waiting; what to do is
decided by `rules.py`, with no I/O (tested without a server): how an attempt
ended and what follows it (`synced_rebalance_step`), which positions a
commit writes (`commit_offsets_due`), when the next auto-commit tick is due
(`auto_commit_wait`), what a session-state change does
(`process_state_changed`), and where a claimed partition starts
(`start_position`).

One rebalance attempt (`_rebalance`, ZookeeperConsumerConnector L636-704), in
0.8.2.2's order; `view.py` lists the reads and their number:

1. read the cluster (before the attempt), our registration, the brokers again;
2. stop every fetcher and commit the registry's positions (if auto-commit:
   `closeFetchers`);
3. delete the owner znodes of the partitions in the registry
   (`releasePartitionOwnership`), and empty it;
4. read the assignment context (the `view`) and compute our share
   (`partition_assignor.py`: range or roundrobin);
5. read the committed offset of each partition of the share (`fetchOffsets`);
6. claim the share (`ownership.claim_all`): if any partition is refused, the
   attempt fails; after a failed attempt the fetchers are stopped and the
   registry committed again (`closeFetchersForQueues`), then the back-off;
7. the share becomes the registry; the brokers are read for the leader finder,
   and a fetcher starts per partition (`assigned`), queueing to the stream of
   the partition's thread id.

The registry (0.8's `topicRegistry`: what the consumer believes it owns, with
each partition's `PartitionTopicInfo`: its consumed and fetched offsets) and
the fetchers (the fetcher manager's) are apart, as in 0.8, because a new
session empties the first and not the second. Stopping the fetchers
(`closeFetchersForQueues`) also clears every stream's queue, so a new owner
fetches again what was fetched and not processed.

Session handling, stated:

- **connection lost (SUSPENDED)** changes nothing (0.8's `handleStateChanged`
  does nothing): fetchers keep fetching, a rebalance in progress and an
  auto-commit wait for the connection (`zkclient.py`, `retryUntilConnected`);
  a lost connection is no watch event (`watches.py`);
- **reconnected within the session**: the watches are set again and any change
  missed meanwhile is delivered (`GroupWatches.rewatch`, for Java's `SetWatches`);
- **session expired (LOST, learnt only on reconnecting)**: on the event thread,
  0.8's `handleNewSession`: `resetState` empties the registry (the fetchers go
  on until the next attempt stops them, and that attempt commits and releases
  nothing: the registry is empty), the consumer registers again and
  rebalances; then every listener fires once more (zkclient's
  `fireAllEvents`), which makes a second rebalance. Meanwhile an auto-commit
  blocked since the outage writes the positions it took before it, on the new
  session: 0.8's zombie commit. After a SIGSTOP, the fixed-rate scheduler runs
  its overdue tick at once, with the positions of the moment.

Departures, stated: one thread id and one iterator per stream as 0.8, but a
fetcher per partition rather than per broker (a full stream queue holds up
only that partition's fetcher, where 0.8's fetcher thread for a broker waits
with all its partitions); leaders come from the brokers' `Metadata` answer
(after reading the brokers from ZooKeeper, as 0.8's leader finder did, at
the start and after every fetch error, `fetching.py`);
a partition with no committed offset starts from `auto.offset.reset` when its
fetcher starts (0.8: when its first fetch was refused as out of range);
`stop()` gives up waiting for ZooKeeper after the session timeout plus the
back-off (0.8's `shutdown` could wait for a blocked commit for a day).

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": zk})
    consumer = LegacyConsumer(config, ["t"], trace).start()
    consumer.assignment()      # {("t", 0): "g_host-1763600000000-1a2b3c4d-0", ...}
    consumer.stop()
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from lab_cluster.broker import zk_layout as L
from lab_cluster.broker.client import find_leader
from lab_cluster.family import MemberSnapshot
from lab_cluster.host_health import kazoo_logger
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import WireClient, WireError

from . import rules, znodes
from .config import ConsumerConfig
from .fetching import LeaderFinder, PartitionFetcher
from .offsets import commit_offset, fetch_offset
from .ownership import claim_all, release_all
from .partition_assignor import ASSIGNORS, AssignmentFailed
from .registration import register, thread_ids
from .rules import ConsumerState, Key
from .streams import PartitionTopicInfo, Stream
from .topic_listener import TopicPartitionChangeListener
from .view import read_brokers, read_own_subscription, read_view
from .watches import EventThread, GroupWatches
from .zkclient import Stopping, TracedZk


class LegacyConsumer:
    def __init__(self, config: ConsumerConfig, topics: list[str], trace: TraceRecorder, *,
                 on_change: Callable[[LegacyConsumer], None] | None = None):
        self.config = config
        self.topics = sorted(topics)
        self.trace = trace
        self.consumer_id = config.consumer_id
        self.thread_ids = thread_ids(self.consumer_id, config.streams)
        self.assignor = ASSIGNORS[config.partition_assignment_strategy]
        self.state = ConsumerState.STARTING
        self.on_change = on_change or (lambda consumer: None)
        self.rebalances = 0
        self._lock = threading.RLock()             # the registry and the fetchers
        self._rebalance_lock = threading.RLock()   # 0.8's rebalanceLock: one rebalance at a time
        self._registry: dict[Key, PartitionTopicInfo] = {}  # topicRegistry: partition -> its offsets
        self._fetchers: dict[Key, PartitionFetcher] = {}    # the fetcher manager's partitions
        # createMessageStreams: one stream (queue and iterator) per thread id
        # the fetchers' one leader finder (0.8's LeaderFinderThread): the brokers from ZooKeeper, once a round
        self._leader_finder = LeaderFinder(lambda: read_brokers(self.zk, self.watches),
                                           config.refresh_leader_backoff_ms)
        self._streams = {tid: Stream(tid, trace, processing_ms=config.lab_processing_ms,
                                     max_chunks=config.queued_max_message_chunks) for tid in self.thread_ids}
        self._checkpointed: dict[Key, int] = {}     # checkpointedZkOffsets: the last offset written per partition
        self._commit_lock = threading.Lock()       # offsetsChannelLock: one commit's writes at a time
        self._triggered = threading.Event()         # isWatcherTriggered
        self._shutting_down = threading.Event()     # isShuttingDown
        self._closing = False  # its own session is being closed (`stop`): the LOST that follows is no expiry
        self._give_up = threading.Event()           # stop(): requests waiting for a connection give up
        self._session = rules.Session()             # SUSPENDED or LOST since the last connection
        session_s = config.zookeeper_session_timeout_ms / 1000
        # kazoo's logger, metered: the host reports how this session's pings went (`lab_cluster/host_health.py`)
        self.kazoo = KazooClient(hosts=config.zookeeper_connect, timeout=session_s, logger=kazoo_logger())
        self.zk = TracedZk(self.kazoo, trace, self._give_up)
        self.events = EventThread(self.consumer_id[-8:], trace)
        self.watches = GroupWatches(self.zk, self.events, trace, self._rebalance_event_triggered)
        # 0.8's topicPartitionChangeListener: a subscribed topic's znode changed (its partitions grew)
        self.topic_listener = TopicPartitionChangeListener(self.consumer_id, trace, self._rebalance_event_triggered)
        self._workers: list[threading.Thread] = []

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> LegacyConsumer:
        self.trace.record("consumer_start", member=self.consumer_id, config=self.config.as_record(),
                          topics=self.topics)
        self.kazoo.add_listener(self._on_session_state)
        self.kazoo.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        self.events.start()
        self._register()
        self.watches.subscribe_children(znodes.ids_path(self.config.group_id))
        for topic in self.topics:  # reinitializeConsumer: subscribeDataChanges(BrokerTopicsPath/topic, listener)
            self.watches.subscribe_data(L.topic_path(topic), self.topic_listener)
        if self.config.watch_broker_ids == "always":
            self.watches.subscribe_children(L.BROKER_IDS)
        for stream in self._streams.values():
            stream.start()
        self._triggered.set()  # the first syncedRebalance (0.8 runs it in createMessageStreams)
        for target, name in ((self._rebalance_loop, "watcher"), (self._auto_commit_loop, "autocommit")):
            t = threading.Thread(target=target, name=f"{name}-{self.consumer_id[-8:]}", daemon=True)
            t.start()
            self._workers.append(t)
        return self

    def stop(self) -> None:
        """0.8's `shutdown`: stop the threads, stop the fetchers, commit (if auto-commit), close the session.

        Nothing is deleted: the registration and the owner znodes are ephemeral and go with the session."""
        if self.state is ConsumerState.STOPPED:
            return
        self._shutting_down.set()
        self._triggered.set()
        grace_s = self.config.zookeeper_session_timeout_ms / 1000 + self.config.rebalance_backoff_ms / 1000 + 5
        give_up = threading.Timer(grace_s, self._give_up.set)
        give_up.daemon = True
        give_up.start()
        try:
            for t in self._workers:
                t.join(grace_s + 5)
            with self._rebalance_lock:
                self._stop_fetchers()
                for stream in self._streams.values():
                    stream.stop()  # the application's threads end after the message in hand
                if self.config.auto_commit_enable:
                    self._commit_offsets("stop")
        except (Stopping, KazooException) as exc:
            self.trace.record("stop_incomplete", member=self.consumer_id, error=type(exc).__name__)
        finally:
            give_up.cancel()
            self._give_up.set()
            for path in self.watches.unheard_on_close([znodes.ids_path(self.config.group_id)]):
                self.trace.record("zk_watch_unheard", path=path, member=self.consumer_id)
            self._closing = True
            self.kazoo.stop()
            self.kazoo.close()
            self.events.stop()
        self._set_state(ConsumerState.STOPPED)
        self.trace.record("consumer_stop", member=self.consumer_id)

    @property
    def ident(self) -> str:
        """How the group and the trace name it (`GroupMember`): the consumer id it registers."""
        return self.consumer_id

    def snapshot(self) -> MemberSnapshot:
        """Where this consumer is (`lab_cluster.family.GroupMember`): it gives up after rebalance.max.retries."""
        return MemberSnapshot(self.state.value, gave_up=self.state is ConsumerState.FAILED,
                              partitions=sorted(p for _, p in self.assignment()))

    def assignment(self) -> dict[Key, str]:
        """What this consumer believes it owns (its registry): {(topic, partition): thread id}."""
        with self._lock:
            return {key: info.thread_id for key, info in self._registry.items()}

    def fetching(self) -> set[Key]:
        with self._lock:
            return set(self._fetchers)

    def _register(self) -> None:
        register(self.zk, self.trace, self.config.group_id, self.consumer_id,
                 {t: self.config.streams for t in self.topics},
                 backoff_s=self.config.zookeeper_session_timeout_ms / 1000, stopping=self._shutting_down)

    # -- session ---------------------------------------------------------------------
    def _on_session_state(self, state) -> None:
        # kazoo calls this from its connection thread: record and queue, never a request here.
        self.trace.record("zk_session", member=self.consumer_id, zk_state=state)
        self._session, todo = rules.process_state_changed(self._session, state, closing=self._closing)
        for action in todo:
            if action == rules.SESSION_EXPIRED:
                self.trace.record("session_expired", member=self.consumer_id)
            elif action == rules.HANDLE_NEW_SESSION:
                self.events.send("handleNewSession", self._handle_new_session)
            elif action == rules.FIRE_ALL_EVENTS:
                self.watches.fire_all()
            elif action == rules.REWATCH:
                self.watches.rewatch()

    def _handle_new_session(self) -> None:
        """0.8's `handleNewSession`, on the event thread: resetState, register again, rebalance."""
        with self._lock:
            forgotten, self._registry = sorted(self._registry), {}
        if forgotten:
            self.trace.record("revoked", member=self.consumer_id, partitions=[[t, p] for t, p in forgotten],
                              why="session expired: resetState")
        self._register()
        self.trace.record("session_reestablished", member=self.consumer_id)
        self._synced_rebalance()

    def _rebalance_event_triggered(self) -> None:
        self._triggered.set()

    # -- rebalancing -----------------------------------------------------------------
    def _rebalance_loop(self) -> None:
        """0.8's watcher executor thread."""
        while not self._shutting_down.is_set():
            if not self._triggered.wait(0.2):
                continue
            if self._shutting_down.is_set():
                return
            self._triggered.clear()  # events from now on ask for another round
            try:
                self._synced_rebalance()
            except Stopping:
                return
            except (KazooException, AssignmentFailed) as exc:  # 0.8: error("error during syncedRebalance")
                self.trace.record("rebalance_error", member=self.consumer_id, error=type(exc).__name__)

    def _synced_rebalance(self) -> None:
        with self._rebalance_lock:
            if self._shutting_down.is_set():
                return
            self.rebalances += 1
            for attempt in itertools.count(1):
                self._set_state(ConsumerState.REBALANCING)
                self.trace.record("rebalance_begin", member=self.consumer_id, attempt=attempt)
                try:
                    read_brokers(self.zk, self.watches)  # getCluster: 0.8 hands it to the fetcher, which reads none
                    outcome = rules.attempt_outcome(self._rebalance())
                except (KazooException, AssignmentFailed, KeyError, ValueError) as exc:
                    outcome = rules.attempt_outcome(False, exc)  # 0.8: any Throwable fails the attempt
                self.trace.record("rebalance_end", member=self.consumer_id, attempt=attempt, outcome=outcome)
                then = rules.synced_rebalance_step(attempt, outcome, self.config.rebalance_max_retries)
                if then is ConsumerState.CONSUMING:
                    self._set_state(ConsumerState.CONSUMING)
                    return
                self._close_fetchers()  # closeFetchersForQueues: stop, commit the registry (if auto-commit)
                if self._shutting_down.wait(self.config.rebalance_backoff_ms / 1000):
                    return
                if then is ConsumerState.FAILED:
                    break
            self.trace.record("rebalance_failed", member=self.consumer_id,
                              attempts=self.config.rebalance_max_retries)
            self._set_state(ConsumerState.FAILED)

    def _rebalance(self) -> bool:
        group = self.config.group_id
        read_own_subscription(self.zk, group, self.consumer_id)  # 0.8: TopicCount.constructTopicCount
        brokers = read_brokers(self.zk, self.watches)             # 0.8: getAllBrokersInCluster
        if not brokers:
            # 0.8: subscribe to /brokers/ids and report success, keeping the registry and the fetchers as they are
            self.watches.subscribe_children(L.BROKER_IDS)
            self.trace.record("no_brokers", member=self.consumer_id)
            return True
        self._close_fetchers()
        with self._lock:
            owned, self._registry = set(self._registry), {}
        release_all(self.zk, group, owned)
        if owned:
            self.trace.record("revoked", member=self.consumer_id, partitions=[[t, p] for t, p in sorted(owned)],
                              why="releasePartitionOwnership")
        view = read_view(self.zk, self.watches, self.trace, group, self.consumer_id, brokers)
        self.topic_listener.rebalance_read(view.partitions, view.topic_mzxids)  # a growth read before it was heard
        decision = self.assignor.assign(view, self.consumer_id, self.thread_ids)
        committed = {key: fetch_offset(self.zk, group, *key) for key in decision}  # fetchOffsets, before claiming
        if self._shutting_down.is_set() or not claim_all(self.zk, self.trace, group, decision):
            return False
        self._update_fetcher(decision, committed)
        self.trace.record("assigned", member=self.consumer_id,
                          partitions=[[t, p] for t, p in decision], view=view.cversion)
        return True

    def _update_fetcher(self, decision: dict[Key, str], committed: dict[Key, int | None]) -> None:
        """The share becomes the registry; the leader finder reads the brokers; a fetcher per partition starts."""
        brokers = read_brokers(self.zk, self.watches) if decision else {}
        with self._lock:
            for key, thread_id in decision.items():
                position = rules.start_position(committed[key], self.config.auto_offset_reset,
                                                lambda key=key: self._log_end(key, brokers))
                self._checkpointed[key] = position
                info = PartitionTopicInfo(key[0], key[1], thread_id, consumed=position)
                fetcher = PartitionFetcher(info, self._streams[thread_id], brokers, finder=self._leader_finder,
                                           max_records=self.config.fetch_max_records,
                                           max_wait_ms=self.config.fetch_wait_max_ms)
                self._registry[key] = info
                self._fetchers[key] = fetcher.start()

    def _log_end(self, key: Key, brokers: dict[int, tuple[str, int]]) -> int | None:
        """Where the leader's log of `key` ends now (`auto.offset.reset` largest); None if it cannot be asked."""
        leader = find_leader(brokers, *key)
        if leader is None:
            return None
        client = WireClient(*leader, timeout_s=5)
        try:
            return client.call("ListOffsets", topic=key[0], partition=key[1], which="latest")["offset"]
        except (ConnectionError, WireError):
            return None
        finally:
            client.close()

    def _stop_fetchers(self) -> None:
        with self._lock:
            stopping, self._fetchers = sorted(self._fetchers.items()), {}
        # 0.8 stops its few fetcher threads (one per broker), each after its current request. The lab has one
        # thread per partition: stopped one after another, each waiting out its fetch (up to fetch.wait.max.ms),
        # a consumer of 16 partitions took ~1 s to let go, and its peers' claims ran into owner conflicts that
        # Kafka 0.8.2.2's own consumer does not have (measured beside it: `real_systems/kafka08`). So all are
        # told first, then waited for: stopping takes about one request's time, as in 0.8.
        for _, fetcher in stopping:
            fetcher.request_stop()
        for _, fetcher in stopping:
            fetcher.stop()
        for stream in self._streams.values():
            stream.clear()  # clearFetcherQueues: what was fetched and not handed out goes
        if stopping:
            self.trace.record("fetchers_stopped", member=self.consumer_id,
                              partitions=[[t, p] for (t, p), _ in stopping])

    def _close_fetchers(self) -> None:
        """0.8's `closeFetchersForQueues`: stop every fetcher, then commit the registry (if auto-commit)."""
        self._stop_fetchers()
        if self.config.auto_commit_enable:
            self._commit_offsets("rebalance")

    # -- offsets -----------------------------------------------------------------------
    def _commit_offsets(self, why: str) -> None:
        """0.8's `commitOffsets`: a snapshot of the registry's positions, then one write per position that moved
        since the last one written (each waits for a connection, as all 0.8's writes do).

        Snapshot and writes are one step under `offsetsChannelLock`, as in 0.8.2.2 (whose `commitOffsets` reads
        `topicRegistry` inside the lock): an auto-commit and a rebalance's commit never interleave, and the later
        one writes the later positions. With the snapshot outside the lock (as the lab had it), an auto-commit's
        older positions could land after a rebalance's commit, and the partitions' next owners fetched again what
        was already processed."""
        with self._commit_lock:
            with self._lock:
                snapshot = {key: (info.consumed, info.thread_id) for key, info in self._registry.items()}
            for key, position, thread_id in rules.commit_offsets_due(snapshot, self._checkpointed):
                commit_offset(self.zk, self.trace, self.config.group_id, key[0], key[1], position, thread_id,
                              why=why)
                self._checkpointed[key] = position

    def _auto_commit_loop(self) -> None:
        """0.8's auto-commit, `scheduleAtFixedRate`: a tick every interval from the start; ticks that fell due
        while the process was paused run at once, one after another."""
        if not self.config.auto_commit_enable:
            return
        interval = self.config.auto_commit_interval_ms / 1000
        start, ticks_run = time.monotonic(), 0
        while not self._shutting_down.wait(rules.auto_commit_wait(start, interval, ticks_run, time.monotonic())):
            try:
                self._commit_offsets("auto-commit")
            except Stopping:
                return
            except KazooException as exc:  # 0.8: error("exception during autoCommit"), and the next tick
                self.trace.record("commit_error", member=self.consumer_id, error=type(exc).__name__)
            ticks_run += 1

    def _set_state(self, state: ConsumerState) -> None:
        if state is not self.state:
            self.state = state
            self.trace.record("consumer_state", member=self.consumer_id, state=state.value)
            self.on_change(self)
