"""Kafka 0.8's streams (`legacy_zk/streams.py`): the partitions of one stream are processed one chunk at a time;
and its leader finder (`legacy_zk/fetching.py`), one per consumer.

No server: two fetchers' chunks go through one stream's queue, as two owned
partitions' do in a 0.8 consumer with one stream.
"""

from __future__ import annotations

import threading

from conftest import trace_events, wait_for

from lab_cluster.trace import TraceRecorder
from legacy_zk.streams import PartitionTopicInfo, Stream


def _records(first: int, count: int) -> list[dict]:
    return [{"offset": o} for o in range(first, first + count)]


def _runs(partitions: list[int]) -> list[tuple[int, int]]:
    """[(partition, length)] of the consecutive runs in processing order."""
    runs: list[tuple[int, int]] = []
    for p in partitions:
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def test_one_stream_processes_its_partitions_chunk_after_chunk_not_at_once(tmp_path):
    with TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="c1") as trace:
        stream = Stream("c1-0", trace, processing_ms=2).start()
        infos = [PartitionTopicInfo("t", p, "c1-0", consumed=0) for p in (0, 1)]
        stopped = threading.Event()

        def fetcher(info):  # three chunks of five records each, queued as fast as the queue takes them
            for first in (0, 5, 10):
                assert stream.enqueue(info, _records(first, 5), stopped)

        threads = [threading.Thread(target=fetcher, args=(info,)) for info in infos]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_for(lambda: all(info.consumed == 15 for info in infos), "both partitions to be consumed")
        stream.stop()
    processed = trace_events(tmp_path, "c1", "processed")
    # each chunk is worked through whole before the next, whichever partition it is of
    # (two chunks of one partition in a row make one run of 10; a partition per thread would interleave them)
    runs = _runs([e["partition"] for e in processed])
    assert len(runs) >= 2 and all(length % 5 == 0 for _, length in runs), runs
    for p in (0, 1):
        assert [e["offset"] for e in processed if e["partition"] == p] == list(range(15))
    assert all(info.fetched == 15 for info in infos)


def test_a_clear_drops_what_was_fetched_and_not_handed_out(tmp_path):
    with TraceRecorder(tmp_path, trial="t", design="zookeeper", actor="c1") as trace:
        stream = Stream("c1-0", trace, max_chunks=2)  # not started: nothing is handed out yet
        info = PartitionTopicInfo("t", 0, "c1-0", consumed=3)
        stopped = threading.Event()
        assert stream.enqueue(info, _records(3, 4), stopped) and stream.enqueue(info, _records(7, 4), stopped)
        assert info.fetched == 11 and info.consumed == 3
        stopped_soon = threading.Timer(0.3, stopped.set)
        stopped_soon.start()
        assert not stream.enqueue(info, _records(11, 4), stopped)  # the queue is full: the fetcher waits, then stops
        stream.clear()  # a rebalance: the next owner starts from the consumed offset, 3
        stream.start()
        stream.stop()
    assert info.consumed == 3 and trace_events(tmp_path, "c1", "processed") == []


def test_one_leader_finder_reads_the_brokers_once_a_round_for_every_partition():
    """0.8 has one LeaderFinderThread per consumer: the partitions that lost their leader within one round share
    its ZooKeeper read of the brokers."""
    from legacy_zk.fetching import LeaderFinder

    reads = []
    finder = LeaderFinder(lambda: reads.append(1) or {1: ("127.0.0.1", 9092)}, refresh_leader_backoff_ms=60_000)
    assert [finder.brokers() for _ in range(4)] == [{1: ("127.0.0.1", 9092)}] * 4 and len(reads) == 1
    every_time = LeaderFinder(lambda: reads.append(1) or {}, refresh_leader_backoff_ms=0)
    every_time.brokers(), every_time.brokers()
    assert len(reads) == 3
