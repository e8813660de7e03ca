"""The Spark harness: a grid of trials as a Spark job, their traces reduced to metrics with Spark SQL.

1. `run_grid` makes the grid of `TrialSpec`s a DataFrame with one partition
   per trial; `mapInPandas` runs each partition's trial on whichever executor
   gets it (`local[*]` by default, any `--master`). Each task takes a machine
   slot first (`slots.py`: timing-sensitive trials do not share a machine unless
   the user raises `trials_per_machine`), runs the trial into the run
   directory (`store.py`) and returns its `TrialResult` as one row. A trial
   whose group is spread over a barrier stage's tasks (`TrialSpec.host_tasks`,
   `host_tasks.py`) submits that stage itself: such trials run on the driver,
   one at a time, after the others.
2. `analyse` reads every trial's traces back as one DataFrame (from the Parquet
   file each trial's task wrote as it ended) and computes the
   metrics (`metrics.py`) for the trials that ran to the end, checks each one's
   traces are complete and that the clients' ZooKeeper counts agree with the
   server's, and writes `results/*.parquet` and `summary.csv`. A trial is `ok`
   only if it ran to the end, its traces are complete, the cross-check agrees
   and every change converged (unless its spec says non-convergence is an
   outcome to measure: `converge_required=False`, the split-brain trials, whose
   `converged` column then says); otherwise it is `failed` with the reasons, and
   its metrics are not reported as results.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import fields
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

from experiments import metrics, overhead
from experiments.digest import Digest
from experiments.engine import store
from experiments.engine.slots import machine_slot
from experiments.engine.trial import PARAMS, SETUP_PARAMS, TrialSpec, run_trial
from lab_cluster.processes import honour_ctrl_c, proc_stat
from lab_cluster.trace_reader import COLUMNAR_FILE, incomplete_trials
from lab_cluster.zk import BackendRequest

#: a spec's fields as Spark types; its tuples travel as JSON strings (`TrialSpec.as_row`)
_SPARK_TYPES = {"str": StringType(), "int": LongType(), "float": DoubleType(), "bool": BooleanType()}
#: the grid's schema, derived from `TrialSpec` (one row per trial, in `as_row`'s order: its fields, each
#: parameter, then its id)
GRID_SCHEMA = StructType([StructField(f.name, _SPARK_TYPES.get(f.type, StringType())) for f in fields(TrialSpec)
                          if f.name != "params"]
                         + [StructField(name, LongType() if isinstance(default, int) else DoubleType())
                            for name, default in PARAMS.items()]
                         + [StructField("trial", StringType())])
RESULT_SCHEMA = StructType([
    StructField("trial", StringType()), StructField("status", StringType()), StructField("reason", StringType()),
    StructField("trial_dir", StringType()), StructField("wall_s", DoubleType()),
    StructField("environment", StringType()),
])
#: what identifies a row of the summary: the trial's spec (its set-up parameters among it) and the change
IDENTITY = ["experiment", "variant", "design", "consumers", "partitions", *SETUP_PARAMS, "seed", "repetition",
            "change", "change_index", "members_before", "members_after"]
METRICS = ["notifications_per_change", "zk_requests_per_change", "membership_reads_per_change",
           "broker_requests_per_change",
           "control_messages_per_change", "rebalance_attempts", "rebalance_failures", "owner_conflicts",
           "convergence_ms", "converged", "unowned_partition_s", "unowned_at_end", "member_partitions",
           "double_owned_partition_s",
           "double_processed_partition_s", "view_divergence", "stale_views", "duplicates", "gaps",
           "zombie_commits_accepted", "processed_after_loss", "offsets_moved_backwards", "commits_fenced",
           "members_fenced", "requests_fenced",
           "first_message_ms", "partitions_moved", "partitions_spread", "members_revoking", "partitions_revoked",
           "generations", "unprocessed_partition_s", "processing_resumed_ms",
           "learnt_ms", "first_new_owned_ms", "new_processing_ms", "new_unowned_partition_s"]
CHECKS = ["server_notifications", "client_notifications", "client_unheard", "server_packets_received",
          "client_requests"]
SUMMARY_COLUMNS = [*IDENTITY, "status", "reason", *METRICS, *CHECKS, "messages_produced", "messages_processed",
                   *overhead.COLUMNS, "zk_backend", "zk_version", "trial", "wall_s"]


def _trial_location(run_uri: str, trial: str) -> tuple[Path, str | None]:
    """Where a trial writes (a local dir) and, for a remote run, where that dir is published."""
    local = store.local_path(run_uri)
    if local is not None:
        return local / "trials" / trial, None
    return Path(tempfile.mkdtemp(prefix=f"lab-{trial}-")), store.join(run_uri, "trials", trial)


def _ppid(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[1]) if fields else None


_watching = False


def _interrupt_if_spark_dies() -> None:
    """Executor side: if the Spark JVM that runs this task goes away (the driver was Ctrl-C'd or killed),
    interrupt the trial in the main thread, so that its ExitStack stops everything it started now
    rather than after the trial's own end.

    A Python worker is forked by PySpark's daemon, whose parent is the executor's JVM; when that JVM
    dies, the daemon is re-parented. Linux only (/proc); elsewhere the trial runs to its end.
    """
    global _watching
    daemon = os.getppid()
    jvm = _ppid(daemon)
    main = threading.main_thread()
    if _watching or jvm is None or threading.current_thread() is not main:
        return  # one watchdog per worker (PySpark reuses workers across tasks)
    _watching = True

    def watch():
        while main.is_alive():
            if _ppid(daemon) != jvm:
                signal.pthread_kill(main.ident, signal.SIGINT)
                return
            time.sleep(0.5)

    threading.Thread(target=watch, name="spark-watchdog", daemon=True).start()


def _run_one(spec: TrialSpec, run_uri: str, trials_per_machine: int, zk_backend: BackendRequest,
             spark_context=None) -> dict:
    """Run one trial where this code runs (a task, or the driver for one with `host_tasks`): its result row."""
    local_dir, remote = _trial_location(run_uri, spec.trial_id)
    with machine_slot(trials_per_machine):
        result = run_trial(spec, local_dir, zk_backend, spark_context)
    # where the task ran: on a standalone cluster, the executor's work dir names its worker and executor
    result.environment["spark_task_dir"] = os.getcwd()
    if remote:
        store.publish(local_dir, remote)
        result.trial_dir = remote
    return {"trial": result.trial, "status": result.status, "reason": result.reason, "trial_dir": result.trial_dir,
            "wall_s": float(result.wall_s), "environment": json.dumps(result.environment)}


def _run_trials(batches, run_uri: str, trials_per_machine: int, zk_backend: BackendRequest):
    """The Spark task: run each trial of this partition (one, by construction) and yield its result row."""
    honour_ctrl_c()
    _interrupt_if_spark_dies()
    for batch in batches:
        for row in batch.to_dict("records"):
            yield pd.DataFrame([_run_one(TrialSpec.from_row(row), run_uri, trials_per_machine, zk_backend)])


def longest_first(specs: list[TrialSpec], seconds: dict[str, float] | None = None) -> list[TrialSpec]:
    """The trials in the order their tasks start: the longest first, by the mean seconds of their experiment and
    design in the last run `bench trial-time` measured here (`benchmarks/trial_time.json`), the others after, in
    grid order. K trials run at a time: a long trial that starts last holds the run up alone (the tour's longest
    took 85 s of its 4 minutes). The order changes when a trial starts, not what it measures.

    >>> from experiments.engine.trial import TrialSpec
    >>> [s.design for s in longest_first([TrialSpec("herd", "zookeeper", 2, 4), TrialSpec("herd", "classic", 2, 4),
    ...                                   TrialSpec("herd", "tubemq", 2, 4)], {"herd/classic": 30, "herd/tubemq": 60})]
    ['tubemq', 'classic', 'zookeeper']
    """
    if seconds is None:
        from experiments.bench.trial_time import mean_seconds

        seconds = mean_seconds()
    return sorted(specs, key=lambda s: -seconds.get(f"{s.experiment}/{s.design}", 0.0))


def grid_frame(spark: SparkSession, specs: list[TrialSpec]) -> DataFrame:
    rows = [s.as_row() for s in specs]
    if len({r["trial"] for r in rows}) != len(rows):
        raise ValueError("two trial specs of one grid have the same identity")
    cast = {DoubleType(): float, LongType(): int, StringType(): str, BooleanType(): bool}
    rdd = spark.sparkContext.parallelize([tuple(cast[f.dataType](r[f.name]) for f in GRID_SCHEMA.fields)
                                          for r in rows], max(1, len(rows)))
    return spark.createDataFrame(rdd, GRID_SCHEMA)


def run_grid(spark: SparkSession, specs: list[TrialSpec], run_uri: str, *, trials_per_machine: int = 1,
             zk_backend: BackendRequest | None = None,
             on_progress: Callable[[dict[str, dict]], None] | None = None) -> pd.DataFrame:
    """Run every trial as a Spark task; returns the trials' results (one row each).

    `zk_backend`: what the trials' ZooKeeper runs on, read here on the driver (default: LAB_ZK_BACKEND
    and LAB_ZK_CONNECT) and carried to every task, whose environment is the executor's, not ours."""
    zk_backend = zk_backend or BackendRequest.from_environment()
    local = store.local_path(run_uri)
    if local is not None:
        local.mkdir(parents=True, exist_ok=True)
        (local / "grid.json").write_text(json.dumps([s.as_row() for s in specs], indent=1) + "\n")
    in_tasks = longest_first([s for s in specs if not s.host_tasks])
    rows = _run_in_tasks(spark, in_tasks, run_uri, trials_per_machine, zk_backend, on_progress) if in_tasks else []
    # a trial whose hosts are a barrier stage's tasks submits that stage itself: it runs here, on the driver, one
    # at a time, after the others (which would hold the task slots its stage needs)
    on_driver = [s for s in specs if s.host_tasks]
    if on_driver:
        rows.append(_run_on_driver(spark, on_driver, run_uri, trials_per_machine, zk_backend, on_progress))
    if not rows:
        return pd.DataFrame(columns=RESULT_SCHEMA.names)
    return pd.concat(rows, ignore_index=True) if len(rows) > 1 else rows[0]


