"""The producer for a real system's brokers: the lab producer's job (`lab_cluster/producer.py`) in Kafka's own
protocol, with kafka-python's `KafkaProducer`.

Every `batch_interval_s` it sends `rate x interval` messages to each partition, named
`"<topic>/<partition>/<sequence>"` as the lab producer names them, and records each one its brokers
acknowledged as `produced` (topic, partition, offset): what duplicates and gaps are counted against. It asks
for every in-sync replica's acknowledgement (`acks` all), so a broker killed under it (broker churn) loses no
acknowledged message: the partition's next leader has it.

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
from kafka.errors import KafkaTimeoutError

from lab_cluster.processes import add_owner_argument, serve_until_terminated
from lab_cluster.trace import TraceRecorder


class RealProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_partition: float,
                 trace: TraceRecorder, *, api_version: str | None = None, batch_interval_s: float = 0.05):
        version = tuple(int(x) for x in api_version.split(".")) if api_version else None
        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", retries=0, linger_ms=0,
                                      api_version=version, client_id="lab-producer")
        self.topic, self.partitions, self.rate, self.interval = topic, partitions, rate_per_partition, batch_interval_s
        self.trace = trace
        self.produced = 0
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
        sequence = dict.fromkeys(range(self.partitions), 0)
        owed = 0.0  # messages per partition due but not yet sent (the rate need not be a whole number per batch)
        while not self._stop.wait(self.interval):
            owed += self.rate * self.interval
            count, owed = int(owed), owed - int(owed)
            for partition in range(self.partitions):
                for _ in range(count):
                    value = f"{self.topic}/{partition}/{sequence[partition]}"
                    sequence[partition] += 1
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
