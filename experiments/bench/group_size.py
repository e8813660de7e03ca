"""`bench group-size`: the largest group each design forms on this machine, with the lab's overhead at each N.

For each design, the herd experiment's trial (a stable group of N, a joiner,
its leave: `experiments/catalogue/herd.py`, with the partitions and rate of
its `--profile`) at N = `--sizes` in turn, one
trial at a time, each run and analysed as a run's trials are
(`harness.run_grid`, `harness.analyse`). A trial counts when it ends `ok`: it
ran to the end, its traces are complete, every change converged where the
design converges, and no host was starved by the lab's own load
(`experiments/overhead.py`: a trial whose host woke later than a third of its
session timeout is `invalid`). A design's sweep stops at its first trial that
does not count: a larger group would only be worse.

Per point it writes the trial's status (and why, if not ok), its wall time,
the join's convergence, and the overhead the hosts measured (how late their
threads woke, their CPU seconds, the ZooKeeper clients' ping lateness and
answer time; for a failed trial too, read from the traces it kept, with
`starved` saying whether the lab starved it), then per design
`largest_valid_n`. Each point has a Spark session of its own. `--master` runs
the trials on a Spark cluster instead of `local[1]` (`python -m experiments
spark up` starts one on loopback): the same sweep, its trials on a worker.
`--host-tasks K` spreads each trial's group over K tasks of a barrier stage
(`experiments/engine/host_tasks.py`), on the cluster's executors, the trial
itself on the driver; its sweeps are kept apart from the others.
Figures go to `--out`
(default `benchmarks/group_size.json`) with the machine, after every point, so
an interrupted sweep keeps what it measured; a design's new sweep keeps the one
it replaces under `<design>_before`. A benchmark, not a test: nothing here
asserts a size.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from experiments.bench.harness import keep_before
from experiments.catalogue import herd
from experiments.engine.environment import lab_commit, machine
from experiments.engine.families import RENAMED, current_name
from lab_cluster.cleanup import make_temp_dir, remove_temp_dir

FIGURES = ("status", "reason", "wall_s", "hosts", "host_late_ms_max", "host_late_ms_mean", "host_cpu_share_max",
           "host_cpu_s", "zk_ping_late_ms_max", "zk_ping_rtt_ms_max", "hosts_starved")


def add_parser(sub) -> None:
    p = sub.add_parser("group-size", help="the largest group each design forms here, and the lab's overhead per N")
    p.add_argument("--designs", default=",".join(herd.DESIGNS))
    p.add_argument("--sizes", default="8,16,32,64,128,256")
    p.add_argument("--profile", default="standard", choices=sorted(herd.PROFILES),
                   help="the herd profile whose partitions and rate the trials take (default: standard, P=32)")
    p.add_argument("--master", default="local[1]", help="Spark master the trials run on (default: local[1])")
    p.add_argument("--host-tasks", type=int, default=0,
                   help="spread each trial's group over this many tasks of a Spark barrier stage, on the cluster's "
                        "executors (`experiments/engine/host_tasks.py`); its sweeps go under `<local|cluster>_"
                        "host_tasks_<K>` (default 0: the group's one host beside its trial)")
    p.add_argument("--out", default="benchmarks/group_size.json")
    p.set_defaults(run=run)


def measure(spark, design: str, n: int, profile: str, work: Path, host_tasks: int = 0) -> dict:
    """One herd trial of `design` at N = `n` (the `profile`'s partitions and rate; its group over `host_tasks`
    barrier tasks, if any), run and analysed; its figures (`FIGURES`, `join_convergence_ms`)."""
    from experiments.cli.run import spread_over_tasks
    from experiments.engine.harness import analyse, run_grid

    specs = spread_over_tasks(herd.grid(profile, designs=(design,), consumers=[n]), host_tasks)
    run_dir = work / f"{design}-n{n}"
    summary = analyse(spark, str(run_dir), specs, run_grid(spark, specs, str(run_dir)))
    trial = summary.iloc[0]
    join = summary[summary.change == "join"]
    # the tasks its group took (0 where the design's trial gives each member a process of its own: TubeMQ's)
    point = {"consumers": n, "host_tasks": specs[0].host_tasks, **{k: _plain(trial.get(k)) for k in FIGURES},
             "join_convergence_ms": _plain(join.convergence_ms.iloc[0]) if not join.empty else None}
    if trial.status == "failed":  # not analysed as a run's trial; how its hosts fared says whose failure it was
        point.update(failed_trial_overhead(spark, run_dir / "trials" / trial.trial))
    return point


def failed_trial_overhead(spark, trial_dir: Path) -> dict:
    """The overhead columns of a failed trial, read from the traces it kept, and whether its hosts were starved
    (`starved`: the problem, or null)."""
    from experiments import overhead
    from lab_cluster.trace_reader import COLUMNAR_FILE, TRACE_SCHEMA

    if not (trial_dir / COLUMNAR_FILE).exists():
        return {}
    events = spark.read.schema(TRACE_SCHEMA).parquet(str(trial_dir / COLUMNAR_FILE))
    rows = overhead.host_overhead(events).collect()
    starved = overhead.starved(events).collect()
    figures = {k: _plain(v) for k, v in rows[0].asDict().items() if k != "trial"} if rows else {}
    return {**figures, "starved": starved[0].problem if starved else None}


def _plain(value):
    """A value JSON can hold: numpy's numbers as Python's, NaN as null."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value