def _run_in_tasks(spark: SparkSession, specs: list[TrialSpec], run_uri: str, trials_per_machine: int,
                  zk_backend: BackendRequest, on_progress) -> list[pd.DataFrame]:
    """The grid's trials as one Spark job, a task each; polls their progress while it runs."""
    local = store.local_path(run_uri)
    job = grid_frame(spark, specs).mapInPandas(
        lambda batches: _run_trials(batches, run_uri, trials_per_machine, zk_backend), RESULT_SCHEMA)
    outcome: dict = {}

    def collect():
        try:
            outcome["rows"] = job.toPandas()
        except BaseException as exc:  # surfaced in the driver's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=collect, name="spark-grid", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.5)
        if on_progress and local is not None:
            on_progress(_read_progress(local, specs))
    if "error" in outcome:
        raise outcome["error"]
    return [outcome["rows"]]


def _run_on_driver(spark: SparkSession, specs: list[TrialSpec], run_uri: str, trials_per_machine: int,
                   zk_backend: BackendRequest, on_progress) -> pd.DataFrame:
    """Trials with `host_tasks`, one after another in this thread, their progress polled beside them.

    Ctrl-C (in the main thread) raises KeyboardInterrupt in the trial, which stops its hosts' tasks gracefully
    and then everything else it started, as a local trial stops: PySpark's own SIGINT handler, set aside
    meanwhile, would first cancel every job, killing the tasks and their hosts."""
    local = store.local_path(run_uri)
    done = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if in_main else None

    def poll():
        while not done.wait(0.5):
            on_progress(_read_progress(local, specs))

    if on_progress and local is not None:
        threading.Thread(target=poll, name="driver-trials-progress", daemon=True).start()
    try:
        return pd.DataFrame([_run_one(spec, run_uri, trials_per_machine, zk_backend, spark.sparkContext)
                             for spec in specs])
    finally:
        done.set()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if on_progress and local is not None:
            on_progress(_read_progress(local, specs))


