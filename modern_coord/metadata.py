"""What a classic consumer knows of its topics' partitions, and when it asks again: no I/O.

Two pieces of the Java client (3.9), each taking the time as an argument so a
test drives it with a fake clock:

- `MetadataTimer`, Kafka's `Metadata.timeToNextUpdate`: the consumer's
  metadata is refreshed `metadata.max.age.ms` after the last successful
  refresh (whatever caused that one: a periodic refresh, or a leader the
  fetcher could not find), and a failed attempt is tried again after
  `retry.backoff.ms`. Departure, stated: Kafka's back-off grows
  exponentially up to `retry.backoff.max.ms` (KIP-580, 3.7+); the lab's
  stays `retry.backoff.ms`. Kafka also refreshes at once when it is asked to
  (`requestUpdate`); the lab's fetcher asks directly (`Fetcher.refresh_metadata`);
- snapshots, Kafka's `ConsumerCoordinator.MetadataSnapshot`: {topic: partition
  count} of the topics the consumer follows (its subscription; the leader's,
  the whole group's). The leader keeps the one it assigned from
  (`assignmentSnapshot`); when its current one no longer `matches` it, it
  rejoins (`rejoinNeededOrPending`: "cached metadata has changed"). Kafka's
  snapshot also holds each partition's racks (when `client.rack` is set, for
  rack-aware assignors); the lab has no racks, so a count is all it holds.

`grown` says which topics have more partitions than the consumer knew (the
`partitions_seen` event, `consumer.py`).

    >>> timer = MetadataTimer(max_age_ms=1_000, retry_backoff_ms=100)
    >>> timer.due(0)                      # nothing known yet: at once
    True
    >>> timer.update(0); timer.due(999), timer.due(1_000)
    (False, True)
    >>> timer.failed_update(1_000); timer.time_to_next_update(1_050)
    50
    >>> snapshot({"t": 6, "u": 2}, {"t"})
    {'t': 6}
    >>> grown({"t": 4, "u": 2}, {"t": 6, "u": 2, "v": 3})
    [('t', 4, 6)]
"""

from __future__ import annotations

from collections.abc import Iterable


class MetadataTimer:
    """Kafka's `Metadata` timing: when the next refresh is due."""

    def __init__(self, *, max_age_ms: int, retry_backoff_ms: int):
        self.max_age_ms = max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.last_successful_refresh_ms: int | None = None  # none yet: a refresh is due at once
        self.last_refresh_ms: int | None = None  # the last attempt, successful or not

    def time_to_next_update(self, now_ms: int) -> int:
        """Kafka's `timeToNextUpdate`: until the metadata expires, and no sooner than the back-off after the last
        attempt allows."""
        expire = 0 if self.last_successful_refresh_ms is None \
            else max(self.last_successful_refresh_ms + self.max_age_ms - now_ms, 0)
        allow = 0 if self.last_refresh_ms is None else max(self.last_refresh_ms + self.retry_backoff_ms - now_ms, 0)
        return max(expire, allow)

    def due(self, now_ms: int) -> bool:
        return self.time_to_next_update(now_ms) == 0

    def update(self, now_ms: int) -> None:
        """A refresh succeeded (Kafka's `Metadata.update`)."""
        self.last_refresh_ms = self.last_successful_refresh_ms = now_ms

    def failed_update(self, now_ms: int) -> None:
        """No broker answered (Kafka's `Metadata.failedUpdate`): the next attempt waits for the back-off."""
        self.last_refresh_ms = now_ms


def snapshot(partition_counts: dict[str, int], topics: Iterable[str]) -> dict[str, int]:
    """Kafka's `MetadataSnapshot` of `topics`: the partition count of each one the metadata knows."""
    wanted = set(topics)
    return {t: n for t, n in sorted(partition_counts.items()) if t in wanted and n > 0}


def grown(before: dict[str, int], now: dict[str, int]) -> list[tuple[str, int, int]]:
    """(topic, count known before, count now) for each topic known before that has more partitions now; a topic
    not known before (just subscribed to, or just created) has not grown."""
    return [(t, before[t], n) for t, n in sorted(now.items()) if before.get(t) and n > before[t]]
