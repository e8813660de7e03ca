"""`zk up`: start a ZooKeeper server or ensemble and keep it up until Ctrl-C.

For poking at with any ZooKeeper client (`zkCli.sh -server ...`, kazoo, or the
four-letter words: `echo srvr | nc 127.0.0.1 PORT`). Prints the connect
string, each server's role and, for ensembles, the quorum-link proxies.
"""

from __future__ import annotations

import threading

from rich.console import Console

from lab_cluster.zk import ZkSettings, provision


def add_parser(sub) -> None:
    p = sub.add_parser("up", help="start ZooKeeper and print its connect string until Ctrl-C")
    p.add_argument("--backend", help="embedded, testcontainers, external or auto (default: LAB_ZK_BACKEND or auto)")
    p.add_argument("--servers", type=int, default=1, choices=(1, 3, 5), help="ensemble size (default 1)")
    p.add_argument("--port", type=int, help="client port for a single server (default: a free one)")
    p.set_defaults(run=run)


def run(args, stop: threading.Event | None = None) -> int:
    console = Console()
    settings = ZkSettings(client_port=args.port)
    with console.status(f"starting {args.servers} ZooKeeper server(s)..."):
        zk = provision(servers=args.servers, backend=args.backend, settings=settings)
    with zk:
        console.print(f"ZooKeeper {zk.version} on {zk.backend} ({zk.reason})")
        for sid, mode in zk.modes().items():
            console.print(f"  server {sid}: {zk.server(sid).connect} {mode}")
        for (src, dst), proxy in sorted(zk.proxies.items()):
            console.print(f"  quorum link zk{src}->zk{dst}: proxy 127.0.0.1:{proxy.port}")
        console.print(f"connect string: [bold]{zk.connect}[/]")
        console.print("Ctrl-C stops everything.")
        (stop or threading.Event()).wait()
    return 0
