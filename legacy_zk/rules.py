"""The ZooKeeper-era consumer's rules, without I/O: what Kafka 0.8.2.2's `ZookeeperConsumerConnector` decides.

`consumer.py` does the I/O (ZooKeeper, the brokers, threads, the clock) and
asks this module every question whose answer depends only on what it read or
on the time. Each rule is a plain function; the time is an argument, so
`tests/test_legacy_rules.py` checks them with no server and a fake clock.

| rule | 0.8.2.2 | answers |
|---|---|---|
| `attempt_outcome` | `syncedRebalance` | how one rebalance attempt ended: ok, conflict or error |
| `synced_rebalance_step` | `syncedRebalance` | after an attempt: CONSUMING, another attempt, or FAILED |
| `commit_offsets_due` | `commitOffsets` | which positions to write: those that moved since the last write |
| `auto_commit_wait` | `scheduleAtFixedRate` | how long until the next auto-commit tick (0: a missed tick runs now) |
| `process_state_changed` | zkclient's `processStateChanged` | what a lost, expired or regained session does |
| `start_position` | `fetchOffsets`, `auto.offset.reset` | where the fetcher of a partition just claimed starts |
| `partitions_learnt` | (the lab's record) | whether a topic's znode, read, shows more partitions than known |
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

Key = tuple[str, int]  # (topic, partition)


class ConsumerState(enum.Enum):
    """The consumer's states (`consumer.py` draws their transitions)."""

    STARTING = "starting"
    REBALANCING = "rebalancing"
    CONSUMING = "consuming"
    FAILED = "failed"
    STOPPED = "stopped"


# -- syncedRebalance -------------------------------------------------------------------------------------------------
OK, CONFLICT = "ok", "conflict"


def attempt_outcome(done: bool, error: BaseException | None = None) -> str:
    """How one rebalance attempt ended, as its `rebalance_end` event records it.

    "ok": the whole share is claimed (or there is no broker at all, which 0.8
    counts as done); "conflict": `claim_all` was refused a partition another
    consumer still owns (or the consumer is stopping); "error:<exception>":
    the attempt raised (0.8 fails the attempt on any Throwable: a member gone
    between two reads, an assignor's assertion).

    >>> attempt_outcome(True), attempt_outcome(False), attempt_outcome(False, KeyError("t"))
    ('ok', 'conflict', 'error:KeyError')
    """
    if error is not None:
        return f"error:{type(error).__name__}"
    return OK if done else CONFLICT


def synced_rebalance_step(attempt: int, outcome: str, rebalance_max_retries: int) -> ConsumerState:
    """`syncedRebalance`: what follows attempt number `attempt` (counted from 1) that ended with `outcome`.

    - "ok": CONSUMING; the round is over.
    - anything else: first `closeFetchersForQueues` (stop every fetcher,
      commit the registry if auto-commit) and the back-off
      (`rebalance.backoff.ms`), then REBALANCING (the next attempt) while
      attempts remain, else FAILED (0.8's `ConsumerRebalanceFailedException`).
      The last failed attempt backs off too, before giving up.

    So a round makes at most `rebalance.max.retries` attempts (4 by default).
    Two conflicts, then the share is claimed; or four conflicts::

        >>> [synced_rebalance_step(n, o, 4).value for n, o in enumerate(["conflict", "error:NoNodeError", "ok"], 1)]
        ['rebalancing', 'rebalancing', 'consuming']
        >>> [synced_rebalance_step(n, "conflict", 4).value for n in (1, 2, 3, 4)]
        ['rebalancing', 'rebalancing', 'rebalancing', 'failed']
    """
    if outcome == OK:
        return ConsumerState.CONSUMING
    return ConsumerState.REBALANCING if attempt < rebalance_max_retries else ConsumerState.FAILED


