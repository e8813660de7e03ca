"""`consumers`: run N consumers of one group against a running `cluster up`, and watch them rebalance.

    python -m experiments consumers --design legacy --zk 127.0.0.1:PORT --group g --topic t --count 3

Every state change and assignment is printed as it happens: start a second
`consumers` command in another terminal and watch every member of the group
rebalance. Ctrl-C stops them gracefully; nothing of them is left in ZooKeeper
or in the process table. (The coordinator-era family, `--design modern`, joins
with issue 5.)
"""

from __future__ import annotations

import threading
import time

from rich.console import Console

from lab_cluster.cleanup import make_temp_dir


def add_parser(sub) -> None:
    p = sub.add_parser("consumers", help="run N consumers of a group and print every rebalance until Ctrl-C")
    p.add_argument("--design", choices=["legacy"], required=True)
    p.add_argument("--zk", required=True, help="ZooKeeper connect string (from `cluster up`)")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--config", action="append", default=[], help="KEY=VALUE consumer config (Kafka 0.8 names)")
    p.add_argument("--dir", help="keep the consumers' traces here (default: a temp dir removed at exit)")
    p.set_defaults(run=run)


def run(args, stop: threading.Event | None = None) -> int:
    from lab_cluster.properties import parse_overrides
    from legacy_zk.host import ConsumerHost

    console = Console()
    trial_dir = args.dir or make_temp_dir("consumers")
    t0 = time.monotonic()

    def report(actor, consumer) -> None:
        partitions = sorted(p for _, p in consumer.assignment())
        console.print(f"{time.monotonic() - t0:7.2f}s {actor}: {consumer.state.value:<11} "
                      f"rebalances={consumer.rebalances} partitions={partitions}")

    host = ConsumerHost(args.zk, args.group, [args.topic], args.count, trial_dir,
                        overrides=parse_overrides(args.config), on_change=report)
    host.start()
    console.print(f"{args.count} legacy consumer(s) of group {args.group} on {args.topic}; traces in {trial_dir}. "
                  "Ctrl-C stops them.")
    try:
        (stop or threading.Event()).wait()
    finally:
        host.stop()
        console.print("stopped: released, committed and deregistered")
    return 0
