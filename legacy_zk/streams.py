"""Kafka 0.8's streams: fetchers queue chunks, and one iterator per stream processes them in turn.

A 0.8 consumer does not process in its fetcher threads. `createMessageStreams`
gives the application `streams` streams (one per consumer thread id), each a
`KafkaStream` over a queue of at most `queued.max.message.chunks` (2) chunks.
A fetcher appends the records of each fetch of a partition as one chunk to
the queue of the stream that owns the partition, and advances the
partition's *fetched* offset (`PartitionTopicInfo.enqueue`); it blocks while
that queue is full. The application's thread for a stream iterates it
(`ConsumerIterator`): it takes the chunks in turn, whichever partition they
are of, and, as it hands each message to the application, advances that
partition's *consumed* offset, which is what a commit writes. So the
partitions that share a stream are processed one chunk at a time, not at
once, and a backlog is worked through at one stream's pace.

A rebalance stops the fetchers, then clears every stream's queue and its
iterator's current chunk (`closeFetchersForQueues`: what was fetched and not
handed out is fetched again by the next owner), then commits. A message the
application already has is processed to its end (0.8 does not interrupt the
application), so its `processed` event may come after the clear.

    chunk of p0 (fetcher 0) ─┐
    chunk of p1 (fetcher 1) ─┼─> stream queue (2 chunks) ─> iterator: p0's records, then p1's, ...
    chunk of p0 (fetcher 0) ─┘   full: the fetcher waits      each handed out advances its consumed offset

Departure, stated: a chunk is one fetch's records (up to `fetch.max.records`,
the lab's count where 0.8 has `fetch.message.max.bytes`). Two quirks of 0.8's
iterator are not modelled because no lab chunk can show them (a chunk starts
at the fetched offset, never below the consumed one, and a new fetcher starts
from the consumed offset): it resets the consumed offset to a chunk's fetch
offset when it lags it, and it hands out a chunk's last message even when it
is below the consumed offset.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

from lab_cluster.trace import TraceRecorder

#: `queued.max.message.chunks` (ConsumerConfig.MaxQueuedChunks)
QUEUED_MAX_MESSAGE_CHUNKS = 2


@dataclass
class PartitionTopicInfo:
    """One owned partition's offsets (0.8's `PartitionTopicInfo`): where the fetcher is, and where the
    application is (the offset a commit writes)."""

    topic: str
    partition: int
    thread_id: str
    consumed: int
    fetched: int = field(default=-1)

    def __post_init__(self):
        if self.fetched < 0:
            self.fetched = self.consumed


@dataclass
class _Chunk:
    info: PartitionTopicInfo
    records: list[dict]
    generation: int  # the stream's generation when queued: a clear makes it stale


class Stream:
    """One stream: its chunk queue and the application thread that iterates it."""

    def __init__(self, thread_id: str, trace: TraceRecorder, *, processing_ms: int = 0,
                 max_chunks: int = QUEUED_MAX_MESSAGE_CHUNKS):
        self.thread_id = thread_id
        self.trace = trace
        self.processing_s = processing_ms / 1000
        self._queue: queue.Queue[_Chunk] = queue.Queue(maxsize=max_chunks)
        self._lock = threading.Lock()
        self._generation = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._iterate, name=f"stream-{thread_id}", daemon=True)

    def start(self) -> Stream:
        self._thread.start()
        return self

    def enqueue(self, info: PartitionTopicInfo, records: list[dict], stopped: threading.Event) -> bool:
        """`PartitionTopicInfo.enqueue`: queue one fetch's records as a chunk, waiting while the queue is full,
        then advance the fetched offset; False if `stopped` (the fetcher's) or the stream stopped first."""
        if not records:
            return True
        with self._lock:
            chunk = _Chunk(info, records, self._generation)
        while not (stopped.is_set() or self._stop.is_set()):
            try:
                self._queue.put(chunk, timeout=0.1)
            except queue.Full:
                continue
            info.fetched = records[-1]["offset"] + 1
            return True
        return False

    def clear(self) -> None:
        """`clearFetcherQueues`: drop the queued chunks and the one being iterated (after its current message)."""
        with self._lock:
            self._generation += 1
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break

    def stop(self) -> None:
        """Shut the stream down: the iterator ends after the message in hand (0.8's shutdown command)."""
        self._stop.set()
        self.clear()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(30)

    def _iterate(self) -> None:
        """`ConsumerIterator`: chunk after chunk; each message handed out advances its consumed offset, then the
        application spends `lab.processing.ms` on it and it is `processed`."""
        while not self._stop.is_set():
            try:
                chunk = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            for record in chunk.records:
                with self._lock:
                    if chunk.generation != self._generation or self._stop.is_set():
                        break  # cleared: the rest is fetched again by whoever owns the partition next
                    if record["offset"] < chunk.info.consumed:
                        continue  # already consumed (the iterator skips what it was handed before)
                    chunk.info.consumed = record["offset"] + 1  # `resetConsumeOffset`, as it is handed out
                if self.processing_s:
                    self._stop.wait(self.processing_s)  # the application's work, to its end
                self.trace.record("processed", topic=chunk.info.topic, partition=chunk.info.partition,
                                  offset=record["offset"], member=self.thread_id)
