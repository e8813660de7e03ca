"""`bench cluster`: produce, fetch and trace-write throughput of the lab's cluster.

- produce: one client sends `Produce` batches of 100 messages to one broker
  process (one partition) until `--records` are written: records/s;
- fetch: one client reads them all back from offset 0 with `max_records` 1000: records/s;
- trace write: one `TraceRecorder` records `--events` `processed` events and
  closes (everything on disk): events/s.

Each figure is the median of `--repeats` runs, written as JSON to `--out`
(default `benchmarks/cluster_throughput.json`) with the machine. A benchmark,
not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from kazoo.client import KazooClient
from rich.console import Console
from rich.table import Table

from experiments.engine.environment import machine
from lab_cluster.broker.admin import BrokerProcess, broker_addresses, create_topic, wait_for_metadata
from lab_cluster.cleanup import make_temp_dir, remove_temp_dir
from lab_cluster.trace import TraceRecorder
from lab_cluster.wire import WireClient
from lab_cluster.zk import provision


def add_parser(sub) -> None:
    p = sub.add_parser("cluster", help="produce, fetch and trace-write throughput")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--records", type=int, default=50_000)
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--backend", help="ZooKeeper backend (default: LAB_ZK_BACKEND or auto)")
    p.add_argument("--out", default="benchmarks/cluster_throughput.json")
    p.set_defaults(run=run)


def _produce_and_fetch(connect: str, trial_dir: Path, topic: str, records: int) -> tuple[float, float]:
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=30)
    try:
        broker = BrokerProcess(1, connect, trial_dir)
        try:
            create_topic(zk, topic, 1, [1], replication_factor=1)
            wait_for_metadata(zk, topic, 1)
            client = WireClient(*broker_addresses(zk)[1])
            batch = [f"{topic}/0/{i}" for i in range(100)]
            t0 = time.perf_counter()
            for _ in range(records // len(batch)):
                client.call("Produce", topic=topic, partition=0, values=batch)
            produce_s = time.perf_counter() - t0
            t0, offset = time.perf_counter(), 0
            while offset < records:
                got = client.call("Fetch", topic=topic, partition=0, offset=offset, max_records=1000)["records"]
                offset += len(got)
            fetch_s = time.perf_counter() - t0
            client.close()
        finally:
            broker.stop()
    finally:
        zk.stop()
        zk.close()
    return records / produce_s, records / fetch_s


def _trace_write(trial_dir: Path, events: int) -> float:
    t0 = time.perf_counter()
    with TraceRecorder(trial_dir, trial="bench", design="cluster", actor="bench") as trace:
        for i in range(events):
            trace.record("processed", topic="t", partition=i % 12, offset=i)
    return events / (time.perf_counter() - t0)


def run(args) -> int:
    console = Console()
    figures: dict[str, list[float]] = {"produce_records_per_s": [], "fetch_records_per_s": [],
                                       "trace_events_per_s": []}
    with provision(servers=1, backend=args.backend) as zk:
        for i in range(args.repeats):
            trial_dir = make_temp_dir("bench")
            try:
                produce, fetch = _produce_and_fetch(zk.connect, trial_dir, f"bench{i}", args.records)
                figures["produce_records_per_s"].append(produce)
                figures["fetch_records_per_s"].append(fetch)
                figures["trace_events_per_s"].append(_trace_write(trial_dir, args.events))
            finally:
                remove_temp_dir(trial_dir)
            console.print(f"run {i + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in figures.items()))
        zk_info = {"zk_backend": zk.backend, "zk_version": zk.version}
    results = {k: {"median": round(statistics.median(v)), "min": round(min(v)), "max": round(max(v)),
                   "all": [round(x) for x in v]} for k, v in figures.items()}
    doc = {"benchmark": "cluster throughput", "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": machine(), **zk_info, "records": args.records, "events": args.events,
           "repeats": args.repeats, "results": results}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    table = Table(title=f"cluster throughput (median of {args.repeats})")
    for col in ("figure", "median", "min", "max"):
        table.add_column(col)
    for k, r in results.items():
        table.add_row(k, f"{r['median']:,}", f"{r['min']:,}", f"{r['max']:,}")
    console.print(table)
    console.print(f"written to {out}")
    return 0
