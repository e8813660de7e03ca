"""The lab's clocks in milliseconds, and a fake one for tests: one place, so that a name says which clock.

- `monotonic_ms`: for intervals and deadlines (timers, sessions, heartbeats);
  never a timestamp, never compared across machines;
- `wall_clock_ms`: for timestamps others read (the `timestamp` Kafka writes
  into its znodes), never for measuring time;
- `FakeClock`: a clock that moves only when told, for the I/O-free cores
  (the coordinator, RocketMQ's broker tables) tested without waiting::

    >>> clock = FakeClock(start_ms=0)
    >>> clock.advance(1_500); clock()
    1500
"""

from __future__ import annotations

import time


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told: `clock()` is now in ms."""

    def __init__(self, start_ms: int = 1_000_000):
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
