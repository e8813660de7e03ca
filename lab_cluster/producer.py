"""The producer: appends messages to every partition at a steady rate and records each one.

One thread per partition sends a Produce request every `batch_interval_s`
carrying `rate x interval` messages, whose values name them:
`"<topic>/<partition>/<sequence>"`. Each message the leader acknowledges is
recorded in the trace as `produced` with its (topic, partition, offset): that
record is what duplicates and gaps are counted against.

Following the topic. It watches the topic's znode and starts a thread for each
partition it names: every one at first, and those a `grow` adds, at once.

Following leadership. Leaders come from ZooKeeper (the partition state znodes,
watched). On NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or
UNKNOWN_TOPIC_OR_PARTITION the thread waits for the leader to change and retries.

A send whose connection broke may or may not have been appended. Resending
blindly could write a message twice, which would look like a consumer's
duplicate. So the thread first reads the partition from the offset after its
last acknowledged message (it is the only writer of its partitions) and records
whichever of its messages already landed, then resends the rest: the
idempotence that Kafka's producer later gained (`enable.idempotence`), done
the simple way.

Run as a process::

    python -m lab_cluster.producer --zk 127.0.0.1:2181 --topic t --rate 200 --trial-dir DIR
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from kazoo.client import KazooClient

from .broker import zk_layout as L
from .broker.admin import broker_addresses
from .processes import add_owner_argument, serve_until_terminated
from .trace import TraceRecorder
from .wire import ErrorCode, WireClient, WireError

RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


class Producer:
    def __init__(self, zk_connect: str, topic: str, rate_per_partition: float, trace: TraceRecorder, *,
                 batch_interval_s: float = 0.05, session_timeout_s: float = 6.0):
        self.topic = topic
        self.rate = rate_per_partition
        self.interval = batch_interval_s
        self.trace = trace
        self.zk = KazooClient(hosts=zk_connect, timeout=session_timeout_s)
        self._stop = threading.Event()
        self._leaders: dict[int, int] = {}
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._started: set[int] = set()  # the partitions a thread writes to
        self.produced = 0

    def start(self) -> Producer:
        self.zk.start(timeout=30)
        self.zk.DataWatch(L.topic_path(self.topic), self._on_topic)
        return self

    def _on_topic(self, data: bytes | None, stat, event=None) -> None:
        """Start a thread for every partition the topic's znode names and none has yet: all of them at first,
        then those a `grow` adds (the znode is rewritten). The producer is the lab's load, not a design under
        test: it learns of new partitions at once, so that a design's delay to process them is its own (Kafka's
        producer would wait for its metadata refresh, `metadata.max.age.ms`)."""
        if not data:
            return
        with self._changed:
            new = sorted(set(L.parse_topic_assignment(data)) - set(self._started))
            if self._stop.is_set():
                return
            for p in new:
                self._started.add(p)
                self.zk.DataWatch(L.partition_state_path(self.topic, p),
                                  lambda data, stat, event=None, p=p: self._on_state(p, data))
                t = threading.Thread(target=self._run_partition, args=(p,), name=f"produce-{p}", daemon=True)
                self._threads.append(t)
                t.start()

    def stop(self) -> None:
        with self._changed:
            self._stop.set()
            self._changed.notify_all()
        for t in list(self._threads):
            t.join(30)
        self.zk.stop()
        self.zk.close()

    def _on_state(self, partition: int, data: bytes | None) -> None:
        if data:
            with self._changed:
                self._leaders[partition] = json.loads(data)["leader"]
                self._changed.notify_all()

    # -- one partition ----------------------------------------------------------
    def _client_for(self, partition: int, clients: dict[int, WireClient]) -> WireClient | None:
        """The current leader's client, waiting a little for a leader if there is none."""
        with self._changed:
            leader = self._leaders.get(partition, L.NO_LEADER)
            if leader == L.NO_LEADER:
                self._changed.wait(0.2)
                return None
        if leader not in clients:
            address = broker_addresses(self.zk).get(leader)
            if address is None:
                time.sleep(0.05)
                return None
            clients[leader] = WireClient(*address, client_id=f"producer-{partition}", timeout_s=5)
        return clients[leader]

    def _run_partition(self, partition: int) -> None:
        clients: dict[int, WireClient] = {}
        sequence, acked_end, owed = 0, None, 0.0
        next_send = time.monotonic()
        while not self._stop.is_set():
            next_send += self.interval
            owed += self.rate * self.interval
            count, owed = int(owed), owed - int(owed)
            values = [f"{self.topic}/{partition}/{sequence + i}" for i in range(count)]
            sequence += count
            uncertain = False
            while values and not self._stop.is_set():
                client = self._client_for(partition, clients)
                if client is None:
                    continue
                try:
                    if acked_end is None:
                        acked_end = client.call("ListOffsets", topic=self.topic, partition=partition)["offset"]
                    if uncertain:
                        landed = self._record_landed(client, partition, acked_end, values)
                        acked_end += landed
                        values = values[landed:]
                        uncertain = False
                        if not values:
                            break
                    base = client.call("Produce", topic=self.topic, partition=partition, values=values)["base_offset"]
                    self._record(partition, base, values)
                    acked_end = base + len(values)
                    values = []
                except WireError as exc:
                    if exc.code not in RETRIABLE:
                        raise
                    time.sleep(0.05)
                except ConnectionError:
                    uncertain = True  # the batch may have been appended before the connection broke
                    clients.clear()
                    time.sleep(0.05)
            time.sleep(max(0.0, next_send - time.monotonic()))
        for client in clients.values():
            client.close()

    def _record_landed(self, client: WireClient, partition: int, acked_end: int, values: list[str]) -> int:
        """Record those of `values` already in the log after `acked_end`; return how many landed.

        A batch is appended whole or not at all, and this thread is the partition's
        only writer, so what landed is a prefix of `values` starting at `acked_end`.
        """
        records = client.call("Fetch", topic=self.topic, partition=partition, offset=acked_end,
                              max_records=len(values))["records"]
        landed = [r["value"] for r in records if r["value"] in set(values)]
        if landed:
            self._record(partition, acked_end, landed)
        return len(landed)

    def _record(self, partition: int, base: int, values: list[str]) -> None:
        for i, value in enumerate(values):
            self.trace.record("produced", topic=self.topic, partition=partition, offset=base + i, value=value)
        self.produced += len(values)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab_cluster.producer")
    parser.add_argument("--zk", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second per partition")
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--design", default="cluster")
    add_owner_argument(parser)
    args = parser.parse_args()
    with TraceRecorder(args.trial_dir, trial=args.trial, design=args.design, actor="producer") as trace:
        producer = Producer(args.zk, args.topic, args.rate, trace).start()
        try:
            serve_until_terminated({"topic": args.topic, "rate": args.rate})
        finally:
            producer.stop()
            trace.record("producer_stopped", produced=producer.produced)


if __name__ == "__main__":
    main()
