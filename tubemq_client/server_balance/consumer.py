"""A TubeMQ server-balance consumer: the master decides, the consumer does what its heartbeats bring back.

After InLong TubeMQ's `tubemq-client/.../consumer/BaseMessageConsumer.java`
and `RmtDataCache.java` as they were before 0.12's client balance (citations:
`docs/source-brief-tubemq-server-balance.md`). Two pieces, as in
`tubemq_client/consumer.py`:

- `ServerBalanceConsumer`, the SDK: `start` registers with the master
  (`consumerRegisterC2M`, up to 5 tries 1 s apart), then heartbeats it every
  `heartbeatPeriodMs` (13 s, the first at once), each heartbeat carrying what
  it holds and the event it finished since the last one; the answer may carry
  its next event, which one rebalance thread does:

  - DISCONNECT / ONLY_DISCONNECT: wait up to `pushListenerWaitPeriodMs` (3 s)
    for the batch being processed, then UNREGISTER each partition at its broker
    (committing the batch if it was processed, else rolling it back);
  - CONNECT / ONLY_CONNECT: REGISTER each partition at its broker, up to 5
    rounds 1 s apart; a partition answered PARTITION_OCCUPIED is dropped (the
    next heartbeat's holdings omit it, and the master hands it out again).

  The report that an event is done goes with the *next* heartbeat, so every
  step of a rebalance waits for one: that, and the master's period, is what a
  newcomer waits for. HB_NO_NODE (the master timed it out) registers it again.
- `ServerBalanceNode`, the lab's group member: `tubemq_client.consumer.BalancingNode`
  without the balancing loop (nothing for the application to decide), with
  this SDK; its `assigned` events carry `view` "master": one planner.

Departures, stated: the consumer id keeps the client-balance shape; the
heartbeat carries holdings every time (TubeMQ: with a report, else every 6th).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import WireError

from ..codes import HB_NO_NODE, NAMES, NOT_FOUND, PARTITION_OCCUPIED, SUCCESS
from ..consumer import MAX_REGISTER_RETRY_TIMES, REG_FAIL_WAIT_PERIOD_S, BalancingNode, ClientBalanceConsumer, key_parts
from .config import ServerBalanceConfig

#: `BaseMessageConsumer.registerPartitions`: rounds of REGISTER for a CONNECT, and the wait between them
CONNECT_ROUNDS, CONNECT_ROUND_WAIT_S = MAX_REGISTER_RETRY_TIMES, REG_FAIL_WAIT_PERIOD_S


class ServerBalanceConsumer(ClientBalanceConsumer):
    def __init__(self, config: ServerBalanceConfig, trace: TraceRecorder, name: str, batch_lock: threading.Lock,
                 on_lost: Callable[[list[str], str], None] | None = None,
                 on_event: Callable[[str, list[str]], None] | None = None):
        super().__init__(config, trace, name, on_lost)
        self.batch_lock = batch_lock
        self.on_event = on_event or (lambda kind, keys: None)
        self._events: queue.Queue[dict] = queue.Queue()
        self._done: int | None = None  # the event finished since the last heartbeat, to report

    def _register_to_master(self) -> int:
        answer = self._call_master("consumerRegisterC2M", client_id=self.consumer_id, topics=self.topics)
        if int(answer["code"]) == SUCCESS:
            self._learn_brokers(answer["brokers"])
        return int(answer["code"])

    def _learn_brokers(self, brokers: dict) -> None:
        with self._lock:
            self._brokers = {int(i): (h, int(p)) for i, (h, p) in brokers.items()}

    def start(self, topics: list[str]) -> None:
        """Register with the master (5 tries), then heartbeat the master and the brokers, and do events."""
        self.topics = sorted(topics)
        self._register_with_retries()
        for name, target in (("tubemq-master-hb", self._master_heartbeats),
                             ("tubemq-broker-hb", self._broker_heartbeats), ("tubemq-rebalance", self._rebalance_loop)):
            threading.Thread(target=target, name=name, daemon=True).start()

    def _master_heartbeats(self) -> None:
        """`HeartTask2MasterWorker`: holdings and the finished event up; the next event, if any, down."""
        while not self._stop.is_set():
            done = self._done
            try:
                answer = self._call_master("consumerHeartbeatC2M", client_id=self.consumer_id,
                                           held=sorted(self.registered), done=done)
                code = int(answer["code"])
                if code == HB_NO_NODE:
                    self._register_to_master()
                elif code == SUCCESS:
                    if self._done == done:
                        self._done = None  # reported
                    self._learn_brokers(answer.get("brokers", {}))
                    if answer.get("event"):
                        self._events.put(answer["event"])
            except ConnectionError:
                pass  # the next period tries again
            if self._stop.wait(self.config.heartbeat_period_ms / 1000):
                return

    def _rebalance_loop(self) -> None:
        """The rebalance thread: one event at a time, then its report waits for the next heartbeat."""
        while not self._stop.is_set():
            try:
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            keys = [str(k) for k in event["partitions"]]
            if "DISCONNECT" in event["kind"]:
                self._disconnect(keys)
            else:
                keys = self._connect(keys)
            self.trace.record("tubemq_event", member=self.consumer_id, event=event["kind"], partitions=keys,
                              rebalance_id=event["rebalance_id"])
            self.on_event(event["kind"], keys)
            self._done = int(event["rebalance_id"])

    def _disconnect(self, keys: list[str]) -> None:
        """Wait for the batch being processed (up to `pushListenerWaitPeriodMs`), then unregister each."""
        processed = self.batch_lock.acquire(timeout=self.config.push_listener_wait_period_ms / 1000)
        try:
            for key in keys:
                self.disconnect_from_partition(key, consumed=processed)
        finally:
            if processed:
                self.batch_lock.release()

    def _connect(self, keys: list[str]) -> list[str]:
        """`registerPartitions`: REGISTER each, up to 5 rounds 1 s apart; PARTITION_OCCUPIED drops it. The keys
        it now holds."""
        with self._lock:
            for key in keys:
                self._meta[key] = True
        pending, held = list(keys), []
        for attempt in range(1, CONNECT_ROUNDS + 1):
            retry = []
            for key in pending:
                code = self._register_partition(key, attempt)
                if code == SUCCESS:
                    held.append(key)
                elif code != PARTITION_OCCUPIED:
                    retry.append(key)
            pending = retry
            if not pending or self._stop.wait(CONNECT_ROUND_WAIT_S):
                break
        return held

    def _register_partition(self, key: str, attempt: int) -> int:
        body = {"op_type": "REGISTER", "read_status": self.config.read_status}
        try:
            answer = self._call_broker(key, "consumerRegisterC2B", **body)
            code = int(answer["code"])
        except (ConnectionError, WireError):
            answer, code = {}, NOT_FOUND
        self.trace.record("tubemq_connect", member=self.consumer_id, key=key, attempt=attempt,
                          code=NAMES.get(code, str(code)))
        if code == SUCCESS:
            with self._lock:
                self.registered[key] = int(answer["curr_offset"])
        return code


class ServerBalanceNode(BalancingNode):
    """A server-balance consumer as a lab group member: it consumes what its master gave it."""

    def __init__(self, config: ServerBalanceConfig, topics: list[str], trace: TraceRecorder, *, name: str = "c",
                 on_change: Callable[[BalancingNode], None] | None = None):
        super().__init__(config, topics, trace, name=name, on_change=on_change)
        self.view = "master"

    def _sdk(self) -> ServerBalanceConsumer:
        return ServerBalanceConsumer(self.config, self.trace, self.name, self.batch_lock, on_lost=self._lost,
                                     on_event=self._on_event)

    def _loops(self):
        return [("consume", self._consume_loop)]

    def _on_event(self, kind: str, keys: list[str]) -> None:
        if "DISCONNECT" in kind:
            self.trace.record("revoked", member=self.ident, partitions=[list(key_parts(k)[1:]) for k in keys])
        self._assigned()
