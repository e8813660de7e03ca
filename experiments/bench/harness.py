"""`bench harness`: wall time of `reproduce` (the tour, or `--profile standard`), and the metrics job's throughput.

With `--test-suite`, also the README's test command on a fresh clone of HEAD, set-up included (`test_suite`).

1. Runs `reproduce --profile P` (`tour` by default, as the README's main job runs it;
   `standard` for the published report's grid; with `--trials-per-machine K`, K trials at a
   time on each machine, as a user may run it) into a run directory (a temp one, or
   `--run-dir DIR`, kept so that `report DIR --publish` can render the committed
   report from the very run that was timed; its own report goes there, as
   every run's does) and times it, end to end: every trial, the analysis, the report.
2. Generates a synthetic trace of `--events` events (default ten million) with
   Spark, stored as trials store theirs (Parquet, the trace's columns: mostly
   `processed`, with ZooKeeper requests, watch firings, rebalances and
   ownership changes mixed in, and the scenario's changes), then times the
   whole metrics job on it as a run's analysis does it (the digest, change
   metrics, trial metrics, cross-check, completeness: `Digest.of_files` and
   `Digest.settings`), each written to Parquet
   so that Spark computes everything, `--repeat` times (3): the median, and events per second.

A reproduction's figure is kept per profile (`reproduce_tour`, `reproduce_standard`,
which was `reproduce_quick` before the profiles were renamed). A new figure does
not erase the one it replaces: that goes to `<figure>_before` (newest first),
each with the lab commit that measured it.

Figures go to `--out` (default `benchmarks/harness.json`) with the machine. A
benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from experiments.engine.environment import lab_commit, machine
from experiments.engine.profiles import STANDARD, TOUR, TRIALS_PER_MACHINE
from experiments.report import published
from lab_cluster.cleanup import make_temp_dir, remove_temp_dir

ACTORS = 16
TRIALS = 10


def add_parser(sub) -> None:
    p = sub.add_parser("harness", help="reproduce wall time, and metrics throughput on a synthetic trace")
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--skip-reproduce", action="store_true", help="only the analysis throughput")
    p.add_argument("--skip-analysis", action="store_true", help="only the reproduce wall time")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--profile", choices=(TOUR, STANDARD), default=TOUR,
                   help="the reproduction timed: the tour (the README's main job) or the standard profile")
    p.add_argument("--trials-per-machine", type=int, default=TRIALS_PER_MACHINE, metavar="K",
                   help="the timed reproduction runs K trials at a time on each machine (reproduce's own option; "
                        f"default {TRIALS_PER_MACHINE}, as reproduce's)")
    p.add_argument("--repeat", type=int, default=3, help="runs of the metrics job; the figure is their median")
    p.add_argument("--run-dir", type=Path, help="keep the timed reproduction's run directory here (default: a temp "
                                                "directory, removed)")
    p.add_argument("--test-suite", action="store_true",
                   help="also time the README's test command on a fresh clone of this checkout's HEAD, set-up included")
    p.add_argument("--analyse-run", type=Path, metavar="RUN",
                   help="also time the metrics job on a stored run's traces, from JSON lines and from Parquet")
    p.add_argument("--out", default="benchmarks/harness.json")
    p.set_defaults(run=run)


def synthetic_events(spark, events: int):
    """A DataFrame of `events` trace events over TRIALS trials and ACTORS consumers each, with TRACE_SCHEMA."""
    from pyspark.sql import functions as F

    per_trial = events // TRIALS
    span_ns = 60 * 1_000_000_000  # each trial lasts a minute
    ids = spark.range(events).select(
        (F.col("id") % TRIALS).alias("t"), (F.col("id") / TRIALS).cast("long").alias("i"))
    slot = F.col("i") % 1000
    kind = (F.when(F.col("i") < ACTORS, "consumer_start")
            .when(slot == 1, "zk_read").when(slot == 2, "zk_write").when(slot == 3, "zk_watch_fired")
            .when(slot == 4, "rebalance_begin").when(slot == 5, "revoked").when(slot == 6, "assigned")
            .when(slot == 7, "view").when(slot == 8, "commit").otherwise("processed"))
    actor = F.concat(F.lit("c"), (F.col("i") % ACTORS).cast("string"))
    partition = (F.col("i") % 32).cast("int")
    partitions_json = F.format_string('{"partitions": [["t", %d]], "members": ["a"], "outcome": "accepted"}',
                                      partition)
    consumers = ids.select(
        (F.lit(1_000_000_000) + F.col("i") * (span_ns // per_trial)).alias("ts_ns"), F.lit(0).cast("long")
        .alias("wall_ms"), F.concat(F.lit("trial"), F.col("t").cast("string")).alias("trial"),
        F.lit("zookeeper").alias("design"), actor.alias("actor"), kind.alias("kind"), F.lit("t").alias("topic"),
        partition.alias("partition"), F.col("i").alias("offset"), F.lit(None).cast("string").alias("path"),
        F.lit(None).cast("int").alias("generation"), F.lit(None).cast("string").alias("member"),
        F.lit(None).cast("string").alias("error"), partitions_json.alias("fields"))
    scenario_rows = []
    for t in range(TRIALS):
        trial = f"trial{t}"
        scenario_rows.append((500_000_000, trial, "setup", '{"partitions": 32}', "t"))
        for index in (1, 2):
            at = index * span_ns // 3
            counters = '{"zk_packets_received": 0, "zk_sum_node_children_watch_count": 0}'
            scenario_rows.append((at - 1, trial, "zk_server_counters",
                                  f'{{"index": {index}, "at": "before", "counters": {counters}}}', None))
            scenario_rows.append((at, trial, "change", f'{{"index": {index}, "change": "join"}}', None))
            scenario_rows.append((at + span_ns // 4, trial, "zk_server_counters",
                                  f'{{"index": {index}, "at": "after", "counters": {counters}}}', None))
        scenario_rows.append((span_ns + 2_000_000_000, trial, "end", None, None))
    scenario = spark.createDataFrame(scenario_rows, "ts_ns long, trial string, kind string, fields string, "
                                                    "topic string").select(
        "ts_ns", F.lit(0).cast("long").alias("wall_ms"), "trial", F.lit("zookeeper").alias("design"),
        F.lit("scenario").alias("actor"), "kind", "topic", F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("long").alias("offset"), F.lit(None).cast("string").alias("path"),
        F.lit(None).cast("int").alias("generation"), F.lit(None).cast("string").alias("member"),
        F.lit(None).cast("string").alias("error"), "fields")
    return consumers.unionByName(scenario)


def analysis_throughput(spark, events: int, work: Path, repeat: int = 3) -> dict:
    """Seconds for the metrics job on `events` synthetic events, read as `harness.analyse` reads a run's.

    The events are stored as trials store theirs (Parquet, `trace_reader.write_columnar`); the clock runs from
    reading them to the last output written: the digest (`experiments/digest.py`, computed and cached), the
    change and trial metrics, the cross-check and the completeness check. The job runs `repeat` times in the
    one session: one run varies by a quarter or more here (the JVM's compilation and its collector's
    timing), so the figure is the median, with every run's time beside it.
    """
    traces = work / "traces"
    # whole trials in each file, as a run stores them (one file per trial there)
    synthetic_events(spark, events).repartitionByRange(TRIALS, "trial").write.mode("overwrite").parquet(str(traces))
    files = sorted(str(f) for f in traces.glob("*.parquet"))
    runs = [_metrics_job(spark, files, work / "out") for _ in range(repeat)]
    seconds = statistics.median(total for total, _ in runs)
    return {"events": events, "seconds": round(seconds, 1), "events_per_s": round(events / seconds),
            "of_which_digest_s": round(statistics.median(digest for _, digest in runs), 1),
            "runs_s": [round(total, 1) for total, _ in runs], "runs_digest_s": [round(d, 1) for _, d in runs],
            "input": "Parquet (as trials store their traces)",
            "spark_driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "1g")}


def analysis_of_run(spark, run_dir: Path, work: Path) -> dict:
    """Seconds for the metrics job on a stored run's traces, read from its JSON lines (by Spark alone:
    `Digest.of`) and from Parquet files (as a run's analysis reads them: `Digest.of_files`).

    The Parquet files are made here, in `work` (as each trial's task makes its own when it ends:
    `write_columnar`), so a run stored before trials wrote them can be measured; the conversion's own
    time is given apart (in a run it is spread over the trials' tasks)."""
    from lab_cluster.trace_reader import TRACE_SCHEMA, write_columnar

    trials = sorted(d for d in (run_dir / "trials").iterdir() if (d / "traces").is_dir())
    t0 = time.perf_counter()
    files = [str(write_columnar(d, work / f"{d.name}.parquet")) for d in trials]
    converted = time.perf_counter() - t0
    from_json = spark.read.schema(TRACE_SCHEMA).json([str(d / "traces" / "*.jsonl") for d in trials])
    json_s, _ = _metrics_job(spark, from_json, work / "out-json")
    parquet_s, _ = _metrics_job(spark, files, work / "out-parquet")
    return {"run": str(run_dir), "trials": len(trials), "events": spark.read.parquet(*files).count(),
            "from_json_s": round(json_s, 1), "from_parquet_s": round(parquet_s, 1),
            "parquet_conversion_s": round(converted, 1)}


def _metrics_job(spark, events, out: Path) -> tuple[float, float]:
    """Seconds from reading the events to the four outputs written, and of those, to the digest cached.

    `events`: trace files (Parquet, whole trials in each), read as a run's analysis reads them
    (`Digest.of_files`), or a DataFrame of events (the JSON lines), digested by Spark alone (`Digest.of`)."""
    from experiments import metrics
    from experiments.digest import Digest
    from lab_cluster.trace_reader import incomplete_trials

    t0 = time.perf_counter()
    digest = (Digest.of_files(spark, events) if isinstance(events, list)
              else Digest.of(events, cache=True))
    digest_s = time.perf_counter() - t0
    try:
        with digest.settings():
            outputs = {"changes": metrics.change_metrics(digest), "trials": metrics.trial_metrics(digest),
                       "cross_check": metrics.cross_check(digest),
                       "incomplete": incomplete_trials(digest.control, digest.offsets)}
            for name, frame in outputs.items():
                frame.write.mode("overwrite").parquet(str(out / name))
    finally:
        digest.release()
    return time.perf_counter() - t0, digest_s


def reproduce_command(profile: str = TOUR, trials_per_machine: int = TRIALS_PER_MACHINE) -> list[str]:
    """The reproduction that is timed, as a user types it (without its `--out`).

    >>> reproduce_command()
    ['python', '-m', 'experiments', 'reproduce', '--profile', 'tour', '--trials-per-machine', '3']
    """
    return ["python", "-m", "experiments", "reproduce", "--profile", profile,
            "--trials-per-machine", str(trials_per_machine)]


def reproduce_wall_time(run_dir: Path, profile: str = TOUR, trials_per_machine: int = TRIALS_PER_MACHINE) -> dict:
    shown = reproduce_command(profile, trials_per_machine)
    command = [sys.executable, *shown[1:], "--out", str(run_dir)]
    t0 = time.perf_counter()
    status = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    seconds = round(time.perf_counter() - t0, 1)
    summary = run_dir / "summary.csv"
    # the figure means little without what it covered: trials, and how many ended ok (summary.csv has a row
    # per change; a trial is ok when all its rows are)
    ok: dict[str, bool] = {}
    late_ms, starved = 0.0, 0
    for row in (csv.DictReader(summary.open()) if summary.exists() else []):
        ok[row["trial"]] = ok.get(row["trial"], True) and row["status"] == "ok"
        # and how near the lab came to starving a host (`lab_cluster/host_health.py`): what limits K
        late_ms = max(late_ms, float(row.get("host_late_ms_max") or 0))
        starved += int(float(row.get("hosts_starved") or 0))
    # and where its ZooKeepers ran (`auto` picks Docker where an engine answers, else the embedded JVMs)
    env = json.loads((run_dir / "environment.json").read_text()) if (run_dir / "environment.json").exists() else {}
    # and whether it reproduced the published report: of the findings it checked (the tour checks some)
    stated = [o for o in published.load(run_dir) if o.published and o.here is not None]
    return {"command": " ".join(shown), "profile": profile, "trials_per_machine": trials_per_machine,
            "exit_status": status, "seconds": seconds, "trials": len(ok), "trials_ok": sum(ok.values()),
            "host_late_ms_max": late_ms, "hosts_starved": starved, "zk_backend": env.get("zk_backend"),
            "findings_checked": len(stated), "findings_reproduced": sum(o.reproduced for o in stated)}


#: where `bench harness` writes by default, and where the CLI reads the reproduction's measured time
FIGURES = Path(__file__).resolve().parents[2] / "benchmarks" / "harness.json"
def measured_reproduction(profile: str, figures: Path = FIGURES) -> dict | None:
    """The last timed reproduction of `profile` here (`reproduce_<profile>` in `benchmarks/harness.json`), with
    `trials_per_machine` read from its command where an older figure lacks it; None if there is none."""
    doc = json.loads(figures.read_text()) if figures.exists() else {}
    figure = doc.get(f"reproduce_{profile}")
    if figure is None:
        return None
    words = figure["command"].split()
    given = words[words.index("--trials-per-machine") + 1] if "--trials-per-machine" in words else 1
    return {"trials_per_machine": int(given), **figure}


#: the README's test command (and `.ci/run`'s), run in a fresh clone by `--test-suite`
TEST_COMMAND = "scripts/setup.sh --docker && .venv/bin/python -m pytest"


def suite_wall_time(work: Path) -> dict:
    """Seconds of the README's test command in a fresh clone of HEAD (set-up included), run as CI runs it
    (CI=true), with pytest's closing line."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(FIGURES.parents[1]), str(clone)], check=True)
    t0 = time.perf_counter()
    # pytest's slowest phases are asked for through its environment, so the command stays the README's
    env = {**os.environ, "CI": "true", "PYTEST_ADDOPTS": f"--durations={SLOWEST}"}
    done = subprocess.run(["bash", "-c", TEST_COMMAND], cwd=clone, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    seconds = round(time.perf_counter() - t0, 1)
    closing = [line.strip("= ") for line in done.stdout.splitlines() if " passed" in line or " failed" in line]
    return {"command": TEST_COMMAND, "exit_status": done.returncode, "seconds": seconds,
            "pytest": closing[-1] if closing else "",
            "failed": [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))],
            "slowest": slowest_phases(done.stdout)}


#: how many of the suite's slowest test phases (setup, call, teardown) the figure keeps: where its time goes
SLOWEST = 25


def slowest_phases(stdout: str) -> list[str]:
    """pytest's `--durations` lines ("12.34s call tests/test_x.py::test_y"), slowest first.

    >>> slowest_phases("== slowest 2 ==\\n61.02s setup tests/test_a.py::test_one\\n3.10s call t.py::t\\n== 9 passed")
    ['61.02s setup tests/test_a.py::test_one', '3.10s call t.py::t']
    """
    return [line.strip() for line in stdout.splitlines()
            if re.match(r"^\s*\d+\.\d+s (setup|call|teardown) ", line)]


def keep_before(doc: dict, name: str, figure: dict) -> None:
    """Put `figure` in `doc[name]`, the one it replaces first in `doc[name + "_before"]` (newest first): a
    change of speed stays on record with the commit that measured each figure."""
    if name in doc:
        doc[f"{name}_before"] = [doc[name], *doc.get(f"{name}_before", [])]
    doc[name] = figure


def run(args) -> int:
    from lab_cluster.spark import local_session

    console = Console()
    work = make_temp_dir("bench-harness")
    out = Path(args.out)
    # a part skipped keeps its figures from an earlier run in the same file
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc.update({"benchmark": "harness", "machine": machine()})
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    # the code measured is the code at the start: read after a run of half an hour, a commit made meanwhile (or
    # this file's own rewrite) would label the figure
    commit = lab_commit()
    try:
        if not args.skip_reproduce:
            console.print(f"timing {' '.join(reproduce_command(args.profile, args.trials_per_machine))} ...")
            run_dir = args.run_dir or work / "run"
            figure = reproduce_wall_time(run_dir, args.profile, args.trials_per_machine)
            name = f"reproduce_{args.profile}"
            keep_before(doc, name, {**figure, "taken_at": stamp, "lab_commit": commit})
            console.print(doc[name])
        if not args.skip_analysis:
            spark = local_session(args.master)
            console.print(f"generating {args.events:,} synthetic events and timing the metrics job ...")
            figure = {**analysis_throughput(spark, args.events, work, args.repeat), "taken_at": stamp,
                      "spark": spark.version, "master": spark.sparkContext.master, "lab_commit": commit}
            keep_before(doc, "analysis", figure)
            console.print(doc["analysis"])
        if getattr(args, "test_suite", False):
            console.print(f"timing {TEST_COMMAND} on a fresh clone ...")
            keep_before(doc, "test_suite", {**suite_wall_time(work), "taken_at": stamp, "lab_commit": commit})
            console.print(doc["test_suite"])
        if args.analyse_run:
            spark = local_session(args.master)
            console.print(f"timing the metrics job on {args.analyse_run} ...")
            keep_before(doc, "analysis_of_run", {**analysis_of_run(spark, args.analyse_run, work),
                                                  "taken_at": stamp, "lab_commit": commit})
            console.print(doc["analysis_of_run"])
    finally:
        remove_temp_dir(work)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"written to {out}")
    return 0
