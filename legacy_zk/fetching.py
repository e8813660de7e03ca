"""Fetching one partition: Kafka 0.8's `ConsumerFetcherThread`, one thread per owned partition.

The fetcher asks the partition's leader for records from the partition's
fetched offset and queues them, one chunk per fetch, to the stream that
owns the partition (`streams.py`: the stream's iterator processes them),
waiting while that stream's queue is full. It finds the leader with a
`Metadata` request to the brokers it was started with. After an error
(NOT_LEADER_OR_FOLLOWER, a broken connection) it finds it again through the
consumer's one `LeaderFinder`, as 0.8's `LeaderFinderThread`: the brokers
read again from ZooKeeper once a round for all the partitions that lost
their leader (the reads are the consumer's; they wait for a connection as
every 0.8 read does, so a consumer cut off from ZooKeeper cannot follow a
moved leader), then `Metadata`; a round every `refresh.leader.backoff.ms`
(200 ms) at most. (0.8 sends one Metadata request a round for them all, the
lab one per partition: brokers' requests, not ZooKeeper's.)

Otherwise it never looks at ZooKeeper: whatever the consumer's session is
doing (SUSPENDED, even expired), an owned partition keeps being fetched until
the rebalance thread stops this fetcher.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lab_cluster.broker.client import find_leader
from lab_cluster.wire import ErrorCode, WireClient, WireError

from .streams import PartitionTopicInfo, Stream

Brokers = dict[int, tuple[str, int]]


class LeaderFinder:
    """A consumer's leader finder (0.8's `LeaderFinderThread`, shared by its fetchers): `brokers()` reads them
    from ZooKeeper once a round, `refresh.leader.backoff.ms`, however many partitions ask within it."""

    def __init__(self, read_brokers: Callable[[], Brokers], refresh_leader_backoff_ms: int = 200):
        self.read_brokers = read_brokers
        self.backoff_s = refresh_leader_backoff_ms / 1000
        self._lock = threading.Lock()
        self._brokers: Brokers | None = None
        self._read_at = float("-inf")

    def brokers(self) -> Brokers | None:
        """The brokers of this round (read now if the last round is over); None if the read failed."""
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= self.backoff_s:
                self._read_at = now
                try:
                    self._brokers = self.read_brokers()
                except Exception:  # noqa: BLE001 - 0.8: "Failed to find leader", and the next round
                    self._brokers = None
            return None if self._brokers is None else dict(self._brokers)


class PartitionFetcher:
    def __init__(self, info: PartitionTopicInfo, stream: Stream, brokers: Brokers, *,
                 finder: LeaderFinder | None = None, max_records: int = 500, max_wait_ms: int = 100):
        self.info, self.stream = info, stream
        self.topic, self.partition = info.topic, info.partition
        self.thread_id = info.thread_id
        self.brokers = dict(brokers)
        self.finder = finder
        self.max_records, self.max_wait_ms = max_records, max_wait_ms
        self._lost_leader = False  # the next lookup is the leader finder's, with the brokers read again
        self._next_lookup = 0.0   # monotonic time before which the leader finder does not try again
        self._stop = threading.Event()
        self._client: WireClient | None = None
        self._thread = threading.Thread(target=self._run, name=f"fetch-{info.topic}-{info.partition}",
                                        daemon=True)

    def start(self) -> PartitionFetcher:
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the thread to stop after its current request, without waiting for it (`stop` waits)."""
        self._stop.set()

    def stop(self) -> None:
        """Stop after the current request (or the wait for room in the stream's queue)."""
        self._stop.set()
        self._thread.join(30)
        if self._client is not None:
            self._client.close()

    def _leader_client(self) -> WireClient | None:
        if self._lost_leader:
            # `LeaderFinderThread.doWork`: the brokers from ZooKeeper, Metadata, then it sleeps the back-off
            if self._stop.wait(max(0.0, self._next_lookup - time.monotonic())):
                return None
            if self.finder is not None:
                self._next_lookup = time.monotonic() + self.finder.backoff_s
                brokers = self.finder.brokers()
                if brokers is None:
                    return None
                self.brokers = brokers
        leader = find_leader(self.brokers, self.topic, self.partition)
        if leader is None:
            self._lost_leader = True
            return None
        self._lost_leader = False
        return WireClient(*leader, client_id=self.thread_id, timeout_s=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._client is None:
                self._client = self._leader_client()
                if self._client is None:
                    continue  # the leader finder's next round (it waits the back-off itself)
            try:
                records = self._client.call("Fetch", topic=self.topic, partition=self.partition,
                                            offset=self.info.fetched, max_records=self.max_records,
                                            max_wait_ms=self.max_wait_ms)["records"]
            except WireError as exc:
                if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise  # a lab bug: positions come from committed offsets and the log's own ends
                self._client.close()
                self._client, self._lost_leader = None, True
                continue
            except ConnectionError:
                self._client, self._lost_leader = None, True
                continue
            self.stream.enqueue(self.info, records, self._stop)
