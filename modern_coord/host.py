"""A consumer host: N coordinator-era consumers of one group in one process (`lab_cluster.consumer_host`).

In-process (`host_consumers`), the consumers are threads; the CLI's `consumers
--design modern` uses that. As its own process (`python -m modern_coord.host
...`), a host with `--count 1` is a consumer that a fault can pause or kill
alone::

    python -m modern_coord.host --bootstrap 127.0.0.1:9092 --group g --topic t --count 1 \\
        --trial-dir DIR --name c3 --config session.timeout.ms=6000

It prints `READY {...}`, then one JSON line per change, and on SIGTERM stops
its consumers gracefully (commit, revoke, LeaveGroup).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lab_cluster.consumer_host import ConsumerHost, host_argument_parser, print_state_line, serve
from lab_cluster.properties import parse_overrides

from .config import ConsumerConfig
from .consumer import ModernConsumer


def host_consumers(bootstrap: str, group: str, topics: list[str], count: int, trial_dir: str | Path, *,
                   name: str = "c", trial: str = "adhoc", overrides: dict | None = None,
                   on_change: Callable[[str, ModernConsumer], None] | None = None) -> ConsumerHost:
    props = {"group.id": group, "bootstrap.servers": bootstrap, **(overrides or {})}
    return ConsumerHost(
        design="modern", count=count, trial_dir=trial_dir, name=name, trial=trial, on_change=on_change,
        # each member's client.id (its member id's prefix) is its actor name unless set
        configure=lambda actor: ConsumerConfig.from_dict({"client.id": actor, **props}),
        build=lambda config, trace, actor, callback: ModernConsumer(config, topics, trace, name=actor,
                                                                    on_change=callback))


def main() -> None:
    args = host_argument_parser("python -m modern_coord.host", "--bootstrap", "host:port[,host:port...] of brokers",
                                "Java consumer config names").parse_args()
    host = host_consumers(args.bootstrap, args.group, args.topic, args.count, args.trial_dir, name=args.name,
                          trial=args.trial, overrides=parse_overrides(args.config), on_change=print_state_line).start()
    serve(host, {"consumers": [c.name for c in host.consumers]})


if __name__ == "__main__":
    main()
