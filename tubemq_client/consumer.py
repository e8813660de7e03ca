"""A TubeMQ client-balance consumer and the application that balances it, after Apache InLong TubeMQ.

Two pieces, as in TubeMQ:

- `ClientBalanceConsumer`: the SDK (`SimpleClientBalanceConsumer`). `start`
  refuses a `nodeId` outside ``[0, sourceCount)`` (BAD_REQUEST), registers
  with the master (up to 5 tries, 1 s apart, whatever the refusal, as
  `startMasterAndBrokerThreads`; if all fail, e.g. CLIENT_DUPLICATE_INDEXID,
  the start fails with the last code), then heartbeats the master and,
  on a thread of its own, every broker that holds one of its partitions,
  every `heartbeatPeriodMs` (13 s). It knows no other member. Its calls:
  `get_partition_meta_info` (from the master at most every
  `partMetaInfoCheckPeriodMs`, else cached; None when the master did not
  answer; a master heartbeat's answer that brings metadata, which the master
  adds once the SDK has stored none for `maxMetaForceUpdatePeriodMs`, is
  stored too and counts as a query), `connect_to_partition(key,
  bootstrap_offset)` (register at the partition's broker; 2 attempts 1 s
  apart; after PARTITION_OCCUPIED another try within 5 s is refused locally,
  CLIENT_HIGH_FREQUENCY_REQUEST), `disconnect_from_partition`, `get_message`,
  `confirm_consume`, `shutdown`. A broker that refuses a heartbeat, a fetch
  or a confirm for a partition makes the SDK drop that partition locally.
- `BalancingNode`: the application of TubeMQ's `ClientBalanceConsumerExample`,
  the lab's group member. Every `partMetaInfoCheckPeriodMs` it takes the
  partitions (a round whose query failed is skipped: nothing is balanced
  from the cache) whose key hashes to its `nodeId` modulo `sourceCount`
  (`lab_cluster/assignment/tubemq.py`), disconnects the others, and connects
  the new ones with the offset it last consumed there, or -1 (the broker's);
  a consume loop fetches, processes and confirms.

A topic's growth. The master re-reads the group's metadata only in its
balance pass (`tubemq_client/master/groups.py`), so a new partition reaches the
node at its first metadata query (or master heartbeat that brings metadata)
after that pass; the node's next round connects the ones that hash to it, as
it connects any partition of its share it does not hold. When the SDK stores
metadata (`RmtDataCache.storeTopicMetaInfo`: a new `topicMetaInfoId`) in which
a topic has more partitions than in the metadata it held, it records
`partitions_seen` (`member`, `via`: `query` or `heartbeat`); its first
metadata is not a growth, and records nothing.

The node's state: CREATED --start()--> STARTED --stop()--> SHUTDOWN, or
START_FAILED when the master refused it (it gives up: the runner need not
wait). (Lab names: TubeMQ's SDK keeps only started/shutdown flags.) Its
`assigned` events carry `view`: `sourceCount=<n>`, the only thing its share
depends on; two nodes with different sourceCounts compute from different views.

Departures, stated: the master is the first of `masterHostAndPort` that
answers (every lab broker hosts one); the consumer id keeps TubeMQ's shape
with the node's actor name in place of the process id; a fetch does not wait
for records; the SDK's 3 s wait for an in-flight batch on disconnect is the
consume loop's own (one thread fetches and confirms); the partition map is
taken from every query's answer, whose keys carry each partition's leader now
(`master/service.py`), where TubeMQ keeps its map until the `topicMetaInfoId`
changes; `partMetaInfoCheckPeriodMs` may be set below TubeMQ's floor of 5 s
(`CFG_MIN_META_QUERY_WAIT_PERIOD_MS`), for tests.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable

from lab_cluster.assignment.tubemq import modulo
from lab_cluster.clock import monotonic_ms, wall_clock_ms
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import WireClient, WireError

from .codes import (
    BAD_REQUEST,
    CLIENT_HIGH_FREQUENCY_REQUEST,
    DUPLICATE_PARTITION,
    HB_NO_NODE,
    NAMES,
    NOT_FOUND,
    PARTITION_OCCUPIED,
    PARTITION_UNSUBSCRIBABLE,
    SUCCESS,
    UNAUTHORIZED,
)
from .config import ConsumerConfig
from .master.groups import UNDEFINED

#: `TClientConstants`: master registration tries and the wait between them; a connect's tries and wait; the
#: wait after PARTITION_OCCUPIED before the same key may be tried again
MAX_REGISTER_RETRY_TIMES, REG_FAIL_WAIT_PERIOD_S = 5, 1.0
CONNECT_ATTEMPTS, CONNECT_FAIL_WAIT_S = 2, 1.0
MIN_META_QUERY_WAIT_PERIOD_MS = 5_000
#: codes of a broker's answer that make the SDK drop the partition locally (`getMessage`, heartbeat)
DROPS_PARTITION = (HB_NO_NODE, DUPLICATE_PARTITION, UNAUTHORIZED)
IDLE_PAUSE_S = 0.05


class StartRefused(Exception):
    """The master refused the registration (its code says why)."""

    def __init__(self, code: int):
        super().__init__(f"the master refused the registration: {NAMES.get(code, code)}")
        self.code = code


def key_parts(key: str) -> tuple[int, str, int]:
    """`brokerId:topic:partitionId` -> (broker id, topic, partition)."""
    broker, topic, partition = key.split(":")
    return int(broker), topic, int(partition)


class ClientBalanceConsumer:
    def __init__(self, config: ConsumerConfig, trace: TraceRecorder, name: str,
                 on_lost: Callable[[list[str], str], None] | None = None):
        self.config, self.trace = config, trace
        self.group = config.consumer_group
        # `SimpleClientBalanceConsumer.generateConsumerID`: group_ip-pid-nanotime-random-Balance-version
        self.consumer_id = (f"{self.group}_127.0.0.1-{name}-{time.monotonic_ns()}-{random.randrange(10**6)}"
                            f"-Balance-lab{os.getpid()}")
        self.on_lost = on_lost or (lambda keys, why: None)
        self.topics: list[str] = []
        self.registered: dict[str, int] = {}  # partition key -> the offset the broker said it starts at
        self._meta: dict[str, bool] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._last_meta_ms: int | None = None  # `lstMetaQueryTime` (monotonic)
        self._topic_meta: dict[str, int] = {}  # topic -> partitions, as the stored metadata says
        self._topic_meta_id = UNDEFINED  # `topicMetaInfoId` of the stored metadata
        self._meta_stored_ms: int | None = None  # `topicMetaUpdatedTime` (wall clock): the `lstAssignedTime` sent
        self._occupied_at: dict[str, int] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._master: WireClient | None = None
        self._clients: dict[int, WireClient] = {}
        self._next = 0  # round robin over the registered partitions

    # -- the master ----------------------------------------------------------------------------
    def _call_master(self, api: str, **body) -> dict:
        """One request to the first master that answers (the one that answered last, first)."""
        if self._master is not None:
            try:
                return self._master.call(api, group=self.group, **body)
            except (ConnectionError, WireError):
                self._master.close()
                self._master = None
        for address in self.config.masters:
            host, port = self.config.via.get(address, address)
            client = WireClient(host, port, client_id=self.consumer_id, timeout_s=self.config.rpc_timeout_ms / 1000)
            try:
                answer = client.call(api, group=self.group, **body)
            except (ConnectionError, WireError):
                client.close()
                continue
            self._master = client
            return answer
        raise ConnectionError("no master of masterHostAndPort answers")

    def _register_to_master(self) -> int:
        answer = self._call_master("consumerRegisterC2MV2", client_id=self.consumer_id, topics=self.topics,
                                   source_count=self.config.source_count, node_id=self.config.node_id)
        return int(answer["code"])

    def start(self, topics: list[str]) -> None:
        """`start(topics, sourceCount, nodeId)`: register with the master (5 tries), then the heartbeats."""
        self.topics = sorted(topics)
        if not 0 <= self.config.node_id < self.config.source_count:  # checked before contacting anyone
            raise StartRefused(BAD_REQUEST)
        self._register_with_retries()
        threading.Thread(target=self._master_heartbeats, name="tubemq-master-hb", daemon=True).start()
        threading.Thread(target=self._broker_heartbeats, name="tubemq-broker-hb", daemon=True).start()

    def _register_with_retries(self) -> None:
        """`startMasterAndBrokerThreads`' loop: up to 5 registrations 1 s apart, whatever the refusal; raises
        StartRefused with the last code if none succeeds."""
        code = None
        for attempt in range(1, MAX_REGISTER_RETRY_TIMES + 1):
            try:
                code = self._register_to_master()
            except ConnectionError:
                code = None
            self.trace.record("tubemq_master_register", member=self.consumer_id, attempt=attempt,
                              code=NAMES.get(code, str(code)))
            if code == SUCCESS:
                break
            if attempt < MAX_REGISTER_RETRY_TIMES and self._stop.wait(REG_FAIL_WAIT_PERIOD_S):
                break
        if code != SUCCESS:
            raise StartRefused(code if code is not None else 503)

    def _master_heartbeats(self) -> None:
        """`scheduleWithFixedDelay(0, heartbeatPeriodMs)`; HB_NO_NODE: the master forgot it, register again."""
        while not self._stop.is_set():
            try:
                sync = {"topic_meta_info_id": self._topic_meta_id}
                if self._meta_stored_ms is not None:
                    sync["lst_assigned_time"] = self._meta_stored_ms
                answer = self._call_master("consumerHeartbeatC2MV2", client_id=self.consumer_id,
                                           reported=sorted(self.registered), **sync)
                code = int(answer["code"])
                if code == HB_NO_NODE:
                    self._register_to_master()
                elif code == SUCCESS and "topic_meta_info_id" in answer:
                    self._take_meta(answer, via="heartbeat")
                    self._last_meta_ms = monotonic_ms()
            except ConnectionError:
                pass  # the next period tries again
            if self._stop.wait(self.config.heartbeat_period_ms / 1000):
                return

    def get_partition_meta_info(self) -> dict[str, bool] | None:
        """{key: subscribable}: from the master at most every `partMetaInfoCheckPeriodMs`, else the cached
        map; a registered partition no longer subscribable is disconnected (`clearUnSubscribablePartitions`).
        None if the master was due to be asked and did not answer (`getPartitionMetaInfo` returns false)."""
        now = monotonic_ms()
        if self._last_meta_ms is None or now - self._last_meta_ms >= self.config.part_meta_info_check_period_ms:
            try:
                answer = self._call_master("consumerGetPartMetaInfoC2M", client_id=self.consumer_id,
                                           topics=self.topics, topic_meta_info_id=self._topic_meta_id)
                self._take_meta(answer, via="query")
                self._last_meta_ms = now
            except ConnectionError as exc:
                self.trace.record("tubemq_meta_failed", member=self.consumer_id, error=str(exc))
                return None
        with self._lock:
            meta = dict(self._meta)
        for key in [k for k in self.registered if not meta.get(k)]:
            self.disconnect_from_partition(key)
        return meta

    def _take_meta(self, answer: dict, via: str) -> None:
        """Keep the partition map and brokers an answer carries; store its topic metadata if its id is new
        (`storeTopicMetaInfo`), recording `partitions_seen` for each topic with more partitions than before."""
        counts = {str(t): int(n) for t, n in (answer.get("topic_meta") or {}).items()}
        meta_id = int(answer.get("topic_meta_info_id", UNDEFINED))
        with self._lock:
            if "partitions" in answer:
                self._meta = {str(k): bool(v) for k, v in answer["partitions"].items()}
            if "brokers" in answer:
                self._brokers = {int(i): (h, int(p)) for i, (h, p) in answer["brokers"].items()}
            if meta_id < 0 or meta_id == self._topic_meta_id or not counts:
                return
            grown = [(t, n, self._topic_meta[t]) for t, n in sorted(counts.items())
                     if t in self._topic_meta and n > self._topic_meta[t]]
            self._topic_meta, self._topic_meta_id, self._meta_stored_ms = counts, meta_id, wall_clock_ms()
        for topic, partitions, before in grown:
            self.trace.record("partitions_seen", member=self.consumer_id, topic=topic, partitions=partitions,
                              before=before, via=via)

    # -- the brokers ---------------------------------------------------------------------------
    def _broker(self, broker_id: int) -> WireClient:
        with self._lock:
            if broker_id not in self._clients:
                host, port = self.config.via.get(self._brokers[broker_id], self._brokers[broker_id])
                self._clients[broker_id] = WireClient(host, port, client_id=self.consumer_id,
                                                      timeout_s=self.config.rpc_timeout_ms / 1000)
            return self._clients[broker_id]

    def _call_broker(self, key: str, api: str, **body) -> dict:
        broker_id, topic, partition = key_parts(key)
        try:
            return self._broker(broker_id).call(api, client_id=self.consumer_id, group=self.group, topic=topic,
                                                partition_id=partition, **body)
        except KeyError:
            raise ConnectionError(f"broker {broker_id} is not in the partition metadata") from None

    def connect_to_partition(self, key: str, bootstrap_offset: int) -> int:
        """`connect2Partition`: register at the partition's broker; the code of the last attempt."""
        with self._lock:
            if key in self.registered:
                return SUCCESS
            if key not in self._meta:
                return NOT_FOUND
            if not self._meta[key]:
                return PARTITION_UNSUBSCRIBABLE
            if monotonic_ms() - self._occupied_at.get(key, -MIN_META_QUERY_WAIT_PERIOD_MS) \
                    < MIN_META_QUERY_WAIT_PERIOD_MS:
                return CLIENT_HIGH_FREQUENCY_REQUEST
        code = NOT_FOUND
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            body = {"op_type": "REGISTER", "read_status": self.config.read_status}
            if bootstrap_offset >= 0:
                body["curr_offset"] = bootstrap_offset
            try:
                answer = self._call_broker(key, "consumerRegisterC2B", **body)
                code = int(answer["code"])
            except (ConnectionError, WireError):
                code = NOT_FOUND
            self.trace.record("tubemq_connect", member=self.consumer_id, key=key, attempt=attempt,
                              code=NAMES.get(code, str(code)))
            if code == SUCCESS:
                with self._lock:
                    self.registered[key] = int(answer["curr_offset"])
                return code
            if code == PARTITION_OCCUPIED:
                with self._lock:
                    self._occupied_at[key] = monotonic_ms()
            if attempt < CONNECT_ATTEMPTS and self._stop.wait(CONNECT_FAIL_WAIT_S):
                break
        return code

    def disconnect_from_partition(self, key: str, consumed: bool = True) -> int:
        """`disconnectFromPartition`: forget it, and UNREGISTER at its broker (the answer is not checked)."""
        with self._lock:
            if self.registered.pop(key, None) is None:
                return NOT_FOUND
        try:
            self._call_broker(key, "consumerRegisterC2B", op_type="UNREGISTER", read_status=0 if consumed else 1)
        except (ConnectionError, WireError):
            pass
        return SUCCESS

    def _drop(self, keys: list[str], why: str) -> None:
        """The SDK lets go of partitions a broker refused (or could not be reached for), without telling it."""
        with self._lock:
            gone = [k for k in keys if self.registered.pop(k, None) is not None]
        if gone:
            self.on_lost(gone, why)

    def _broker_heartbeats(self) -> None:
        """Every `heartbeatPeriodMs`: each broker holding a registered partition; refusals drop partitions."""
        while not self._stop.wait(self.config.heartbeat_period_ms / 1000):
            with self._lock:
                by_broker: dict[int, list[str]] = {}
                for key in self.registered:
                    by_broker.setdefault(key_parts(key)[0], []).append(key)
            for broker_id, keys in sorted(by_broker.items()):
                try:
                    answer = self._broker(broker_id).call(
                        "consumerHeartbeatC2B", client_id=self.consumer_id, group=self.group,
                        partitions=[list(key_parts(k)[1:]) for k in keys])
                except (ConnectionError, WireError, KeyError):
                    self._drop(keys, "broker heartbeat failed")
                    continue
                refused = [f"{broker_id}:{t}:{p}" for _, t, p in answer.get("failure_info", [])]
                self._drop(refused, "broker heartbeat refused")

    def get_message(self) -> tuple[str, list[dict]] | None:
        """`getMessage`: a batch from the next registered partition (round robin), or None if none has any."""
        with self._lock:
            keys = sorted(self.registered)
        for i in range(len(keys)):
            key = keys[(self._next + i) % len(keys)]
            try:
                answer = self._call_broker(key, "getMessagesC2B", last_pack_consumed=False, max_records=32)
            except (ConnectionError, WireError):
                continue
            code = int(answer["code"])
            if code in DROPS_PARTITION:
                self._drop([key], f"fetch refused: {NAMES.get(code, code)}")
                continue
            if code == SUCCESS and answer["records"]:
                self._next = (self._next + i + 1) % max(len(keys), 1)
                return key, answer["records"]
        return None

    def confirm_consume(self, key: str, consumed: bool) -> int:
        """`confirmConsume`: the broker commits (or rolls back) the batch it handed out; no offset is sent."""
        try:
            code = int(self._call_broker(key, "consumerCommitC2B", last_pack_consumed=consumed)["code"])
        except (ConnectionError, WireError):
            return NOT_FOUND
        if code in DROPS_PARTITION:
            self._drop([key], f"confirm refused: {NAMES.get(code, code)}")
        return code

    def shutdown(self) -> None:
        """`shutdown`: UNREGISTER every partition at its broker, stop the heartbeats, tell the master."""
        self._stop.set()
        for key in sorted(self.registered):
            self.disconnect_from_partition(key)
        try:
            self._call_master("consumerCloseClientC2M", client_id=self.consumer_id)
        except ConnectionError:
            pass
        for client in [*self._clients.values(), *([self._master] if self._master else [])]:
            client.close()


