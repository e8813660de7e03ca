"""`spark up`: start a standalone Spark cluster on loopback and keep it up until Ctrl-C.

A master and `--workers` workers from the pyspark installation's own
`spark-class` (`lab_cluster/spark_standalone.py`), to run a grid on as on a
real cluster: `run herd --master <url>` or the `spark-submit` command of `docs/use.md`.
Prints the master's URL and its workers.
"""

from __future__ import annotations

import threading

from rich.console import Console

from lab_cluster.spark_standalone import StandaloneCluster


def add_parser(sub) -> None:
    p = sub.add_parser("up", help="start a standalone Spark master and workers on loopback until Ctrl-C")
    p.add_argument("--workers", type=int, default=2, help="how many workers (default 2)")
    p.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    p.add_argument("--memory", default="2g", help="memory per worker, as Spark writes it (default 2g)")
    p.set_defaults(run=run)


def run(args, stop: threading.Event | None = None) -> int:
    console = Console()
    with console.status(f"starting a Spark master and {args.workers} worker(s)..."):
        cluster = StandaloneCluster(workers=args.workers, cores_per_worker=args.cores, memory_per_worker=args.memory)
        cluster.start()
    try:
        for w in cluster.status()["workers"]:
            console.print(f"  worker {w['id']}: {w['cores']} core(s), {w['memory']} MiB, {w['state']}")
        console.print(f"master: [bold]{cluster.url}[/] (status: {cluster.status_url})")
        console.print("Ctrl-C stops everything.")
        (stop or threading.Event()).wait()
    finally:
        cluster.stop()
    return 0
