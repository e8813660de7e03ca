"""`bench zk`: how long each backend takes to bring up a serving ZooKeeper.

Time-to-ready is measured from the call to `provision()` to the moment every
server serves, one leader is elected and (for containers) a kazoo client has
connected; then the ensemble is closed and the next start begins. Figures: the
median, min and max of `--repeats` starts per backend and ensemble size,
written as JSON to `--out` (default `benchmarks/zk_startup.json`) with the
machine they were taken on. A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from experiments.engine.environment import machine
from lab_cluster.zk import provision
from lab_cluster.zk.backends import embedded_problem, testcontainers_problem


def add_parser(sub) -> None:
    p = sub.add_parser("zk", help="time-to-ready of each ZooKeeper backend (single server and 3-server ensemble)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backends", default="embedded,testcontainers")
    p.add_argument("--sizes", default="1,3")
    p.add_argument("--out", default="benchmarks/zk_startup.json")
    p.set_defaults(run=run)


def run(args) -> int:
    console = Console()
    problems = {"embedded": embedded_problem, "testcontainers": testcontainers_problem}
    results = []
    for backend in args.backends.split(","):
        problem = problems[backend]()
        if problem:
            console.print(f"[yellow]skipping {backend}[/]: {problem}")
            continue
        for size in (int(s) for s in args.sizes.split(",")):
            times, version = [], "unknown"
            for i in range(args.repeats):
                t0 = time.perf_counter()
                with provision(servers=size, backend=backend) as zk:
                    times.append(time.perf_counter() - t0)
                    version = zk.version
                console.print(f"{backend} x{size} start {i + 1}/{args.repeats}: {times[-1]:.2f} s")
            results.append({"backend": backend, "servers": size, "zk_version": version, "repeats": args.repeats,
                            "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
                            "max_s": round(max(times), 3), "all_s": [round(t, 3) for t in times]})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "zk time-to-ready", "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": machine(), "results": results}
    out.write_text(json.dumps(doc, indent=2) + "\n")
    table = Table(title=f"time to ready (median of {args.repeats})")
    for col in ("backend", "servers", "median s", "min s", "max s"):
        table.add_column(col)
    for r in results:
        table.add_row(r["backend"], str(r["servers"]), f"{r['median_s']:.2f}", f"{r['min_s']:.2f}", f"{r['max_s']:.2f}")
    console.print(table)
    console.print(f"written to {out}")
    return 0
