"""One RocketMQ consumer's rebalance of one topic, without I/O: RocketMQ 4.9.8's `RebalanceImpl` (CLUSTERING).

Every 20 s, and at once when a broker pushes NOTIFY_CONSUMER_IDS_CHANGED, a
consumer rebalances each topic it subscribes (`rebalance_by_topic`)::

    queues  <- its route data (every queue of every readable broker)
    ids     <- GET_CONSUMER_LIST_BY_GROUP from ONE broker of the topic, picked at random
    either missing -> nothing changes (it keeps what it has; nothing is revoked)
    sort both; share <- the strategy (AllocateMessageQueueAveragely by default) for its own id
    update_process_queue_table(share)

`update_process_queue_table` (`updateProcessQueueTableInRebalance`):

1. **remove**: each queue it holds that is not in the share is marked dropped
   and handed to `remove_unnecessary` (persist its offset, oneway, and forget
   it; an orderly consumer also unlocks it at the broker once the message being
   consumed is done, waiting up to 1 s for it, else keeps it: it is removed at
   a later rebalance). A push consumer also drops a queue nobody pulled for
   120 s (`PULL_MAX_IDLE_TIME`, logged as "[BUG] pull is pause"); step 2 of the
   same pass then finds it missing and makes it anew, from the offset it just
   persisted (RebalanceImpl.java:347-369).
2. **add**: each queue of the share it does not hold: an orderly consumer
   first locks it at the broker (refused: skipped this round); its start
   offset is computed (`compute_pull_from_where`); a failure skips it this
   round; else a process queue and a pull request are made.
3. the pull requests are dispatched.

The I/O is the `Broker` protocol's (offsets, max offset, locks), so a test
drives a rebalance with a fake broker and a fake clock. (Departure, stated:
an orderly consumer's unlock is sent at once; RocketMQ delays it 20 s while
the queue still has messages cached, `UNLOCK_DELAY_TIME_MILLS`.) Nobody checks that
the consumers' shares add up: two consumers that read different id lists
(different brokers, or one before a heartbeat arrived) each take what their
list gives them, and a queue may be taken twice or by nobody until the next
rebalance.

Worked example: c1 owned queues 0-2 of `t` under [c1, c2]; c3 joined, and
the broker c1 asked already knew::

    >>> broker = MemoryBroker(max_offsets={("t", "broker-a", q): 100 for q in range(6)})
    >>> c1 = RebalanceImpl("g", "c1", broker)
    >>> queues = {("t", "broker-a", q) for q in range(6)}
    >>> c1.rebalance_by_topic("t", queues, ["c2", "c1"]).added
    [('t', 'broker-a', 0), ('t', 'broker-a', 1), ('t', 'broker-a', 2)]
    >>> outcome = c1.rebalance_by_topic("t", queues, ["c1", "c2", "c3"])
    >>> outcome.removed, outcome.added, sorted(c1.table)
    ([('t', 'broker-a', 2)], [], [('t', 'broker-a', 0), ('t', 'broker-a', 1)])
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from lab_cluster.assignment.rocketmq import averagely
from lab_cluster.clock import monotonic_ms

MessageQueue = tuple[str, str, int]  # (topic, broker name, queue id): RocketMQ's `MessageQueue`, in its sort order
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
#: `ProcessQueue.PULL_MAX_IDLE_TIME` (`rocketmq.client.pull.pullMaxIdleTime`)
PULL_MAX_IDLE_TIME_MS = 120_000
#: `RebalancePushImpl.removeUnnecessaryMessageQueue`: an orderly consumer waits this long for the consume lock
CONSUME_LOCK_WAIT_MS = 1_000
#: `consumeFromWhere` values the lab models (`CONSUME_FROM_LAST_OFFSET` is the push consumer's default)
CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET"


class OffsetNotFound(Exception):
    """The broker has no offset for this queue (QUERY_NOT_FOUND)."""


class Broker(Protocol):
    """What a rebalance asks of the brokers (the client sends each to the queue's broker)."""

    def query_offset(self, group: str, mq: MessageQueue) -> int: ...  # raises OffsetNotFound, or OSError
    def max_offset(self, mq: MessageQueue) -> int: ...
    def persist_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...  # oneway
    def lock(self, group: str, mq: MessageQueue, client_id: str) -> bool: ...
    def unlock(self, group: str, mq: MessageQueue, client_id: str) -> None: ...  # oneway


@dataclass
class ProcessQueue:
    """What the consumer keeps of one queue it consumes (`ProcessQueue`): where it is, and whether it let go."""

    offset: int  # the next offset to pull; the consumed position once processed (`updateOffset`)
    last_pull_ms: int
    dropped: bool = False
    locked: bool = True  # RocketMQ sets it for every new process queue; orderly consumers renew it
    last_lock_ms: int = 0  # `lastLockTimestamp`: when the broker last granted its lock (orderly)
    # the queue's `PullRequest`, which the lab keeps here: when its next pull is due (`executePullRequestLater`),
    # and, orderly, whether its first pull since it was made re-read the offset from the broker
    next_pull_ms: int = 0
    previously_locked: bool = False
    #: whether the offset store holds it (RemoteBrokerOffsetStore's `offsetTable`): once read from the broker's
    #: store, or after the queue's first pull result; only such a queue's offset is persisted
    in_offset_table: bool = False
    #: the last offset a pull of this queue carried for the broker to store (its `commit` event is traced once)
    last_pull_commit: int | None = None
    #: `consumeLock`: held while one message is consumed (orderly: a queue is let go only between messages)
    consume_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def pull_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_pull_ms > PULL_MAX_IDLE_TIME_MS


@dataclass
class RebalanceOutcome:
    changed: bool
    added: list[MessageQueue] = field(default_factory=list)
    removed: list[MessageQueue] = field(default_factory=list)
    skipped: list[MessageQueue] = field(default_factory=list)  # allocated, not added this round (lock, offset)
    kept: str = ""  # why nothing was computed ("topic not exist", "get consumer id list failed", an error)
    share: list[MessageQueue] = field(default_factory=list)
    view: list[str] = field(default_factory=list)  # the sorted id list it allocated from


class RebalanceImpl:
    def __init__(self, group: str, client_id: str, broker: Broker, *,
                 strategy: Callable[[str, list, list], list] = averagely, orderly: bool = False,
                 consume_from_where: str = CONSUME_FROM_LAST_OFFSET, clock: Callable[[], int] = monotonic_ms,
                 consume_lock_wait_ms: int = CONSUME_LOCK_WAIT_MS):
        self.group, self.client_id, self.broker = group, client_id, broker
        self.strategy, self.orderly, self.consume_from_where, self.clock = strategy, orderly, consume_from_where, clock
        self.consume_lock_wait_ms = consume_lock_wait_ms
        self.table: dict[MessageQueue, ProcessQueue] = {}  # `processQueueTable`

    def rebalance_by_topic(self, topic: str, mq_set: Iterable[MessageQueue] | None,
                           cid_all: Iterable[str] | None) -> RebalanceOutcome:
        """`rebalanceByTopic`, CLUSTERING: `mq_set` from the route, `cid_all` from one broker (None: failed)."""
        if mq_set is None:
            return RebalanceOutcome(False, kept="topic not exist")
        if cid_all is None:
            return RebalanceOutcome(False, kept="get consumer id list failed")
        mq_all, ids = sorted(mq_set), sorted(cid_all)
        try:
            share = self.strategy(self.client_id, mq_all, ids)
        except ValueError as exc:  # RocketMQ logs "allocate message queue exception" and changes nothing
            return RebalanceOutcome(False, kept=f"allocate failed: {exc}")
        outcome = self.update_process_queue_table(topic, set(share))
        outcome.share, outcome.view = list(share), ids
        return outcome

    def update_process_queue_table(self, topic: str, share: set[MessageQueue]) -> RebalanceOutcome:
        """`updateProcessQueueTableInRebalance`: remove what is no longer ours, then add what is new."""
        outcome, now = RebalanceOutcome(False), self.clock()
        for mq, pq in sorted(self.table.items()):
            if mq[0] != topic:
                continue
            if mq not in share or pq.pull_expired(now):  # the lab's consumers are push consumers
                pq.dropped = True
                if self.remove_unnecessary(mq, pq):
                    del self.table[mq]
                    outcome.removed.append(mq)
                    outcome.changed = True
        for mq in sorted(share - set(self.table)):
            if self.orderly and not self.broker.lock(self.group, mq, self.client_id):
                outcome.skipped.append(mq)  # "add a new mq failed ... because lock failed"
                continue
            try:
                offset, stored = self.pull_from_where(mq)
            except (OSError, OffsetNotFound):
                offset, stored = -1, False
            if offset < 0:
                outcome.skipped.append(mq)  # "add new mq failed": tried again at the next rebalance
                continue
            self.table[mq] = ProcessQueue(offset, last_pull_ms=now, last_lock_ms=now, in_offset_table=stored)
            outcome.added.append(mq)
            outcome.changed = True
        return outcome

    def remove_unnecessary(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """`RebalancePushImpl.removeUnnecessaryMessageQueue`: persist the offset (oneway) and forget it; an
        orderly consumer waits up to 1 000 ms for the message being consumed (the consume lock) and unlocks the
        queue at the broker, or, if that message is not done, returns False: the queue stays, dropped, until a
        later rebalance. (Marked dropped first, the queue's next message is not consumed.)"""
        if pq.in_offset_table:  # `RemoteBrokerOffsetStore.persist`: only a queue its offset table holds
            self.broker.persist_offset(self.group, mq, pq.offset)
        if not self.orderly:
            return True
        if not pq.consume_lock.acquire(timeout=self.consume_lock_wait_ms / 1000):
            return False  # "[WRONG] mq is consuming, so can not unlock it"
        try:
            self.broker.unlock(self.group, mq, self.client_id)
        finally:
            pq.consume_lock.release()
        return True

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """`computePullFromWhereWithException`: the stored offset; none stored: the end of the queue
        (CONSUME_FROM_LAST_OFFSET; 0 for a retry topic) or its start (CONSUME_FROM_FIRST_OFFSET). A broker
        that cannot be asked raises (OSError): the queue is skipped this round.

        A queue new to the topic (its partitions grown) has no stored offset. Departure, stated: RocketMQ
        4.9.7's broker then answers 0, not QUERY_NOT_FOUND, when the queue's min offset is <= 0 and its first
        message is not on disk only (`ConsumerManageProcessor.queryConsumerOffset`: `minOffset <= 0 &&
        !checkInDiskByConsumeOffset(topic, queueId, 0)`: the queue is empty, or its first message is within the
        last `accessMessageInMemoryMaxRatio`, 40 %, of physical memory the commit log wrote, as a new queue's is),
        so RocketMQ reads a new queue from 0 whatever `consumeFromWhere` says, and that 0 enters the offset
        table (`RemoteBrokerOffsetStore.readOffset`). The lab's broker
        answers QUERY_NOT_FOUND (`broker/offsets.py`): with CONSUME_FROM_FIRST_OFFSET (every experiment's and
        test's, the family's `from_beginning`) a new queue starts at 0 as in RocketMQ, but is not in the offset
        table until its first pull; with CONSUME_FROM_LAST_OFFSET it starts at the queue's end when a rebalance
        first takes it, so what was written to it before (up to `pollNameServerInterval` + the rebalance wait
        after it appeared) is never consumed by the group."""
        return self.pull_from_where(mq)[0]

    def pull_from_where(self, mq: MessageQueue) -> tuple[int, bool]:
        """(`compute_pull_from_where`, whether it was the stored offset: `readOffset(READ_FROM_STORE)` puts it in
        the offset table, a computed start does not)."""
        try:
            return self.broker.query_offset(self.group, mq), True
        except OffsetNotFound:
            if self.consume_from_where == CONSUME_FROM_FIRST_OFFSET or mq[0].startswith(RETRY_GROUP_TOPIC_PREFIX):
                return 0, False
            return self.broker.max_offset(mq), False


class MemoryBroker:
    """A `Broker` in memory, for tests and examples: offsets, max offsets and locks as plain dicts."""

    def __init__(self, max_offsets: dict[MessageQueue, int] | None = None):
        self.max_offsets = dict(max_offsets or {})
        self.offsets: dict[tuple[str, MessageQueue], int] = {}
        self.locks: dict[tuple[str, MessageQueue], str] = {}

    def query_offset(self, group: str, mq: MessageQueue) -> int:
        if (group, mq) not in self.offsets:
            raise OffsetNotFound(mq)
        return self.offsets[(group, mq)]

    def max_offset(self, mq: MessageQueue) -> int:
        return self.max_offsets.get(mq, 0)

    def persist_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self.offsets[(group, mq)] = offset

    def lock(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        return self.locks.setdefault((group, mq), client_id) == client_id

    def unlock(self, group: str, mq: MessageQueue, client_id: str) -> None:
        if self.locks.get((group, mq)) == client_id:
            del self.locks[(group, mq)]
