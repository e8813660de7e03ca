"""The producer for a real system's brokers: the lab producer's job (`lab_cluster/producer.py`) in Kafka's own
protocol, with kafka-python's `KafkaProducer`.

Every `batch_interval_s` it sends `rate x interval` messages to each partition, named
`"<topic>/<partition>/<sequence>"` as the lab producer names them, and records each one its brokers
acknowledged as `produced` (topic, partition, offset): what duplicates and gaps are counted against. It asks
for every in-sync replica's acknowledgement (`acks` all), so a broker killed under it (broker churn) loses no
acknowledged message: the partition's next leader has it.

Following the topic. It starts with the `--partitions` it is given; before each batch it reads the topic's
partitions from its metadata (kafka-python's cache), which it asks its brokers for every `REFRESH_MS`
(`metadata.max.age.ms`), and from then on writes to every partition the metadata names: the partitions a `grow`
adds get messages within about `REFRESH_MS` of the brokers knowing them. It is the lab's load, not a system under
test: a Kafka producer left to its defaults would learn of them only at its next metadata refresh
(`metadata.max.age.ms`, 5 minutes), and a design's delay to process the new partitions would be the producer's as
much as its own. The lab's producer (`lab_cluster/producer.py`) watches the topic's znode and learns at once; this
one is not told where ZooKeeper is (KRaft brokers keep nothing there), so a ZooKeeper-era design whose consumers
learn faster than `REFRESH_MS` may wait for it.

How it departs from the lab producer: it does not resend (`retries` 0). A send that failed (its leader was
killed, or had not yet been replaced) is recorded as `produce_failed` and not resent, so a message is never
written twice by the producer; one whose answer was lost though it landed would be processed without a
`produced` record.

Run as a process::

    python -m real_systems.kafka_producer --bootstrap 127.0.0.1:9092 --topic t --partitions 4 --rate 2 \\
        --trial-dir DIR [--api-version 0.8.2]
"""

from __future__ import annotations

import argparse
import sys
import threading

from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

from lab_cluster.processes import add_owner_argument, serve_until_terminated
from lab_cluster.trace import TraceRecorder

#: how often the producer asks its brokers for the topic's metadata (`metadata.max.age.ms`)
REFRESH_MS = 250


class RealProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_partition: float,
                 trace: TraceRecorder, *, api_version: str | None = None, batch_interval_s: float = 0.05,
                 refresh_ms: int = REFRESH_MS, client=None):
        """`client`: a `KafkaProducer`'s stand-in (`send`, `partitions_for`, `flush`, `close`), for tests;
        None: kafka-python's, on `bootstrap`."""
        version = tuple(int(x) for x in api_version.split(".")) if api_version else None
        self.producer = client or KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", retries=0,
                                                linger_ms=0, api_version=version, client_id="lab-producer",
                                                metadata_max_age_ms=refresh_ms)
        self.topic, self.partitions, self.rate, self.interval = topic, partitions, rate_per_partition, batch_interval_s
        self.trace = trace
        self.produced = 0
        self._sequence = dict.fromkeys(range(partitions), 0)  # the next message's number, per partition
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> RealProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sending, give the sends under way 10 s to be answered, and close. Sends still unanswered then
        (their leader gone, none elected yet) are given up: neither `produced` nor `produce_failed`."""
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self.producer.flush(timeout=10)
        except KafkaTimeoutError:
            print("producer: sends still unanswered after 10 s are given up", file=sys.stderr, flush=True)
        self.producer.close(timeout=0)

    def _run(self) -> None:
        owed = 0.0  # messages per partition due but not yet sent (the rate need not be a whole number per batch)
        while not self._stop.wait(self.interval):
            self.refresh_partitions()
            owed += self.rate * self.interval
            count, owed = int(owed), owed - int(owed)
            self.send_batch(count)

    def refresh_partitions(self) -> int:
        """Read the topic's partitions from the producer's metadata, and write to those it did not know yet from
        the batch that follows on, each numbered from 0 (a topic only grows: a metadata that names fewer, e.g. one
        not yet loaded, changes nothing). Returns how many partitions it writes to now."""
        try:
            known = self.producer.partitions_for(self.topic) or set()
        except KafkaError as error:  # no metadata within its wait (`max_block_ms`): the next batch asks again
            print(f"producer: the metadata of {self.topic} could not be read: {error!r}", file=sys.stderr, flush=True)
            return self.partitions
        count = max(known, default=-1) + 1
        if count > self.partitions:
            print(f"producer: {self.topic} has {count} partitions (it wrote to {self.partitions})", file=sys.stderr,
                  flush=True)
            self._sequence.update(dict.fromkeys(range(self.partitions, count), 0))
            self.partitions = count
        return self.partitions

    def send_batch(self, count: int) -> None:
        """Send `count` messages to each partition it knows, each numbered after the partition's last."""
        for partition in range(self.partitions):
            for _ in range(count):
                value = f"{self.topic}/{partition}/{self._sequence[partition]}"
                self._sequence[partition] += 1
                future = self.producer.send(self.topic, value.encode(), partition=partition)
                future.add_callback(self._acked, value)
                future.add_errback(self._failed, partition, value)

    def _acked(self, value: str, metadata) -> None:
        self.trace.record("produced", topic=metadata.topic, partition=metadata.partition, offset=metadata.offset,
                          value=value)
        self.produced += 1

    def _failed(self, partition: int, value: str, exc: Exception) -> None:
        self.trace.record("produce_failed", topic=self.topic, partition=partition, value=value,
                          error=type(exc).__name__)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m real_systems.kafka_producer")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second per partition")
    parser.add_argument("--api-version", default=None, help="the brokers' protocol version, e.g. 0.8.2")
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--design", default="cluster")
    add_owner_argument(parser)
    args = parser.parse_args()
    with TraceRecorder(args.trial_dir, trial=args.trial, design=args.design, actor="producer") as trace:
        producer = RealProducer(args.bootstrap, args.topic, args.partitions, args.rate, trace,
                                api_version=args.api_version).start()
        try:
            serve_until_terminated({"topic": args.topic, "rate": args.rate})
        finally:
            producer.stop()
            trace.record("producer_stopped", produced=producer.produced)


if __name__ == "__main__":
    main()