def _read_progress(run_dir: Path, specs: list[TrialSpec]) -> dict[str, dict]:
    found = {}
    for spec in specs:
        try:
            found[spec.trial_id] = json.loads((run_dir / "trials" / spec.trial_id / "progress.json").read_text())
        except (OSError, ValueError):
            pass
    return found


def analyse(spark: SparkSession, run_uri: str, specs: list[TrialSpec], results: pd.DataFrame, *,
            timelines_for: Collection[str] = ()) -> pd.DataFrame:
    """Metrics of every trial that ran to the end; writes results/*.parquet and summary.csv; returns the summary.

    `timelines_for`: the experiments whose trials keep timelines (who processed which partition when) for
    their report sections (`Experiment.keeps_timelines`)."""
    ran = results[results["status"] == "ok"]["trial"].tolist()
    if not ran:
        return _nothing_measured(spark, run_uri, specs, results)
    # each trial's events as its task stored them when it ended (`trace_reader.write_columnar`), digested once
    # and cached: every metric below reads the digest, not the records (`experiments/digest.py`), in the Spark
    # settings that suit its size
    digest = Digest.of_files(spark, [store.join(run_uri, "trials", t, COLUMNAR_FILE) for t in ran])
    try:
        with digest.settings():
            per_change = (metrics.change_metrics(digest)
                          .join(metrics.cross_check(digest), metrics.KEYS, "left").toPandas())
            per_trial = metrics.trial_metrics(digest).toPandas().merge(
                overhead.host_overhead(digest).toPandas(), on="trial", how="left")
            configs = consumer_configs(digest.control)
            problems: dict[str, list[str]] = {}
            must_converge = {s.trial_id for s in specs if s.converge_required}
            for row in incomplete_trials(digest.control, digest.offsets).collect():
                problems.setdefault(row.trial, []).append(row.problem)
            for row in per_change.itertuples():
                if isinstance(row.cross_check_problem, str):
                    problems.setdefault(row.trial, []).append(row.cross_check_problem)
                if not row.converged and row.trial in must_converge:
                    problems.setdefault(row.trial, []).append(
                        f"change {row.change_index} ({row.change}) did not converge: some partition has no live owner "
                        "or two at the window's end")
            per_change = per_change.drop(columns=["cross_check_problem"])

            grid = pd.DataFrame([s.as_row() for s in specs])
            trials = grid.merge(results, on="trial", how="left").merge(per_trial, on="trial", how="left")
            for trial, reasons in problems.items():
                mask = trials["trial"] == trial
                trials.loc[mask, "status"] = "failed"
                trials.loc[mask, "reason"] = "; ".join(sorted(reasons))
            # a trial whose hosts the lab itself starved ran, but its figures are not the design's: invalid
            # (`experiments/overhead.py`); a failed trial stays failed, its reason saying the lab starved it too
            # (the starvation may be why it failed: a sweep's N=1,024 named only its cross-check)
            for row in overhead.starved(digest).collect():
                mask = (trials["trial"] == row.trial) & (trials["status"] == "ok")
                trials.loc[mask, "status"] = "invalid"
                trials.loc[mask, "reason"] = row.problem
                failed = (trials["trial"] == row.trial) & (trials["status"] == "failed")
                trials.loc[failed, "reason"] = (trials.loc[failed, "reason"].fillna("failed")
                                                + f"; and the lab starved it: {row.problem}")
            _add_environment(trials)
            summary = _summary(trials.merge(per_change, on="trial", how="left"))
            faulted = [s.trial_id for s in specs if s.experiment in timelines_for and s.trial_id in ran]
            stretches, marks = metrics.timelines(digest.trials(faulted))
            timelines = {"timelines": stretches.toPandas().sort_values(["trial", "partition", "actor", "start_s"]),
                         "marks": marks.toPandas().sort_values(["trial", "t_s", "actor", "kind"])}
    finally:  # also when a metric fails: a long-lived session must not keep a run's digest
        digest.release()
    _write(spark, run_uri, summary, per_change, trials.drop(columns=["environment"]), configs, timelines)
    return summary.reset_index(drop=True)