def run(args) -> int:
    from experiments.engine.host_tasks import slots_problem
    from lab_cluster.spark import local_session, stop_session

    console = Console()
    problem = slots_problem(args.master, args.host_tasks) if args.host_tasks else None
    if problem is not None:  # every trial would fail on it, and the sweep record that as the designs' failure
        raise problem
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc.update({"benchmark": "group-size", "machine": machine()})
    sizes = [int(s) for s in args.sizes.split(",")]
    where = "cluster" if args.master.startswith("spark://") else "local"
    sweeps = doc.setdefault(f"{where}_host_tasks_{args.host_tasks}" if args.host_tasks else where, {})
    # the code the trials run, read once before the sweep writes anything: its own figures file, written after
    # every point, would otherwise mark every later design's sweep `+dirty`, and a commit made meanwhile be taken
    commit = lab_commit()
    work = make_temp_dir("bench-group-size")
    try:
        for design in (current_name(d.strip()) for d in args.designs.split(",") if d.strip()):
            _renamed_sweeps(sweeps, design)
            sweep = {"profile": args.profile, "partitions": herd.PROFILES[args.profile]["partitions"],
                     "sizes": sizes, "points": [], "largest_valid_n": None, "master": args.master,
                     "host_tasks": args.host_tasks,
                     "taken_at": datetime.now(UTC).isoformat(timespec="seconds"), "lab_commit": commit}
            keep_before(sweeps, design, sweep)
            for n in sizes:
                console.print(f"{design}: N={n} ...")
                # a fresh Spark session per point: one session's analyses, one after another, ran out of
                # execution memory at the 23rd (as the tests' one session did: tests/conftest.py)
                try:
                    point = measure(local_session(args.master), design, n, args.profile, work, args.host_tasks)
                except Exception as exc:  # the benchmark's own failure, not the design's: said so, and stop
                    if interrupted(exc):
                        raise KeyboardInterrupt from exc
                    point = {"consumers": n, "status": "error",
                             "reason": f"the benchmark could not run or analyse this trial: {type(exc).__name__}: "
                                       f"{str(exc).splitlines()[0] if str(exc) else ''}"}
                finally:
                    stop_session()
                sweep["points"].append(point)
                if point["status"] == "ok":
                    sweep["largest_valid_n"] = n
                _write(out, doc)
                console.print(point)
                if point["status"] != "ok":
                    break  # a larger group would only be worse
    finally:
        remove_temp_dir(work)
    _write(out, doc)
    console.print(f"written to {out}")
    return 0


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` came of a Ctrl-C: PySpark's SIGINT handler cancels the running jobs and raises
    KeyboardInterrupt inside the Py4J call, which surfaces as a Py4J error with the interrupt in its chain. Such
    a point is the user's stop, not the benchmark's failure: the sweep stops rather than going on to the next
    design.

    >>> try:
    ...     try:
    ...         raise KeyboardInterrupt
    ...     except KeyboardInterrupt:
    ...         raise RuntimeError("An error occurred while calling o48232.getResult")
    ... except RuntimeError as exc:
    ...     interrupted(exc), interrupted(RuntimeError("an analysis ran out of memory"))
    (True, False)
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _write(out: Path, doc: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")


def _renamed_sweeps(sweeps: dict, design: str) -> None:
    """Move the sweeps a file keeps under `design`'s old name (before the renaming: `legacy` for `zookeeper`) to
    its name today, so that `keep_before` puts them on record beside the new one."""
    for old, new in RENAMED.items():
        if new == design and old in sweeps and design not in sweeps:
            sweeps[design] = sweeps.pop(old)
            if f"{old}_before" in sweeps:
                sweeps[f"{design}_before"] = sweeps.pop(f"{old}_before")
