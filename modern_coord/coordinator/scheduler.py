"""Delayed operations on a clock: the coordinator's timers, testable without waiting.

Kafka's coordinator keeps its timeouts in purgatories (`DelayedJoin`,
`InitialDelayedJoin`, `DelayedHeartbeat`). Here one `Scheduler` holds every
timer, keyed so that rescheduling replaces and `cancel` removes; `run_due()`
fires what is due. The clock is a function returning milliseconds, so a test
drives time by hand::

    >>> clock = FakeClock()
    >>> timers = Scheduler(clock)
    >>> fired = []
    >>> timers.schedule(("heartbeat", "m1"), 10_000, lambda: fired.append("m1 expired"))
    >>> clock.advance(9_999); _ = timers.run_due(); fired
    []
    >>> clock.advance(1); _ = timers.run_due(); fired
    ['m1 expired']

The broker runs `run_due()` from a ticker thread (`service.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from lab_cluster.clock import FakeClock, monotonic_ms

__all__ = ["FakeClock", "Scheduler"]


class Scheduler:
    def __init__(self, clock: Callable[[], int] = monotonic_ms):
        self.clock = clock
        self._timers: dict[Hashable, tuple[int, Callable[[], None]]] = {}

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        self._timers[key] = (self.clock() + delay_ms, action)

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)

    def run_due(self) -> int:
        """Fire every timer whose deadline has passed, earliest first; returns how many fired."""
        fired = 0
        while True:
            now = self.clock()
            due = [(d, k) for k, (d, _) in self._timers.items() if d <= now]
            if not due:
                return fired
            _, key = min(due, key=lambda x: x[0])
            _, action = self._timers.pop(key)
            action()
            fired += 1