def _nothing_measured(spark: SparkSession, run_uri: str, specs: list[TrialSpec],
                      results: pd.DataFrame) -> pd.DataFrame:
    """`analyse` where no trial ran to its end: there is nothing to measure, so no Spark job runs (planning the
    metrics alone took 15 s, 40 s in a new session), and the run gets its verdict at once. Its summary has a row
    per trial, every metric empty; no change was measured and no timeline drawn (`changes` empty, no
    timelines.csv: the report draws none)."""
    trials = pd.DataFrame([s.as_row() for s in specs]).merge(results, on="trial", how="left")
    _add_environment(trials)
    summary = _summary(trials)
    _write(spark, run_uri, summary, summary.iloc[:0], trials.drop(columns=["environment"]), {}, {})
    return summary.reset_index(drop=True)


def _add_environment(trials: pd.DataFrame) -> None:
    """What each trial's task recorded of where it ran, as columns of `trials`."""
    env = trials["environment"].fillna("{}").map(json.loads)
    trials["zk_backend"] = env.map(lambda e: e.get("zk_backend"))
    trials["zk_version"] = env.map(lambda e: e.get("zk_version"))
    trials["spark_task_dir"] = env.map(lambda e: e.get("spark_task_dir"))
    # where a spread group's hosts ran (`host_tasks.py`): one working dir per barrier task
    trials["host_task_dirs"] = env.map(lambda e: json.dumps([h["dir"] for h in e.get("host_tasks", [])]))


