"""The periodic auto-commit of both coordinator-era consumers, sent without the poll loop waiting for it.

Kafka's consumers never block fetching and processing on the periodic
auto-commit: the classic one sends it with `maybeAutoCommitOffsetsAsync`
("without blocking on its completion"), the KIP-848 one queues it for its
background thread (`CommitRequestManager.maybeAutoCommitAsync`). So a consumer
whose coordinator stops answering, while its partitions' leaders still do,
goes on processing: only its commits wait, then fail. The lab sends the
commit on a thread of its own (`AsyncAutoCommit`); when to send is decided
by `AutoCommitTimer`, with no I/O.

The timer, as Kafka's (`auto.commit.interval.ms`, `retry.backoff.ms`)::

    >>> timer = AutoCommitTimer(interval_ms=5_000, retry_backoff_ms=100, now_ms=0)
    >>> timer.due(4_999), timer.due(5_000)
    (False, True)
    >>> timer.sent(5_000); timer.due(10_000)    # one in flight: the next waits for its answer
    False
    >>> timer.answered(10_100, retriable=True); timer.due(10_199), timer.due(10_200)   # retried after back-off
    (False, True)
    >>> timer.sent(10_200); timer.answered(10_210, retriable=False); timer.due(15_199), timer.due(15_200)
    (False, True)

Departure, stated: one auto-commit is in flight at a time, and one that
falls due meanwhile goes as soon as the answer comes, with the positions of
that moment. That is the KIP-848 consumer's rule
(`AutoCommitState.shouldAutoCommit`). The classic Java consumer sends it
anyway, with the positions of the moment it falls due, queued behind the
first on the one coordinator connection (the lab's connection carries one
request at a time); with a coordinator that does not answer, both time out.
Java's classic consumer also applies a failure's back-off when its callback
runs, at the next poll, where the lab applies it when the answer comes.

A failure that must stop the consumer (FENCED_INSTANCE_ID for the generation
it holds) is kept and raised by the poll loop at its next turn, as Java's
`invokeCompletedOffsetCommitCallbacks` raises `asyncCommitFenced` from
`poll()`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lab_cluster.clock import monotonic_ms
from lab_cluster.wire import ErrorCode


class AutoCommitTimer:
    """When the next auto-commit is due (Kafka's `nextAutoCommitTimer`), with the time passed in."""

    def __init__(self, *, interval_ms: int, retry_backoff_ms: int, now_ms: int):
        self.interval_ms = interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.next_ms = now_ms + interval_ms
        self.in_flight = False

    def due(self, now_ms: int) -> bool:
        return not self.in_flight and now_ms >= self.next_ms

    def sent(self, now_ms: int) -> None:
        """An auto-commit went: the next is due one interval later (Kafka resets the timer as it sends)."""
        self.in_flight = True
        self.next_ms = now_ms + self.interval_ms

    def answered(self, now_ms: int, *, retriable: bool) -> None:
        """Its answer came (or none, in time): after a retriable failure the next goes after the back-off."""
        self.in_flight = False
        if retriable:
            self.next_ms = now_ms + self.retry_backoff_ms

    def reset(self, now_ms: int) -> None:
        """A join or a reconciliation completed: the interval starts again (Kafka's `onJoinComplete`,
        `resetAutoCommitTimer`)."""
        self.next_ms = now_ms + self.interval_ms


class AsyncAutoCommit:
    """Sends the periodic auto-commit on a thread of its own; the poll loop calls `maybe_commit` each turn.

    `commit()` sends the positions that moved and handles the answer (the
    consumer's `_commit_positions`); it returns the error, or None if nothing
    was sent. `retriable(error)` says whether the next one goes after the back-off.
    """

    def __init__(self, timer: AutoCommitTimer, commit: Callable[[], ErrorCode | None],
                 retriable: Callable[[ErrorCode | None], bool], *, name: str):
        self.timer = timer
        self._commit = commit
        self._retriable = retriable
        self._name = name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failure: Exception | None = None

    def maybe_commit(self, now_ms: int) -> None:
        """Send an auto-commit if one is due (and none is in flight); never waits for it."""
        with self._lock:
            if not self.timer.due(now_ms):
                return
            self.timer.sent(now_ms)
            self._thread = threading.Thread(target=self._run, name=f"auto-commit-{self._name}", daemon=True)
            self._thread.start()

    def reset(self, now_ms: int) -> None:
        with self._lock:
            self.timer.reset(now_ms)

    def raise_failure(self) -> None:
        """Raise, in the poll loop, what stopped the last auto-commit and must stop the consumer."""
        with self._lock:
            failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def wait(self, timeout_s: float) -> None:
        """Wait for the auto-commit in flight, if any (before the commit of a close)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self) -> None:
        error: ErrorCode | None = None
        try:
            error = self._commit()
        except Exception as exc:  # noqa: BLE001 - kept for the poll loop, which raises it
            with self._lock:
                self._failure = exc
        finally:
            with self._lock:
                self.timer.answered(monotonic_ms(), retriable=self._retriable(error))
