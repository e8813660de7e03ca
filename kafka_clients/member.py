"""A real Kafka client as a lab group member: its poll loop in a thread, its callbacks written to the trace.

The client is the library's own (kafka-python's `KafkaConsumer`, librdkafka's
`Consumer`), pointed at the brokers' Kafka listeners; the lab only watches:

    start()  -> consumer_start; the poll loop thread builds the client and subscribes
    poll     -> processed, one per record, as the application processes it (`lab.processing.ms` each)
    the client's rebalance callbacks -> revoked (what it let go of), assigned (its whole assignment after,
                with the generation the client holds, where the library lets it be read)
    the client's commit callback -> commit, one per partition: outcome `accepted`, `fenced` (the coordinator
                refused it as from a member it no longer knows: `FENCING_ERRORS`) or `failed`, and the error's
                Kafka name; an answer that is no news is not recorded (`LastAccepted`)
    a synchronous commit (before a rebalance, in close()) -> commit likewise, as its answer comes
    stop()   -> the client's close() (a commit if auto-commit is on, a LeaveGroup unless static), consumer_stop

States (`consumer_state`): STARTING -> REBALANCING (revoked, or waiting for a
first assignment) -> STABLE (assigned); FAILED if the client raised a fatal
error (a fenced static member, say): it gives up, as the Java client's
application would. The coordinator's side of every exchange (JoinGroup,
SyncGroup, Heartbeat, OffsetCommit) is in the brokers' traces
(`coordinator_request`, `kafka_request`), as for the lab's own consumers.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from lab_cluster.errors import LabError
from lab_cluster.family import MemberSnapshot
from lab_cluster.trace import TraceRecorder

#: the lab's own setting, not the library's: time the application spends on each record (as the lab's consumers'
#: `lab.processing.ms`), so a zombie that wakes up behind does not catch up at once
PROCESSING_MS = "lab.processing.ms"
#: a commit refused with one of these was sent by a member the coordinator no longer counts (the lab's consumers
#: record it `fenced`: `modern_coord/consumer.py`, Java's CommitFailedException); KIP-848's STALE_MEMBER_EPOCH too
FENCING_ERRORS = ("ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "STALE_MEMBER_EPOCH")


def lab_settings(props: dict[str, str]) -> tuple[dict[str, str], int]:
    """The properties for the library, and the lab's `lab.processing.ms` taken out of them.

    >>> lab_settings({"group.id": "g", "lab.processing.ms": "20"})
    ({'group.id': 'g'}, 20)
    """
    rest = {k: v for k, v in props.items() if k != PROCESSING_MS}
    try:
        processing_ms = int(props.get(PROCESSING_MS, 0))
    except ValueError:
        processing_ms = -1
    if processing_ms < 0:
        raise LabError(f"{PROCESSING_MS}={props[PROCESSING_MS]}: it must be a whole number of milliseconds >= 0.",
                       "Fix the value.")
    return rest, processing_ms


def commit_outcome(error: str | None) -> str:
    """`accepted`, `fenced` or `failed`, for a commit that got this Kafka error (None: none).

    >>> commit_outcome(None), commit_outcome("ILLEGAL_GENERATION"), commit_outcome("REQUEST_TIMED_OUT")
    ('accepted', 'fenced', 'failed')
    """
    return "accepted" if error is None else "fenced" if error in FENCING_ERRORS else "failed"


class LastAccepted:
    """The offset of this member's last recorded accepted commit, per partition it holds: which of the client's
    commit answers are news for the trace.

    An asynchronous commit's answer reaches the wrapper through the library's commit callback, which the library
    calls from its next `poll` (or `close`), and so can come after the answer to a later, synchronous commit
    (before a rebalance, or in `close`), which is recorded as soon as it arrives. The coordinator answered them in
    the order they were sent (one member's commits go over its one connection to the coordinator, and Kafka
    handles a connection's requests one at a time), so an accepted offset lower than the one already recorded was
    accepted *before* it: recorded now, it would show a committed offset moving backwards that the coordinator
    never moved (seen once in CI, as a zombie trial's librdkafka member was stopped: auto-commit of 103 sent,
    revoke's sync commit of 104 sent and answered, then the callback for 103). Such an answer, and a repeat of
    the offset already recorded (librdkafka's own commit as it unassigns, after the wrapper's), is not news. A
    partition assigned anew starts afresh: someone else may have committed it lower meanwhile (a zombie), and its
    next commit is news.

    >>> last = LastAccepted()
    >>> last.is_news("t", 1, 103, None), last.remember("t", 1, 104, None), last.is_news("t", 1, 103, None)
    (True, None, False)
    >>> last.is_news("t", 1, 104, None), last.is_news("t", 1, 100, "ILLEGAL_GENERATION")
    (False, True)
    >>> last.is_news("t", 1, 105, None)
    True
    >>> last.forget([("t", 1)]); last.is_news("t", 1, 90, None)
    True
    """

    def __init__(self) -> None:
        self._offsets: dict[tuple[str, int], int] = {}

    def is_news(self, topic: str, partition: int, offset: int, error: str | None) -> bool:
        """An asynchronous commit's answer: True if the trace should record it (a refused commit always is)."""
        last = self._offsets.get((topic, partition))
        return error is not None or last is None or offset > last

    def remember(self, topic: str, partition: int, offset: int, error: str | None) -> None:
        """A commit's answer the trace records."""
        if error is None:
            self._offsets[(topic, partition)] = offset

    def forget(self, partitions: list[tuple[str, int]]) -> None:
        for tp in partitions:
            self._offsets.pop(tp, None)


class State(enum.Enum):
    STARTING = "starting"
    REBALANCING = "rebalancing"
    STABLE = "stable"
    FAILED = "failed"
    STOPPED = "stopped"


class RealClientMember:
    """What both wrappers share; a subclass runs its library's client in `_run` and calls the `_on_*` hooks."""

    library = ""  # what `consumer_start` names as the client

    def __init__(self, config: dict, topics: list[str], trace: TraceRecorder, actor: str,
                 on_change: Callable | None = None):
        self.config = dict(config)
        self.processing_s = self.config.pop(PROCESSING_MS, 0) / 1000
        self.topics = list(topics)
        self.trace = trace
        self.ident = actor
        self.on_change = on_change
        self.state = State.STARTING
        self.error: str | None = None
        self.member_id = ""
        self._owned: set[tuple[str, int]] = set()
        self._accepted = LastAccepted()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded_run, name=f"poll-{actor}", daemon=True)

    # -- GroupMember ---------------------------------------------------------------------------
    def start(self):
        self.trace.record("consumer_start", member=self.ident, config={"library": self.library, **self.config},
                          topics=self.topics)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def snapshot(self) -> MemberSnapshot:
        with self._lock:
            return MemberSnapshot(self.state.value, gave_up=self.state is State.FAILED,
                                  partitions=sorted(p for _, p in self._owned))

    def assignment(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._owned)

    # -- the loop ----------------------------------------------------------------------------------
    def _guarded_run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # the library raised: the member gives up, and says why
            self._fail(f"{exc.__class__.__name__}: {exc}")
        finally:
            if self.state is not State.FAILED:
                self._set_state(State.STOPPED)
            self.trace.record("consumer_stop", member=self.ident)

    def _run(self) -> None:
        raise NotImplementedError

    # -- hooks the wrappers call ---------------------------------------------------------------------
    def _on_processed(self, topic: str, partition: int, offset: int) -> None:
        if self.processing_s:
            self._stop.wait(self.processing_s)
        self.trace.record("processed", topic=topic, partition=partition, offset=offset, member=self.member_id)

    def _on_revoked(self, partitions: list[tuple[str, int]]) -> None:
        with self._lock:
            self._owned -= set(partitions)
        self.trace.record("revoked", member=self.member_id, partitions=[list(tp) for tp in sorted(partitions)])
        self._set_state(State.REBALANCING)

    def _on_assigned(self, owned: list[tuple[str, int]], generation: int | None) -> None:
        with self._lock:
            self._accepted.forget(list(set(owned) - self._owned))
            moved, self._owned = set(owned) != self._owned, set(owned)
        self.trace.record("assigned", member=self.member_id, generation=generation,
                          partitions=[list(tp) for tp in sorted(owned)])
        # an incremental protocol (KIP-848, cooperative) may hand a STABLE member more partitions: a new state line
        # all the same, or the runner goes on seeing the old share
        self._set_state(State.STABLE, notify=moved)

    def _on_commit_answered(self, offsets: list[tuple[str, int, int]], error: str | None) -> None:
        """An asynchronous commit's answer, from the client's commit callback: recorded where it is news."""
        self._on_committed([(t, p, o) for t, p, o in offsets if self._accepted.is_news(t, p, o, error)], error)

    def _on_committed(self, offsets: list[tuple[str, int, int]], error: str | None) -> None:
        """A commit's answer, recorded as it is. `error`: the Kafka name of the error the commit got (None:
        accepted)."""
        for topic, partition, offset in offsets:
            self._accepted.remember(topic, partition, offset, error)
            self.trace.record("commit", member=self.member_id, topic=topic, partition=partition, offset=offset,
                              outcome=commit_outcome(error), error=error or "NONE")

    def _fail(self, reason: str) -> None:
        self.error = reason
        self.trace.record("consumer_failed", member=self.ident, reason=reason)
        self._set_state(State.FAILED)

    def _set_state(self, state: State, notify: bool = False) -> None:
        """Enter `state`; its host hears of it if it changed (or `notify`: the member's partitions did)."""
        with self._lock:
            changed, self.state = state is not self.state, state
        if changed:
            self.trace.record("consumer_state", member=self.member_id or self.ident, state=state.value)
        if (changed or notify) and self.on_change is not None:
            self.on_change(self)
