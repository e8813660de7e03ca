"""Fetching one partition: Kafka 0.8's `ConsumerFetcherThread`, one thread per owned partition.

The fetcher asks the partition's leader for records from its position,
records a `processed` event for every record, and advances. It finds the
leader with a `Metadata` request to any broker it knows (as 0.8's fetcher
manager did with TopicMetadataRequest), and finds it again after
NOT_LEADER_OR_FOLLOWER or a broken connection.

It never looks at ZooKeeper: whatever the consumer's session is doing
(SUSPENDED, even expired), an owned partition keeps being fetched until the
rebalance thread stops this fetcher.
"""

from __future__ import annotations

import threading

from lab_cluster.broker.client import find_leader
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import ErrorCode, WireClient, WireError


class PartitionFetcher:
    def __init__(self, topic: str, partition: int, position: int, thread_id: str, trace: TraceRecorder,
                 brokers: dict[int, tuple[str, int]], *, max_records: int = 500, max_wait_ms: int = 100,
                 processing_ms: int = 0):
        self.topic, self.partition = topic, partition
        self.position = position
        self.thread_id = thread_id
        self.trace = trace
        self.brokers = dict(brokers)
        self.max_records, self.max_wait_ms = max_records, max_wait_ms
        self.processing_s = processing_ms / 1000
        self._stop = threading.Event()
        self._client: WireClient | None = None
        self._thread = threading.Thread(target=self._run, name=f"fetch-{topic}-{partition}", daemon=True)

    def start(self) -> PartitionFetcher:
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop after the current request; returns the position (next offset to consume)."""
        self._stop.set()
        self._thread.join(30)
        if self._client is not None:
            self._client.close()
        return self.position

    def _leader_client(self) -> WireClient | None:
        leader = find_leader(self.brokers, self.topic, self.partition)
        return WireClient(*leader, client_id=self.thread_id, timeout_s=10) if leader else None

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._client is None:
                self._client = self._leader_client()
                if self._client is None:
                    self._stop.wait(0.1)
                    continue
            try:
                records = self._client.call("Fetch", topic=self.topic, partition=self.partition,
                                            offset=self.position, max_records=self.max_records,
                                            max_wait_ms=self.max_wait_ms)["records"]
            except WireError as exc:
                if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise  # a lab bug: positions come from committed offsets and the log's own ends
                self._client.close()
                self._client = None
                self._stop.wait(0.05)
                continue
            except ConnectionError:
                self._client = None
                self._stop.wait(0.05)
                continue
            for record in records:
                if self.processing_s and self._stop.wait(self.processing_s):  # the application's work
                    break
                if self._stop.is_set():
                    break  # stopped mid-batch: what is not processed stays for the next owner
                self.trace.record("processed", topic=self.topic, partition=self.partition,
                                  offset=record["offset"], member=self.thread_id)
                self.position = record["offset"] + 1
