"""The ZooKeeper-era consumer: Kafka 0.8's `ZookeeperConsumerConnector`, one per group member.

States and transitions::

    STARTING    --start(): session, registration, first rebalance requested--> REBALANCING
    REBALANCING --an attempt claimed its whole share-----------------------> CONSUMING
    CONSUMING   --a watch fired, or a new session after expiry--------------> REBALANCING
    REBALANCING --rebalance.max.retries attempts failed--------------------> FAILED
    FAILED      --a later watch event: a new syncedRebalance----------------> REBALANCING
    any         --stop(): release, commit, deregister, close session--------> STOPPED

FAILED is 0.8's `ConsumerRebalanceFailedException`: the consumer owns and
fetches nothing but stays registered, so the others' range split still counts
it and its share stays unconsumed. (0.8's watcher thread logged the exception
and went on waiting for events, which is why a later change can revive it.)

One rebalance attempt (`_attempt`), as DESIGN.md §2 orders it:

1. stop fetching and commit the positions (`revoked`);
2. delete its owner znodes;
3. read brokers, partitions and consumers, re-arming the watches (`view`);
4. compute its share with the range split over sorted thread ids;
5. claim each partition with an ephemeral owner znode; on a conflict undo,
   back off `rebalance.backoff.ms`, and try again;
6. start a fetcher per claimed partition at its committed offset (`assigned`).

Session handling, stated: SUSPENDED (connection lost, session maybe alive)
changes nothing, and the fetchers keep fetching; that is how a partitioned
consumer goes on processing partitions that the rest of the group has given to
someone else. LOST (the session expired) is learnt only on reconnecting; the
consumer then re-registers and rebalances, as 0.8's `handleNewSession` did.

Usage::

    config = ConsumerConfig.from_dict({"group.id": "g", "zookeeper.connect": zk})
    consumer = LegacyConsumer(config, ["t"], trace).start()
    consumer.assignment()      # {("t", 0): "g_host-1763600000000-1a2b3c4d-0", ...}
    consumer.stop()
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from lab_cluster.broker.client import find_leader
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import WireClient, WireError

from .config import ConsumerConfig
from .fetching import PartitionFetcher
from .offsets import commit_offset, fetch_offset
from .ownership import claim_all, release_all
from .rebalance import compute_share, read_view
from .registration import deregister, register, thread_ids
from .watches import GroupWatches
from .zkclient import TracedZk


class ConsumerState(enum.Enum):
    STARTING = "starting"
    REBALANCING = "rebalancing"
    CONSUMING = "consuming"
    FAILED = "failed"
    STOPPED = "stopped"


class LegacyConsumer:
    def __init__(self, config: ConsumerConfig, topics: list[str], trace: TraceRecorder, *,
                 on_change: Callable[[LegacyConsumer], None] | None = None):
        self.config = config
        self.topics = sorted(topics)
        self.trace = trace
        self.consumer_id = config.consumer_id
        self.threads = thread_ids(self.consumer_id, config.streams)
        self.state = ConsumerState.STARTING
        self.on_change = on_change or (lambda consumer: None)
        self.rebalances = 0
        self._lock = threading.RLock()
        self._fetchers: dict[tuple[str, int], PartitionFetcher] = {}
        self._owned: dict[tuple[str, int], str] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self._rebalance_needed = threading.Event()
        self._stopping = threading.Event()
        self._session_lost = False
        self._new_session = False
        self._watches = GroupWatches(trace, self._rebalance_needed.set)
        self._watch_brokers = config.watch_broker_ids == "always"
        session_s = config.zookeeper_session_timeout_ms / 1000
        self.kazoo = KazooClient(hosts=config.zookeeper_connect, timeout=session_s)
        self.zk = TracedZk(self.kazoo, trace, timeout_s=session_s)
        self._threads: list[threading.Thread] = []

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> LegacyConsumer:
        self.trace.record("consumer_start", member=self.consumer_id, config=self.config.as_record(),
                          topics=self.topics)
        self.kazoo.add_listener(self._on_session_state)
        self.kazoo.start(timeout=self.config.zookeeper_connection_timeout_ms / 1000)
        register(self.zk, self.config.group_id, self.consumer_id, {t: self.config.streams for t in self.topics})
        self._rebalance_needed.set()
        for target, name in ((self._rebalance_loop, "rebalance"), (self._auto_commit_loop, "autocommit")):
            t = threading.Thread(target=target, name=f"{name}-{self.consumer_id[-8:]}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Leave gracefully: stop fetching, commit, release owners, deregister, close the session."""
        if self.state is ConsumerState.STOPPED:
            return
        self._stopping.set()
        self._rebalance_needed.set()
        for t in self._threads:
            t.join(self.config.zookeeper_session_timeout_ms / 1000 + self.config.rebalance_backoff_ms / 1000 + 5)
        with self._lock:
            try:
                self._revoke_all()
                deregister(self.zk, self.config.group_id, self.consumer_id)
            except (KazooException, KazooTimeoutError) as exc:
                self.trace.record("stop_incomplete", member=self.consumer_id, error=type(exc).__name__)
        self.kazoo.stop()
        self.kazoo.close()
        self._set_state(ConsumerState.STOPPED)
        self.trace.record("consumer_stop", member=self.consumer_id)

    def assignment(self) -> dict[tuple[str, int], str]:
        """What this consumer believes it owns: {(topic, partition): thread id}."""
        with self._lock:
            return dict(self._owned)

    def fetching(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._fetchers)

    # -- session ---------------------------------------------------------------------
    def _on_session_state(self, state) -> None:
        # kazoo calls this from its connection thread: record and raise flags only.
        self.trace.record("zk_session", member=self.consumer_id, zk_state=state)
        if state == KazooState.LOST:
            self._session_lost = True
            self.trace.record("session_expired", member=self.consumer_id)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._new_session = True
            self._rebalance_needed.set()

    def _handle_new_session(self) -> None:
        """0.8's `handleNewSession`: the old registration and watches died with the old session."""
        self._new_session = False
        register(self.zk, self.config.group_id, self.consumer_id, {t: self.config.streams for t in self.topics})
        self.trace.record("session_reestablished", member=self.consumer_id)

    # -- rebalancing -----------------------------------------------------------------
    def _rebalance_loop(self) -> None:
        while not self._stopping.is_set():
            if not self._rebalance_needed.wait(0.2):
                continue
            if self._stopping.is_set():
                return
            self._rebalance_needed.clear()  # events from now on ask for another round
            try:
                if self._new_session:
                    self._handle_new_session()
                self._synced_rebalance()
            except (KazooException, KazooTimeoutError) as exc:
                # ZooKeeper unreachable: try again when something changes (or now, if asked).
                self.trace.record("rebalance_error", member=self.consumer_id, error=type(exc).__name__)
                self._stopping.wait(self.config.rebalance_backoff_ms / 1000)
                self._rebalance_needed.set()

    def _synced_rebalance(self) -> None:
        self.rebalances += 1
        for attempt in range(1, self.config.rebalance_max_retries + 1):
            if self._stopping.is_set():
                return
            self._set_state(ConsumerState.REBALANCING)
            self.trace.record("rebalance_begin", member=self.consumer_id, attempt=attempt)
            try:
                ok = self._attempt()
                outcome = "ok" if ok else "conflict"
            except (KazooException, KazooTimeoutError) as exc:
                ok, outcome = False, f"error:{type(exc).__name__}"
            self.trace.record("rebalance_end", member=self.consumer_id, attempt=attempt, outcome=outcome)
            if ok:
                self._set_state(ConsumerState.CONSUMING)
                return
            with self._lock:  # undo whatever the failed attempt got to (fetchers, claims)
                try:
                    self._revoke_all()
                except (KazooException, KazooTimeoutError):
                    pass
            self._stopping.wait(self.config.rebalance_backoff_ms / 1000)
        self.trace.record("rebalance_failed", member=self.consumer_id, attempts=self.config.rebalance_max_retries)
        self._set_state(ConsumerState.FAILED)

    def _attempt(self) -> bool:
        group = self.config.group_id
        with self._lock:
            self._revoke_all()                                                 # 1, 2
        view = read_view(self.zk, self.trace, group, self.topics, self._watches.fired,
                         watch_brokers=self._watch_brokers)                   # 3
        if not view.brokers:
            if self.config.watch_broker_ids == "when_empty":
                self.zk.get_children("/brokers/ids", watch=self._watches.fired)
            self.trace.record("assigned", member=self.consumer_id, partitions=[], reason="no brokers")
            return True
        decision = compute_share(view, self.threads)                          # 4
        if not claim_all(self.zk, self.trace, group, decision):               # 5
            return False
        with self._lock:                                                       # 6
            self._owned = decision
            for (topic, partition), thread_id in decision.items():
                position = self._start_position(topic, partition, view.brokers)
                self._committed[(topic, partition)] = position
                self._fetchers[(topic, partition)] = PartitionFetcher(
                    topic, partition, position, thread_id, self.trace, view.brokers,
                    max_records=self.config.fetch_max_records, max_wait_ms=self.config.fetch_wait_max_ms,
                    processing_ms=self.config.lab_processing_ms).start()
        self.trace.record("assigned", member=self.consumer_id,
                          partitions=[[t, p] for t, p in decision], cversion=view.cversion)
        return True

    def _start_position(self, topic: str, partition: int, brokers: dict[int, tuple[str, int]]) -> int:
        committed = fetch_offset(self.zk, self.config.group_id, topic, partition)
        if committed is not None:
            return committed
        if self.config.auto_offset_reset == "smallest":
            return 0
        leader = find_leader(brokers, topic, partition)  # largest: where the leader's log ends now
        if leader is not None:
            client = WireClient(*leader, timeout_s=5)
            try:
                return client.call("ListOffsets", topic=topic, partition=partition, which="latest")["offset"]
            except (ConnectionError, WireError):
                pass
            finally:
                client.close()
        return 0

    def _revoke_all(self) -> None:
        """Stop every fetcher, commit its position, delete our owner znodes (lock held).

        The start of every attempt, the undoing of a failed one, and a graceful stop.
        Owners are forgotten even if ZooKeeper refuses the deletes: an unreachable
        ZooKeeper removes them with the session.
        """
        if self._fetchers:
            revoked = sorted(self._fetchers)
            for key, fetcher in list(self._fetchers.items()):
                self._commit_if_moved(key, fetcher.stop(), fetcher.thread_id)
            self._fetchers.clear()
            self.trace.record("revoked", member=self.consumer_id, partitions=[[t, p] for t, p in revoked])
        owned, self._owned = set(self._owned), {}
        release_all(self.zk, self.config.group_id, owned)

    def _commit_if_moved(self, key: tuple[str, int], position: int, thread_id: str) -> None:
        if self._committed.get(key) != position:
            commit_offset(self.zk, self.trace, self.config.group_id, key[0], key[1], position, thread_id)
            self._committed[key] = position

    # -- offsets -----------------------------------------------------------------------
    def _auto_commit_loop(self) -> None:
        if not self.config.auto_commit_enable:
            return
        while not self._stopping.wait(self.config.auto_commit_interval_ms / 1000):
            with self._lock:
                positions = {k: f.position for k, f in self._fetchers.items()}
                fetchers = dict(self._fetchers)
            for key, position in positions.items():
                try:
                    self._commit_if_moved(key, position, fetchers[key].thread_id)
                except (KazooException, KazooTimeoutError):
                    break  # ZooKeeper unreachable: try at the next interval

    def _set_state(self, state: ConsumerState) -> None:
        if state is not self.state:
            self.state = state
            self.trace.record("consumer_state", member=self.consumer_id, state=state.value)
            self.on_change(self)
