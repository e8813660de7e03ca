"""When to heartbeat, and when to give up on the coordinator: Kafka's client `Heartbeat`, with no I/O.

Every method takes the time (`now_ms`) as an argument, so a test drives it
with a fake clock; the heartbeat thread (`consumer.py`) asks it what to do:

- `should_heartbeat(now)`: `heartbeat.interval.ms` has passed since the last
  heartbeat was sent (or the retry back-off since one failed);
- `time_to_next_heartbeat(now)`: how long the thread may sleep;
- `session_timeout_expired(now)`: no successful heartbeat for
  `session.timeout.ms`: the coordinator has surely evicted us, or is gone, so
  look it up again (Kafka marks the coordinator unknown); checked also while
  a heartbeat is in flight (`session_time_left(now)`), and the session starts
  again when the coordinator is found (`reset_session_timeout(now)`);
- `poll_timeout_expired(now)`: the application has not polled for
  `max.poll.interval.ms`: leave the group so the others can go on.

Worked example, heartbeat every 3 s, session 10 s::

    >>> hb = Heartbeat(session_timeout_ms=10_000, heartbeat_interval_ms=3_000, max_poll_interval_ms=300_000,
    ...                retry_backoff_ms=100, now_ms=0)
    >>> hb.should_heartbeat(2_999), hb.should_heartbeat(3_000)
    (False, True)
    >>> hb.sent_heartbeat(3_000); hb.time_to_next_heartbeat(4_000)
    2000
    >>> hb.fail_heartbeat(4_000); hb.time_to_next_heartbeat(4_000)   # no answer: retry after the back-off
    100
    >>> hb.session_timeout_expired(9_999), hb.session_timeout_expired(10_000), hb.session_time_left(7_500)
    (False, True, 2500)
"""

from __future__ import annotations


class Heartbeat:
    def __init__(self, *, session_timeout_ms: int, heartbeat_interval_ms: int, max_poll_interval_ms: int,
                 retry_backoff_ms: int, now_ms: int):
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.last_received_ms = now_ms  # the session counts from the last success
        self.last_poll_ms = now_ms
        self._next_due_ms = now_ms + heartbeat_interval_ms

    def sent_heartbeat(self, now_ms: int) -> None:
        self._next_due_ms = now_ms + self.heartbeat_interval_ms

    def fail_heartbeat(self, now_ms: int) -> None:
        self._next_due_ms = now_ms + self.retry_backoff_ms

    def received_heartbeat(self, now_ms: int) -> None:
        self.last_received_ms = now_ms

    def should_heartbeat(self, now_ms: int) -> bool:
        return now_ms >= self._next_due_ms

    def time_to_next_heartbeat(self, now_ms: int) -> int:
        return max(0, self._next_due_ms - now_ms)

    def session_timeout_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_received_ms >= self.session_timeout_ms

    def session_time_left(self, now_ms: int) -> int:
        """How long a heartbeat in flight may wait for its answer before the session is over (Java's heartbeat
        thread checks the session while one is in flight)."""
        return max(0, self.last_received_ms + self.session_timeout_ms - now_ms)

    def reset_session_timeout(self, now_ms: int) -> None:
        """The coordinator was found (again): the session counts from now (Java's `resetSessionTimeout`)."""
        self.last_received_ms = now_ms

    def reset_timeouts(self, now_ms: int) -> None:
        """A JoinGroup succeeded (Java's `HeartbeatThread.enable`): the session, the poll timer and the interval
        start afresh (Java's `resetTimeouts`)."""
        self.last_received_ms = now_ms
        self.last_poll_ms = now_ms
        self.sent_heartbeat(now_ms)

    def poll(self, now_ms: int) -> None:
        self.last_poll_ms = now_ms

    def poll_timeout_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_poll_ms >= self.max_poll_interval_ms