class BalancingNode:
    """TubeMQ's `ClientBalanceConsumerExample` as a lab group member (`lab_cluster.family.GroupMember`).

    The server-balance node (`tubemq_client/server_balance/`) is this node with another SDK and without the
    balancing loop: `_sdk()` and `_loops()` are what it changes."""

    def __init__(self, config, topics: list[str], trace: TraceRecorder, *, name: str = "c",
                 on_change: Callable[[BalancingNode], None] | None = None):
        self.config, self.topics, self.trace, self.name, self.on_change = config, sorted(topics), trace, name, on_change
        self.batch_lock = threading.Lock()  # held while a fetched batch is processed and confirmed
        self.sdk = self._sdk()
        self.state = "CREATED"
        self.view = f"sourceCount={getattr(config, 'source_count', '')}"
        self.last_offsets: dict[str, int] = {}  # the example's in-memory map: the next offset per key
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=t, name=f"{n}-{name}", daemon=True) for n, t in self._loops()]

    def _sdk(self) -> ClientBalanceConsumer:
        return ClientBalanceConsumer(self.config, self.trace, self.name, on_lost=self._lost)

    def _loops(self) -> list[tuple[str, Callable[[], None]]]:
        return [("balance", self._balance_loop), ("consume", self._consume_loop)]

    @property
    def ident(self) -> str:
        return self.sdk.consumer_id

    def start(self) -> BalancingNode:
        self.trace.record("consumer_start", member=self.ident, config=self.config.as_record(), topics=self.topics)
        try:
            self.sdk.start(self.topics)
        except StartRefused as exc:
            self.trace.record("consumer_failed", member=self.ident, reason=str(exc))
            self._set_state("START_FAILED")
            return self
        self._set_state("STARTED")
        for thread in self._threads:
            thread.start()
        return self

    def snapshot(self) -> MemberSnapshot:
        return MemberSnapshot(self.state, gave_up=self.state == "START_FAILED", partitions=self.partitions())

    def partitions(self) -> list[int]:
        return sorted(key_parts(k)[2] for k in list(self.sdk.registered))

    def stop(self) -> None:
        if self.state != "STARTED":
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        held = sorted(self.sdk.registered)
        self.sdk.shutdown()
        self.trace.record("revoked", member=self.ident, partitions=[list(key_parts(k)[1:]) for k in held])
        self._set_state("SHUTDOWN")
        self.trace.record("consumer_stop", member=self.ident)

    def _set_state(self, state: str) -> None:
        self.state = state
        self.trace.record("consumer_state", member=self.ident, state=state)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _lost(self, keys: list[str], why: str) -> None:
        self.trace.record("revoked", member=self.ident, partitions=[list(key_parts(k)[1:]) for k in keys], why=why)
        self._assigned()

    def _assigned(self) -> None:
        held = sorted(self.sdk.registered)
        self.trace.record("assigned", member=self.ident, partitions=[list(key_parts(k)[1:]) for k in held],
                          view=self.view)
        self._changed()

    def _balance_loop(self) -> None:
        while not self._stop.is_set():
            self.balance_once()
            if self._stop.wait(self.config.part_meta_info_check_period_ms / 1000):
                return

    def balance_once(self) -> None:
        """One round of the example: disconnect what is not ours (or not subscribable), connect what is; nothing
        if the master could not be queried (the example's `if (!consumer.getPartitionMetaInfo(qryResult))`)."""
        meta = self.sdk.get_partition_meta_info()
        if meta is None:
            return
        self.trace.record("rebalance_begin", member=self.ident)
        mine = set(modulo([k for k, ok in meta.items() if ok], self.config.source_count, self.config.node_id))
        changed = False
        for key in sorted(set(self.sdk.registered) - mine):
            self.sdk.disconnect_from_partition(key)
            self.trace.record("revoked", member=self.ident, partitions=[list(key_parts(key)[1:])])
            changed = True
        refused = {}
        for key in sorted(mine - set(self.sdk.registered)):
            code = self.sdk.connect_to_partition(key, self.last_offsets.get(key, -1))
            if code == SUCCESS:
                changed = True
            else:
                refused[key] = NAMES.get(code, str(code))
        if changed:
            self._assigned()
        self.trace.record("rebalance_end", member=self.ident, outcome="ok" if not refused else "refused",
                          refused=refused)
        self._changed()

    def _consume_loop(self) -> None:
        while not self._stop.is_set():
            got = self.sdk.get_message()
            if got is None:
                self._stop.wait(IDLE_PAUSE_S)
                continue
            with self.batch_lock:
                self._process(*got)

    def _process(self, key: str, records: list[dict]) -> None:
        """The application's work on one batch, then `confirmConsume`."""
        _, topic, partition = key_parts(key)
        for record in records:
            if self.config.lab_processing_ms:
                time.sleep(self.config.lab_processing_ms / 1000)
            self.trace.record("processed", topic=topic, partition=partition, offset=record["offset"],
                              member=self.ident)
        code = self.sdk.confirm_consume(key, consumed=True)
        self.trace.record("commit", member=self.ident, topic=topic, partition=partition,
                          offset=records[-1]["offset"] + 1, why="confirm",
                          outcome={SUCCESS: "accepted", UNAUTHORIZED: "fenced"}.get(code, "failed"),
                          error=NAMES.get(code, str(code)))
        if code == SUCCESS:
            self.last_offsets[key] = records[-1]["offset"] + 1
