"""`bench coordinator`: how much one group coordinator sustains, and how fast a group forms.

- **heartbeats/s**: a group of `--hb-members` members is formed on one broker
  process; then `--hb-clients` driver threads (spread over two driver
  processes, so the driver's own GIL is not the limit) send Heartbeat as fast
  as the answers come, for `--hb-seconds`; the figure is answers per second;
- **join to Stable**: for each group size N in `--sizes`, N members (threads,
  one connection each) send JoinGroup at once; the figure is the time from the
  first JoinGroup sent to the last SyncGroup answered (the group Stable, every
  member holding its assignment), and the generations it took (members
  arriving a moment apart cause extra rounds). `group.initial.rebalance.delay.ms` is set to
  0 for this run (Kafka's default, 3000, would add 3 s or more to every size)
  and the figure is reported with the setting it was taken with.

Members speak the wire protocol directly (no fetching, no assignor work
beyond the leader's range split), so the figures are the coordinator's. Each
is the median of `--repeats`; everything is written as JSON to `--out`
(default `benchmarks/coordinator.json`). A benchmark, not a test.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from experiments.engine.environment import machine
from lab_cluster.broker.admin import BrokerProcess
from lab_cluster.cleanup import make_temp_dir, remove_temp_dir
from lab_cluster.wire import WireClient
from lab_cluster.zk import provision
from modern_coord.lookup import wait_for_coordinator

PLUGIN = "modern_coord.coordinator.service:install"
SESSION_MS = 30_000


def add_parser(sub) -> None:
    p = sub.add_parser("coordinator", help="heartbeats/s one coordinator sustains; join-to-Stable time by size")
    p.add_argument("--sizes", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hb-members", type=int, default=64)
    p.add_argument("--hb-clients", type=int, default=16)
    p.add_argument("--hb-seconds", type=float, default=5.0)
    p.add_argument("--backend", help="ZooKeeper backend (default: LAB_ZK_BACKEND or auto)")
    p.add_argument("--out", default="benchmarks/coordinator.json")
    p.set_defaults(run=run)


def form_group(address: tuple[str, int], group: str, size: int) -> tuple[float, list[tuple[str, int]]]:
    """N members join at once; returns (seconds from the first JoinGroup to Stable, [(member id, generation)]).

    Members behave as clients do: a SyncGroup or Heartbeat answered
    REBALANCE_IN_PROGRESS sends them back to JoinGroup (members arriving a
    moment apart cause such extra rounds). Stable means: every member synced
    in one generation that has all N members.
    """
    synced: list[tuple[str, int, int] | None] = [None] * size  # (member id, generation, members in it)
    finished_at = [0.0] * size
    stop = threading.Event()
    start = threading.Barrier(size + 1)
    errors: list[str] = []
    leader_count = [0]  # members the leader saw in its JoinGroup answer

    def member(i: int) -> None:
        c = WireClient(*address, client_id=f"m{i}", timeout_s=120)
        base = {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 60_000,
                "protocol_type": "consumer", "client_id": f"m{i}",
                "protocols": [{"name": "range", "metadata": {"topics": ["t"]}}]}
        member_id = ""
        start.wait()
        try:
            while not stop.is_set():
                joined = c.request("JoinGroup", member_id=member_id, **base)
                if joined["error"] == "MEMBER_ID_REQUIRED":
                    member_id = joined["member_id"]
                    continue
                if joined["error_code"] != 0:
                    errors.append(f"JoinGroup: {joined['error']}")
                    return
                assignments = []
                if joined["leader"] == member_id:
                    members = sorted(m["member_id"] for m in joined["members"])
                    assignments = [{"member_id": m, "assignment": {"partitions": [["t", k]]}}
                                   for k, m in enumerate(members)]
                    leader_count[0] = len(members)
                sync = c.request("SyncGroup", member_id=member_id, generation_id=joined["generation_id"],
                                 group_id=group, assignments=assignments)
                if sync["error"] == "REBALANCE_IN_PROGRESS":
                    continue
                if sync["error_code"] != 0:
                    errors.append(f"SyncGroup: {sync['error']}")
                    return
                synced[i] = (member_id, joined["generation_id"])
                finished_at[i] = time.perf_counter()
                while not stop.is_set():  # heartbeat until told the group is complete, rejoin if asked
                    hb = c.request("Heartbeat", group_id=group, member_id=member_id,
                                   generation_id=joined["generation_id"])
                    if hb["error"] == "REBALANCE_IN_PROGRESS":
                        synced[i] = None
                        break
                    stop.wait(0.05)
        except ConnectionError as exc:
            errors.append(str(exc))
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(size)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not errors:
        now = list(synced)
        if None not in now and len({g for _, g in now}) == 1 and leader_count[0] == size:
            break
        time.sleep(0.005)
    else:
        stop.set()
        raise RuntimeError(f"group of {size} did not form: {errors[:3]}")
    elapsed = max(finished_at) - t0
    stop.set()
    for t in threads:
        t.join(30)
    return elapsed, now


def _heartbeat_worker(address, group, members, clients, seconds, queue) -> None:
    count = [0] * clients
    stop_at = time.monotonic() + seconds

    def loop(k: int) -> None:
        c = WireClient(*address, client_id=f"hb{k}")
        member_id, generation = members[k % len(members)]
        while time.monotonic() < stop_at:
            answer = c.request("Heartbeat", group_id=group, member_id=member_id, generation_id=generation)
            if answer["error_code"] == 0:
                count[k] += 1
        c.close()
    threads = [threading.Thread(target=loop, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(sum(count))


def heartbeats_per_s(address, group, members, clients: int, seconds: float) -> float:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    per_process = [clients // 2 + clients % 2, clients // 2]
    procs = [ctx.Process(target=_heartbeat_worker, args=(address, group, members, n, seconds, queue))
             for n in per_process if n]
    for p in procs:
        p.start()
    total = sum(queue.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(30)
    return total / seconds


def run(args) -> int:
    console = Console()
    sizes = [int(s) for s in args.sizes.split(",")]
    join_s: dict[int, list[float]] = {n: [] for n in sizes}
    rounds: dict[int, list[int]] = {n: [] for n in sizes}
    hb: list[float] = []
    trial_dir = make_temp_dir("bench-coordinator")
    try:
        with provision(servers=1, backend=args.backend) as zk:
            broker = BrokerProcess(1, zk.connect, trial_dir, plugins=(PLUGIN,), config={
                "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
            try:
                address = wait_for_coordinator([("127.0.0.1", broker.port)], "bench-warmup", "bench",
                                               retry_s=0.05)[1:]
                for r in range(args.repeats):
                    for n in sizes:
                        seconds, members = form_group(address, f"join-{n}-{r}", n)
                        join_s[n].append(seconds)
                        rounds[n].append(members[0][1])
                        console.print(f"  {n} members: Stable after {seconds * 1000:,.0f} ms, "
                                      f"generation {members[0][1]}")
                    console.print(f"run {r + 1}/{args.repeats}: join to Stable " +
                                  ", ".join(f"{n}: {join_s[n][-1] * 1000:.0f} ms" for n in sizes))
                    _, members = form_group(address, f"hb-{r}", args.hb_members)
                    hb.append(heartbeats_per_s(address, f"hb-{r}", members, args.hb_clients, args.hb_seconds))
                    console.print(f"run {r + 1}/{args.repeats}: {hb[-1]:,.0f} heartbeats/s")
            finally:
                broker.stop()
            zk_info = {"zk_backend": zk.backend, "zk_version": zk.version}
    finally:
        remove_temp_dir(trial_dir)
    doc = {"benchmark": "group coordinator", "taken_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": machine(), **zk_info, "repeats": args.repeats,
           "settings": {"group.initial.rebalance.delay.ms": 0, "session.timeout.ms": SESSION_MS,
                        "heartbeat_members": args.hb_members, "heartbeat_clients": args.hb_clients,
                        "heartbeat_seconds": args.hb_seconds},
           "heartbeats_per_s": {"median": round(statistics.median(hb)), "min": round(min(hb)),
                                "max": round(max(hb)), "all": [round(x) for x in hb]},
           "join_to_stable_ms": {str(n): {"median": round(statistics.median(v) * 1000, 1),
                                          "min": round(min(v) * 1000, 1), "max": round(max(v) * 1000, 1),
                                          "generations": rounds[n]}
                                 for n, v in join_s.items()}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    table = Table(title=f"join to Stable (median of {args.repeats}); {doc['heartbeats_per_s']['median']:,} "
                        f"heartbeats/s")
    for col in ("members", "median ms", "min ms", "max ms", "generations"):
        table.add_column(col)
    for n, r in doc["join_to_stable_ms"].items():
        table.add_row(n, f"{r['median']:,}", f"{r['min']:,}", f"{r['max']:,}", str(r["generations"]))
    console.print(table)
    console.print(f"written to {out}")
    return 0
