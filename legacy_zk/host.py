"""A consumer host: N ZooKeeper-era consumers of one group in one process.

In-process (`ConsumerHost`), the consumers are threads; the CLI's `consumers`
command uses that. As its own process (`python -m legacy_zk.host ...`), a host
with `--count 1` is a consumer that a fault can pause or kill alone::

    python -m legacy_zk.host --zk 127.0.0.1:2181/lab --group g --topic t --count 1 \\
        --trial-dir DIR --name c3 --config rebalance.backoff.ms=500

It prints `READY {...}`, then one JSON line per state change, and on SIGTERM
stops its consumers gracefully (release, commit, deregister).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from lab_cluster.errors import LabError
from lab_cluster.processes import add_owner_argument, serve_until_terminated
from lab_cluster.properties import parse_overrides
from lab_cluster.trace import TraceRecorder

from .config import ConsumerConfig
from .consumer import LegacyConsumer


class ConsumerHost:
    def __init__(self, zk_connect: str, group: str, topics: list[str], count: int, trial_dir: str | Path, *,
                 name: str = "c", trial: str = "adhoc", overrides: dict | None = None,
                 on_change: Callable[[str, LegacyConsumer], None] | None = None):
        if count < 1:
            raise LabError(f"--count {count}: a host runs at least one consumer.", "Use --count 1 or more.")
        self.consumers: list[LegacyConsumer] = []
        self.traces: list[TraceRecorder] = []
        props = {"group.id": group, "zookeeper.connect": zk_connect, **(overrides or {})}
        configs = [ConsumerConfig.from_dict(props) for _ in range(count)]  # validate before starting anything
        for i, config in enumerate(configs):
            actor = name if count == 1 else f"{name}{i + 1}"
            trace = TraceRecorder(trial_dir, trial=trial, design="legacy", actor=actor)
            self.traces.append(trace)
            callback = (lambda c, a=actor: on_change(a, c)) if on_change else None
            self.consumers.append(LegacyConsumer(config, topics, trace, on_change=callback))

    def start(self) -> ConsumerHost:
        for consumer in self.consumers:
            consumer.start()
        return self

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer.stop()
        for trace in self.traces:
            trace.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m legacy_zk.host")
    parser.add_argument("--zk", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--name", default="c")
    parser.add_argument("--config", action="append", default=[], help="KEY=VALUE, Kafka 0.8 consumer config")
    add_owner_argument(parser)
    args = parser.parse_args()

    def report(actor: str, consumer: LegacyConsumer) -> None:
        print(json.dumps({"actor": actor, "state": consumer.state.value,
                          "partitions": sorted(p for _, p in consumer.assignment())}), flush=True)

    host = ConsumerHost(args.zk, args.group, args.topic, args.count, args.trial_dir, name=args.name,
                        trial=args.trial, overrides=parse_overrides(args.config), on_change=report).start()
    try:
        serve_until_terminated({"consumers": [c.consumer_id for c in host.consumers]})
    finally:
        host.stop()


if __name__ == "__main__":
    main()