def _summary(rows: pd.DataFrame) -> pd.DataFrame:
    """The run's summary: a row per (trial, change), its columns `SUMMARY_COLUMNS` (empty where not measured)."""
    for column in SUMMARY_COLUMNS:
        if column not in rows:
            rows[column] = None
    return rows[SUMMARY_COLUMNS].sort_values(["experiment", "variant", "design", "consumers", *SETUP_PARAMS, "seed",
                                              "repetition", "change_index"], na_position="last")


def consumer_configs(events: DataFrame) -> dict[str, dict]:
    """{design: config} as the consumers recorded it at start (one consumer per design; all of a design share it)."""
    first = (events.where(F.col("kind") == metrics.CONSUMER_START)
             .groupBy("design").agg(F.min_by(metrics.field("config"), "ts_ns").alias("config")).collect())
    return {row.design: json.loads(row.config) for row in first if row.config}


def _write(spark: SparkSession, run_uri: str, summary: pd.DataFrame, per_change: pd.DataFrame,
           trials: pd.DataFrame, configs: dict, timelines: dict[str, pd.DataFrame]) -> None:
    local = store.local_path(run_uri)
    tables = {"changes": per_change, "trials": trials, **timelines}
    if local is not None:
        for name, table in timelines.items():  # small, and what the report draws the timelines from
            table.to_csv(local / f"{name}.csv", index=False)
        (local / "results").mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            table.to_parquet(local / "results" / f"{name}.parquet", index=False)
        summary.to_csv(local / "summary.csv", index=False, float_format="%.6g")
        (local / "configs.json").write_text(json.dumps(configs, indent=1, sort_keys=True) + "\n")
        return
    for name, table in tables.items():
        if table.empty:  # Spark infers no schema from no rows; an empty table is left unwritten
            continue
        spark.createDataFrame(table.astype(str)).write.mode("overwrite").parquet(
            store.join(run_uri, "results", f"{name}.parquet"))
    spark.createDataFrame(summary.astype(str)).coalesce(1).write.mode("overwrite").option("header", True).csv(
        store.join(run_uri, "summary_csv"))
