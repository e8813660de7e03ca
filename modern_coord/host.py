"""A consumer host: N coordinator-era consumers of one group in one process.

In-process (`ConsumerHost`), the consumers are threads; the CLI's `consumers
--design modern` uses that. As its own process (`python -m modern_coord.host
...`), a host with `--count 1` is a consumer that a fault can pause or kill
alone::

    python -m modern_coord.host --bootstrap 127.0.0.1:9092 --group g --topic t --count 1 \\
        --trial-dir DIR --name c3 --config session.timeout.ms=6000

It prints `READY {...}`, then one JSON line per change, and on SIGTERM stops
its consumers gracefully (commit, revoke, LeaveGroup).
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
from .consumer import ModernConsumer


class ConsumerHost:
    def __init__(self, bootstrap: str, group: str, topics: list[str], count: int, trial_dir: str | Path, *,
                 name: str = "c", trial: str = "adhoc", overrides: dict | None = None,
                 on_change: Callable[[str, ModernConsumer], None] | None = None):
        if count < 1:
            raise LabError(f"--count {count}: a host runs at least one consumer.", "Use --count 1 or more.")
        self.consumers: list[ModernConsumer] = []
        self.traces: list[TraceRecorder] = []
        props = {"group.id": group, "bootstrap.servers": bootstrap, **(overrides or {})}
        actors = [name if count == 1 else f"{name}{i + 1}" for i in range(count)]
        # validate before starting anything; each member's client.id is its actor name unless set
        configs = [ConsumerConfig.from_dict({"client.id": actor, **props}) for actor in actors]
        for actor, config in zip(actors, configs, strict=True):
            trace = TraceRecorder(trial_dir, trial=trial, design="modern", actor=actor)
            self.traces.append(trace)
            callback = (lambda c, a=actor: on_change(a, c)) if on_change else None
            self.consumers.append(ModernConsumer(config, topics, trace, name=actor, on_change=callback))

    def start(self) -> ConsumerHost:
        for consumer in self.consumers:
            consumer.start()
        return self

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer._stop.set()  # all leave together rather than one rebalance per leaver
        for consumer in self.consumers:
            consumer.stop()
        for trace in self.traces:
            trace.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m modern_coord.host")
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...] of brokers")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--trial", default="adhoc")
    parser.add_argument("--name", default="c")
    parser.add_argument("--config", action="append", default=[], help="KEY=VALUE, Java consumer config names")
    add_owner_argument(parser)
    args = parser.parse_args()

    def report(actor: str, consumer: ModernConsumer) -> None:
        print(json.dumps({"actor": actor, "state": consumer.state.value,
                          "generation": consumer.generation.generation_id,
                          "partitions": sorted(p for _, p in consumer.assignment())}), flush=True)

    host = ConsumerHost(args.bootstrap, args.group, args.topic, args.count, args.trial_dir, name=args.name,
                        trial=args.trial, overrides=parse_overrides(args.config), on_change=report).start()
    try:
        serve_until_terminated({"consumers": [c.name for c in host.consumers]})
    finally:
        host.stop()


if __name__ == "__main__":
    main()