# -- commitOffsets -------------------------------------------------------------------------------------------------
def commit_offsets_due(snapshot: Mapping[Key, tuple[int, str]],
                       checkpointed: Mapping[Key, int]) -> Iterator[tuple[Key, int, str]]:
    """`commitOffsets`: of a snapshot of the registry, {partition: (consumed offset, thread id)}, the writes to
    make, in partition order, as (partition, offset, thread id).

    A partition is written when its position differs from `checkpointed`
    (0.8's `checkpointedZkOffsets`: the offset last written, or its start
    position when it was claimed); one that did not move is not written
    again. "Moved" means differs: a position behind the checkpoint is written
    too (nothing in ZooKeeper forbids it).

    Lazy: each partition is compared when its turn comes. The caller writes
    one, records it in `checkpointed`, then asks for the next, so a
    checkpoint another commit recorded meanwhile (a rebalance's and the
    auto-commit's overlap while one waits for a connection) is honoured.

    >>> checkpointed = {("t", 0): 10, ("t", 1): 20}
    >>> snapshot = {("t", 1): (25, "c-0"), ("t", 0): (10, "c-0"), ("t", 2): (7, "c-0")}
    >>> list(commit_offsets_due(snapshot, checkpointed))
    [(('t', 1), 25, 'c-0'), (('t', 2), 7, 'c-0')]
    """
    for key, (position, thread_id) in sorted(snapshot.items()):
        if checkpointed.get(key) != position:
            yield key, position, thread_id


# -- the auto-commit schedule -------------------------------------------------------------------------------------
def auto_commit_wait(start: float, interval: float, ticks_run: int, now: float) -> float:
    """The auto-commit's `scheduleAtFixedRate`: how long from `now` until the next tick is due.

    Tick n (counted from 1) is due at `start + n * interval`, however long the
    ticks before it took: a fixed rate, not a fixed delay. Ticks run one at a
    time, in order. So after a pause (a SIGSTOP, a commit blocked on a lost
    connection) every tick that fell due meanwhile is due at once (a wait of
    0), one after another, and the schedule is back on its old beat. Any unit,
    the same for `start`, `interval` and `now`.

    Started at 0 with an interval of 1000; tick 1 ran at 1000; the process was
    paused from 1200 to 3500::

        >>> auto_commit_wait(0, 1000, 1, 1200)  # tick 2 is due at 2000
        800
        >>> [auto_commit_wait(0, 1000, ran, 3500) for ran in (1, 2, 3)]  # ticks 2 and 3 now, tick 4 at 4000
        [0, 0, 500]
    """
    return max(0, start + (ticks_run + 1) * interval - now)


# -- session-state changes -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    """What the consumer remembers of its ZooKeeper session between two state changes."""

    suspended: bool = False  # the connection was lost (SUSPENDED) and has not come back yet
    expired: bool = False    # kazoo said LOST: the session is gone, and the next connection is a new session


#: what `process_state_changed` asks the consumer to do
SESSION_EXPIRED = "session_expired"        # record that the session expired
HANDLE_NEW_SESSION = "handleNewSession"    # on the event thread: resetState, register again, syncedRebalance
FIRE_ALL_EVENTS = "fireAllEvents"          # every listener once more (a second rebalance)
REWATCH = "rewatch"                        # the same session: set the watches again (Java's `SetWatches`)


