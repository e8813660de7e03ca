"""`consumers`: run N consumers of one group against a running `cluster up`, and watch them rebalance.

    python -m experiments consumers --design zookeeper --zk 127.0.0.1:PORT --group g --topic t --count 3
    python -m experiments consumers --design classic --bootstrap 127.0.0.1:9092 --group g --topic t --count 3

Every state change and assignment is printed as it happens: start a second
`consumers` command in another terminal and watch every member of the group
rebalance. The ZooKeeper-era family (`zookeeper`) talks to ZooKeeper; the
coordinator-era family (`classic`) talks only to brokers, one of which is the
group's coordinator. Ctrl-C stops them gracefully; nothing of them is left in
ZooKeeper, in the group or in the process table.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console

from experiments.engine.families import FAMILIES, current_name
from lab_cluster.cleanup import make_temp_dir
from lab_cluster.errors import LabError


def add_parser(sub) -> None:
    p = sub.add_parser("consumers", help="run N consumers of a group and print every rebalance until Ctrl-C")
    p.add_argument("--design", choices=sorted(FAMILIES), required=True, type=current_name,
                   help="the design its consumers run (an old name, `legacy` or `modern`, still works)")
    p.add_argument("--zk", help="ZooKeeper connect string (from `cluster up`), for a family that talks to ZooKeeper")
    p.add_argument("--bootstrap", help="host:port[,host:port...] of brokers (from `cluster up`), for one that does not")
    p.add_argument("--kafka-bootstrap", help="the brokers' Kafka listeners (`cluster up`'s `kafka bootstrap:` line), "
                   "for a real Kafka client")
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--config", action="append", default=[],
                   help="KEY=VALUE consumer config (Kafka 0.8 names for zookeeper, Java client names for classic)")
    p.add_argument("--dir", help="keep the consumers' traces here (default: a temp dir removed at exit)")
    p.set_defaults(run=run)


def run(args, stop: threading.Event | None = None) -> int:
    from lab_cluster.consumer_host import ConsumerHost
    from lab_cluster.properties import parse_overrides

    family = FAMILIES[args.design]
    address = getattr(args, family.address)
    if not address:
        raise LabError(f"--design {family.name} needs --{family.address.replace('_', '-')}.",
                       "Give the address `cluster up` printed for it.")
    console = Console()
    trial_dir = args.dir or make_temp_dir("consumers")
    t0 = time.monotonic()

    def report(actor, member) -> None:  # the state line the trial runner reads, with the time since start
        console.print(f"{time.monotonic() - t0:7.2f}s {member.snapshot().line(actor)}", markup=False,
                      highlight=False, soft_wrap=True)

    host = ConsumerHost(family, address, args.group, [args.topic], args.count, trial_dir,
                        overrides=parse_overrides(args.config), on_change=report).start()
    console.print(f"{args.count} {args.design} consumer(s) of group {args.group} on {args.topic}; "
                  f"traces in {trial_dir}. Ctrl-C stops them.")
    try:
        (stop or threading.Event()).wait()
    finally:
        host.stop()
        console.print(f"stopped: {family.stops_by}")
    return 0
