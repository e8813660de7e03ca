"""Fetching for the poll loop: partition leaders from Metadata, one Fetch per owned partition per round.

The Java client sends one Fetch per broker for all its partitions; the lab's
brokers serve one partition per request, so a round is one request per
owned partition, each with no wait, and the poll loop pauses briefly only
when a whole round brought nothing. Leaders come from a `Metadata` request
to any broker the consumer knows, refreshed when a partition's leader is not
known (a partition just created has none until the controller elects one),
after NOT_LEADER_OR_FOLLOWER or a broken connection, and, when the consumer
asks (`maybe_refresh_metadata`: the classic consumer's poll loop),
`metadata.max.age.ms` after the last successful refresh (`metadata.py`:
`MetadataTimer`). Each successful refresh moves `metadata_version` on (Kafka's
`Metadata.updateVersion`), so the consumer sees that its snapshot may be out
of date. It never talks to ZooKeeper.

A position past the end of the leader's log (OFFSET_OUT_OF_RANGE: a broker
that took a partition over holds less of it than the one before, as after a
broker stopped with records not yet flushed) is reset by `auto.offset.reset`,
as Kafka's consumer does (`FetchCollector.handleInitializeErrors`: "Fetch
position ... is out of range ..., resetting offset", then `requestOffsetReset`);
the reset is reported (`on_reset`). Seen in a standard run: a KIP-848 member's
poll thread died of it in the conformance experiment's broker bounce.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lab_cluster.broker.client import metadata_from_any
from lab_cluster.clock import monotonic_ms
from lab_cluster.wire import ErrorCode, WireClient, WireError

from .member import TopicPartition
from .metadata import MetadataTimer


def record_resets(trace, policy: str, member: Callable[[], tuple[str, int]]) -> Callable[[TopicPartition, int, int],
                                                                                          None]:
    """An `on_reset` that records each reset in `trace` as an `offset_reset` event: the partition, the position
    out of range and the one `policy` gave, and the member and generation (or epoch) `member()` gives then."""
    def on_reset(tp: TopicPartition, was: int, now: int) -> None:
        member_id, generation = member()
        trace.record("offset_reset", topic=tp[0], partition=tp[1], position=was, offset=now, policy=policy,
                     member=member_id, generation=generation)
    return on_reset


class Fetcher:
    def __init__(self, bootstrap: list[tuple[str, int]], client_id: str, *, max_records: int, timeout_s: float,
                 processing_ms: int = 0, offset_reset: str = "latest",
                 on_reset: Callable[[TopicPartition, int, int], None] | None = None,
                 metadata_max_age_ms: int = 300000, retry_backoff_ms: int = 100):
        self.bootstrap = list(bootstrap)
        self.offset_reset = offset_reset  # `auto.offset.reset`: earliest or latest
        self.on_reset = on_reset  # (partition, position out of range, position reset to)
        self.processing_s = processing_ms / 1000
        self.client_id = client_id
        self.max_records = max_records
        self.timeout_s = timeout_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self.partition_counts: dict[str, int] = {}
        #: how many refreshes have succeeded (Kafka's `Metadata.updateVersion`)
        self.metadata_version = 0
        self.metadata_timer = MetadataTimer(max_age_ms=metadata_max_age_ms, retry_backoff_ms=retry_backoff_ms)
        self._clients: dict[int, WireClient] = {}

    def maybe_refresh_metadata(self, now_ms: int) -> bool:
        """Refresh if `metadata.max.age.ms` has passed since the last successful refresh (and the back-off since
        the last failed one): Kafka's `NetworkClient` metadata updater, at each poll. True if it refreshed."""
        if not self.metadata_timer.due(now_ms):
            return False
        return self.refresh_metadata(now_ms)

    def refresh_metadata(self, now_ms: int | None = None) -> bool:
        """Ask brokers in turn (known ones first, then the bootstrap list) until one answers."""
        metadata = self._ask_metadata()
        now_ms = monotonic_ms() if now_ms is None else now_ms
        if metadata is None:
            self.metadata_timer.failed_update(now_ms)
            return False
        self.brokers = {int(i): (b["host"], b["port"]) for i, b in metadata["brokers"].items()}
        self.leaders = {(t, int(p)): leader for t, parts in metadata["topics"].items() for p, leader in parts.items()}
        self.partition_counts = {t: len(parts) for t, parts in metadata["topics"].items()}
        self.metadata_version += 1
        self.metadata_timer.update(now_ms)
        return True

    def _ask_metadata(self) -> dict | None:
        return metadata_from_any(list(self.brokers.values()) + self.bootstrap, client_id=self.client_id,
                                 timeout_s=min(5.0, self.timeout_s))

    def client_for(self, tp: TopicPartition) -> WireClient | None:
        leader = self.leaders.get(tp)
        if leader not in self.brokers:
            return None
        if leader not in self._clients:
            self._clients[leader] = WireClient(*self.brokers[leader], client_id=self.client_id,
                                               timeout_s=self.timeout_s)
        return self._clients[leader]

    def _forget(self, tp: TopicPartition) -> None:
        leader = self.leaders.pop(tp, None)
        client = self._clients.pop(leader, None)
        if client is not None:
            client.close()

    def list_offset(self, tp: TopicPartition, which: str) -> int | None:
        client = self.client_for(tp)
        if client is None:
            self.refresh_metadata()
            return None
        try:
            return client.call("ListOffsets", topic=tp[0], partition=tp[1], which=which)["offset"]
        except (ConnectionError, WireError):
            self._forget(tp)
            return None

    def fetch(self, tp: TopicPartition, position: int, should_stop: Callable[[], bool],
              on_record: Callable[[TopicPartition, int], None]) -> int:
        """Fetch once from `position`; calls `on_record` per record; returns the new position."""
        client = self.client_for(tp)
        if client is None:
            self.refresh_metadata()
            return position
        try:
            records = client.call("Fetch", topic=tp[0], partition=tp[1], offset=position,
                                  max_records=self.max_records, max_wait_ms=0)["records"]
        except WireError as exc:
            if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE:
                return self._reset(tp, position)
            self._forget(tp)
            return position
        except ConnectionError:
            self._forget(tp)
            return position
        for record in records:
            if self.processing_s:
                time.sleep(self.processing_s)  # the application's work on the record
            if should_stop():
                break  # what is not processed stays for the next owner
            on_record(tp, record["offset"])
            position = record["offset"] + 1
        return position

    def _reset(self, tp: TopicPartition, position: int) -> int:
        """The position `auto.offset.reset` gives (the same one if the leader cannot be asked yet: the next
        fetch finds it out of range again)."""
        reset = self.list_offset(tp, self.offset_reset)
        if reset is None:
            return position
        if self.on_reset is not None:
            self.on_reset(tp, position, reset)
        return reset

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