def process_state_changed(session: Session, state: str, *, closing: bool = False) -> tuple[Session, tuple[str, ...]]:
    """zkclient's `processStateChanged` with 0.8's listener: from kazoo's new `state` (SUSPENDED, LOST or
    CONNECTED), the session after it and what to do, in order.

    - SUSPENDED (the connection is lost): nothing to do (0.8's
      `handleStateChanged` is empty): the fetchers go on fetching.
    - LOST (the session expired; kazoo learns it on reconnecting): remembered,
      and SESSION_EXPIRED, unless `closing`: kazoo reports the consumer's own
      close as LOST, and 0.8's `ZkClient.close()` expires nothing.
    - CONNECTED after a LOST: a new session: HANDLE_NEW_SESSION, then
      FIRE_ALL_EVENTS.
    - CONNECTED after a SUSPENDED only: the same session: REWATCH (a change
      missed meanwhile is delivered).
    - CONNECTED otherwise (the first connection): nothing.

    A link cut past the session timeout, then healed::

        >>> s, todo = process_state_changed(Session(), "SUSPENDED"); todo
        ()
        >>> s, todo = process_state_changed(s, "LOST"); todo
        ('session_expired',)
        >>> process_state_changed(s, "CONNECTED")
        (Session(suspended=False, expired=False), ('handleNewSession', 'fireAllEvents'))
    """
    if state == "SUSPENDED":
        return Session(suspended=True, expired=session.expired), ()
    if state == "LOST":
        return Session(suspended=session.suspended, expired=True), (() if closing else (SESSION_EXPIRED,))
    if state == "CONNECTED":
        if session.expired:
            return Session(), (HANDLE_NEW_SESSION, FIRE_ALL_EVENTS)
        if session.suspended:
            return Session(), (REWATCH,)
    return session, ()


# -- a claimed partition's start ------------------------------------------------------------------------------------
def start_position(committed: int | None, auto_offset_reset: str, log_end: Callable[[], int | None]) -> int:
    """Where the fetcher of a partition just claimed starts.

    The group's committed offset (`fetchOffsets`, read before claiming); with
    none, `auto.offset.reset`: "smallest" is the log's start, 0; "largest" is
    where the log ends now, `log_end()` (the caller asks the partition's
    leader; None if it cannot: then 0). `log_end` is called only for
    "largest" with nothing committed, so no other case asks a broker.

    >>> start_position(42, "largest", lambda: 99), start_position(None, "largest", lambda: 99)
    (42, 99)
    >>> start_position(None, "smallest", lambda: 1 / 0), start_position(None, "largest", lambda: None)
    (0, 0)
    """
    if committed is not None:
        return committed
    if auto_offset_reset == "smallest":
        return 0
    end = log_end()
    return 0 if end is None else end


# -- a topic's partitions ----------------------------------------------------------------------------------------
#: what the consumer knows of one topic's znode: (its mzxid, its partition count) at the newest version read
TopicKnown = tuple[int, int]


def partitions_learnt(known: TopicKnown | None, mzxid: int, count: int) -> tuple[TopicKnown | None, int | None]:
    """One read of a topic's znode (`/brokers/topics/<t>`, version `mzxid`, `count` partitions): what the consumer
    knows after it, and the count it knew before if the read shows more partitions than that (a `partitions_seen`),
    else None. Kafka 0.8.2.2 keeps no such count (its listener only logs the new data and raises the flag); this is
    the lab's bookkeeping for the trace (`topic_listener.py`).

    `known` is the newest version read so far, by the listener or by a rebalance's `getPartitionsForTopics`
    (None before the first read: the first read is no news, nothing smaller was known). A read of an older
    version than known (a rebalance's read, overtaken by the listener's while it read the members) teaches
    nothing; a newer one becomes what is known, and is news when it has more partitions. A topic deleted and
    made again is a newer version: from then on its own count is what is known.

        >>> partitions_learnt(None, 10, 4)                  # the first read
        ((10, 4), None)
        >>> partitions_learnt((10, 4), 20, 8)               # grown from 4 to 8
        ((20, 8), 4)
        >>> partitions_learnt((20, 8), 20, 8), partitions_learnt((20, 8), 10, 4)   # the same version; an older one
        (((20, 8), None), ((20, 8), None))
        >>> partitions_learnt((20, 8), 30, 8)               # rewritten with as many (replicas moved): no news
        ((30, 8), None)
    """
    if known is not None and mzxid <= known[0]:
        return known, None
    before = known[1] if known is not None and count > known[1] else None
    return (mzxid, count), before
