"""A consumer host: N ZooKeeper-era consumers of one group in one process (`lab_cluster.consumer_host`).

In-process (`host_consumers`), the consumers are threads; the CLI's `consumers`
command uses that. As its own process (`python -m legacy_zk.host ...`), a host
with `--count 1` is a consumer that a fault can pause or kill alone::

    python -m legacy_zk.host --zk 127.0.0.1:2181/lab --group g --topic t --count 1 \\
        --trial-dir DIR --name c3 --config rebalance.backoff.ms=500

It prints `READY {...}`, then one JSON line per state change, and on SIGTERM
stops its consumers as 0.8's `shutdown` did (fetchers stopped, commit, session closed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lab_cluster.consumer_host import ConsumerHost, host_argument_parser, print_state_line, serve
from lab_cluster.properties import parse_overrides

from .config import ConsumerConfig
from .consumer import LegacyConsumer


def host_consumers(zk_connect: str, group: str, topics: list[str], count: int, trial_dir: str | Path, *,
                   name: str = "c", trial: str = "adhoc", overrides: dict | None = None,
                   on_change: Callable[[str, LegacyConsumer], None] | None = None) -> ConsumerHost:
    props = {"group.id": group, "zookeeper.connect": zk_connect, **(overrides or {})}
    return ConsumerHost(
        design="legacy", count=count, trial_dir=trial_dir, name=name, trial=trial, on_change=on_change,
        configure=lambda actor: ConsumerConfig.from_dict(props),
        build=lambda config, trace, actor, callback: LegacyConsumer(config, topics, trace, on_change=callback))


def main() -> None:
    args = host_argument_parser("python -m legacy_zk.host", "--zk", "ZooKeeper connect string",
                                "Kafka 0.8 consumer config").parse_args()
    host = host_consumers(args.zk, args.group, args.topic, args.count, args.trial_dir, name=args.name,
                          trial=args.trial, overrides=parse_overrides(args.config), on_change=print_state_line).start()
    serve(host, {"consumers": [c.consumer_id for c in host.consumers]})


if __name__ == "__main__":
    main()
