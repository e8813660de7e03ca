"""A run's trace events, read once and reduced to what the metrics need: the `Digest`.

Why. Almost every event of a trace is a record a consumer `processed` or the
producer `produced` (the bulk: 99% of a long trial). Every other metric reads
the rest (changes, ZooKeeper requests, assignments, commits: the control
events), a few thousand rows. The metrics job used to filter, join and sort the
whole trace once per metric, and at ten million events spent twelve minutes
doing it (`bench harness`). The digest does the bulk's work in two passes and
keeps the rest small:

- `control`: every event but the bulk. Every metric but the processing ones
  reads only this.
- `last_events`: (trial, actor, ts_ns) of each actor's last event, whatever its
  kind: where a consumer's trace ends (a killed consumer's last event is often a
  `processed` record), which ends whatever it still owned (`ownership_intervals`).
- `stretches` and `offsets` (the bulk pass, `bulk_pass`): one row per stretch
  of processing of a consumer and partition (`processing_intervals`), with
  how many of its records it processed after losing the partition (`lost`:
  `after_loss`'s rule), counted per change window, not listed; and one row
  per trial: duplicates, records processed and produced, gaps and phantom
  records (processed, never produced). Each partition's records are judged
  with its ownership intervals in Arrow and numpy (`experiments/bulk_pass.py`).
  A run's analysis reads them from the trace files themselves, one Spark task
  per file (`Digest.of_files`, `bulk_pass_of_files`); events given as a
  DataFrame go through one shuffle by partition instead (`Digest.of`,
  `bulk_pass`).

`Digest.of(events)` builds it lazily (tests, one-off use); `cache=True` computes
and keeps every part in memory, for a job that reads them many times
(`harness.analyse`, `bench harness`), and `release()` lets them go. A cached
digest knows whether its control events are few, and `settings()` plans the
metrics over it accordingly (`SMALL_INPUT_SETTINGS`). The metrics are the same
whichever way; only the work differs (`tests/test_digest.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, StringType

from experiments.bulk_pass import (
    BULK_KINDS,
    OWNED_COLUMNS,
    PARTITION_KEY,
    SCHEMA,
    Windows,
    judge_partition,
    judge_trials,
)
from experiments.engine import store
from lab_cluster.trace_reader import TRACE_SCHEMA

CONSUMER_START = "consumer_start"  # the first event of every family's consumer (lab_cluster/events.py)
NS_PER_S = 1_000_000_000
#: processed events of one consumer and partition at most this far apart belong to one stretch of processing
PROCESSING_GAP_S = 1.0
_KEY = ["trial", "actor", "topic", "partition"]
#: what identifies a change's window
KEYS = ["trial", "change_index"]
#: the offsets' counts, per trial (`Digest.offsets`; defined in `bulk_pass._offsets`)
OFFSET_COUNTS = ["duplicates", "messages_processed", "messages_produced", "gaps", "phantom_messages"]
#: Spark's settings for plans over few rows (`Digest.settings`). The metrics are dozens of joins and windows
#: over the control events, a few thousand rows a trial; planned as Spark plans large inputs, the plan's
#: fixed costs are most of the job's time (`bench harness`): adaptive execution splits it into a job per
#: exchange, re-planned one at a time; every operator's code is generated and compiled before a row flows;
#: each shuffle is cut in several tasks. Unsplit, interpreted and in one task per shuffle, the same plans run
#: in two thirds of the time. These settings change how Spark runs a plan, not what it means: every table of
#: the stored runs came out identical (`benchmarks/README.md`, the metrics job); only what a plan leaves to chance may
#: differ, as the last bit of a mean of doubles, summed in another order. `factoryMode` is Spark's switch for
#: interpreted expressions, which its documentation keeps for its own use: a Spark release may drop it,
#: and the plans then run compiled, as fast as before this setting, with the same values.
SMALL_INPUT_SETTINGS = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1",
                        "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
#: below how many control events a run's digest counts as small (`SMALL_INPUT_SETTINGS`). Measured here (2
#: cores): the metrics over the synthetic ten million events of `bench harness` (80,000 control events) in
#: 5 s against 8; the herd's full run (1.6 million control events) digested and measured in 46 s against 52.
#: Larger inputs keep Spark's own settings, whose shuffles in several tasks a cluster's cores can share.
SMALL_CONTROL_EVENTS = 2_000_000


def field(name: str) -> Column:
    return F.get_json_object("fields", f"$.{name}")


def consumer_events(events: DataFrame) -> DataFrame:
    """The events of consumers (actors whose trace starts a consumer of any family)."""
    consumers = events.where(F.col("kind") == CONSUMER_START).select("trial", "actor").distinct()
    return events.join(consumers, ["trial", "actor"], "left_semi")


def ownership_intervals(ce: DataFrame, last_events: DataFrame) -> DataFrame:
    """trial, actor, topic, partition, start_ns, stop_ns: one row per stretch a consumer owned a partition.

    `ce`: the consumers' control events (`consumer_events`); `last_events`: each
    actor's last event of any kind (`Digest.last_events`). A consumer owns a
    partition from its `assigned` event to its next `assigned`/`revoked` for it,
    or the end of its trace. A consumer restarted under its name (the storm's
    `restart`) has two lives in one trace, each from a `trace_open` to its
    `trace_close`: ownership never runs past a life's end (a ZooKeeper-era
    consumer records no `revoked` when it stops; its session's close releases
    everything) nor into the next life.
    """
    moves = (ce.where(F.col("kind").isin("assigned", "revoked"))
             .select("trial", "actor", "ts_ns", "kind",
                     F.explode(F.from_json(field("partitions"), ArrayType(ArrayType(StringType())))).alias("tp"))
             .select("trial", "actor", "ts_ns", "kind", F.col("tp")[0].alias("topic"),
                     F.col("tp")[1].cast("int").alias("partition")))
    # a life ends where its process closed the trace (`trace_close`), where the actor's next process opened it
    # again (a restarted consumer appends to its own trace; a killed one never closed it), or at the trace's end:
    # whatever an old process held, the new one holds nothing until it is assigned
    lives = (ce.where(F.col("kind").isin("trace_open", "trace_close"))
             .withColumn("first", F.min("ts_ns").over(Window.partitionBy("trial", "actor")))
             .where((F.col("kind") == "trace_close") | (F.col("ts_ns") > F.col("first")))
             .select("trial", "actor", "ts_ns"))
    trace_ends = last_events.join(ce.select("trial", "actor").distinct(), ["trial", "actor"]).unionByName(lives)
    ends = (moves.select("trial", "actor", "topic", "partition").distinct().join(trace_ends, ["trial", "actor"])
            .withColumn("kind", F.lit("trace_end")))
    steps = moves.unionByName(ends)
    order = F.when(F.col("kind") == "assigned", 1).otherwise(0)  # at one instant, a release before a claim
    w = Window.partitionBy(*_KEY).orderBy("ts_ns", order)
    return (steps.withColumn("next_ns", F.lead("ts_ns").over(w))
            .where(F.col("kind") == "assigned")
            .select(*_KEY, F.col("ts_ns").alias("start_ns"), F.coalesce("next_ns", "ts_ns").alias("stop_ns"))
            .where(F.col("stop_ns") > F.col("start_ns")))


def change_windows(control: DataFrame, ce: DataFrame) -> DataFrame:
    """One row per change: KEYS, change, members_before/after, members (names), about, start_ns, stop_ns,
    assigned_ns (the last `assigned` in the window, if any) and converged_ns (that, or stop_ns).

    The trial runner's `scenario` actor records each `change` and an `end`; a
    change's window runs from its `change` to the next change (or `end`)."""
    scenario = control.where(F.col("actor") == "scenario")
    changes = scenario.where(F.col("kind") == "change").select(
        "trial", field("index").cast("int").alias("change_index"), field("change").alias("change"),
        field("members_before").cast("int").alias("members_before"),
        field("members_after").cast("int").alias("members_after"),
        F.from_json(field("members"), ArrayType(StringType())).alias("members"), F.col("member").alias("about"),
        F.col("ts_ns").alias("start_ns"))
    ends = scenario.where(F.col("kind") == "end").groupBy("trial").agg(F.min("ts_ns").alias("end_ns"))
    by_time = Window.partitionBy("trial").orderBy("start_ns")
    windows = (changes.join(ends, "trial")
               .withColumn("stop_ns", F.coalesce(F.lead("start_ns").over(by_time), F.col("end_ns")))
               .drop("end_ns"))
    last_assigned = (in_window(ce.where(F.col("kind") == "assigned"), windows)
                     .groupBy(*KEYS).agg(F.max("ts_ns").alias("assigned_ns")))
    return (windows.join(last_assigned, KEYS, "left")
            .withColumn("converged_ns", F.coalesce("assigned_ns", "stop_ns")))


def in_window(events: DataFrame, windows: DataFrame, how: str = "inner") -> DataFrame:
    """Events joined to the window they fall in (start_ns <= ts_ns < stop_ns), with its `converged_ns` if known.

    A trial's windows do not overlap, so an event falls in one at most; `how="left"` keeps the events outside
    every window too, with the window's columns null."""
    extra = ["converged_ns"] if "converged_ns" in windows.columns else []
    w = windows.select(F.col("trial").alias("_w_trial"), *KEYS[1:], "start_ns", F.col("stop_ns").alias("_stop"),
                       *extra)
    inside = ((F.col("trial") == F.col("_w_trial")) & (F.col("ts_ns") >= F.col("start_ns"))
              & (F.col("ts_ns") < F.col("_stop")))
    return events.join(w, inside, how).drop("_w_trial", "_stop")


def _loss_markers(intervals: DataFrame) -> DataFrame:
    """The bounds the processing pass sweeps: _KEY, ts_ns, order, owned, lost.

    An act (a record processed, an offset committed) at t by a consumer on a
    partition counts as after loss (`after_loss`) once for each of its
    ownership intervals [s, e] holding t (both ends included) in which another
    consumer's ownership of the partition began after s and at or before t, and
    once if no interval of its own holds t (another consumer's ownership that
    began after the actor's own, whether or not it still lasts: a zombie's stale
    offset that lands a moment after the new owner let go is still a zombie's). For an interval, the first such
    start L makes [L, e] its lost range. Markers: +1 at an interval's (or a
    lost range's) start, ordered before the acts of that instant (`order` 0),
    -1 at its end, after them (`order` 2); the acts are `order` 1.
    """
    m, o = intervals.alias("m"), intervals.alias("o")
    first_other = (m.join(o, (F.col("m.trial") == F.col("o.trial")) & (F.col("m.topic") == F.col("o.topic"))
                          & (F.col("m.partition") == F.col("o.partition")) & (F.col("m.actor") != F.col("o.actor"))
                          & (F.col("o.start_ns") > F.col("m.start_ns")) & (F.col("o.start_ns") <= F.col("m.stop_ns")))
                   .groupBy(*[F.col(f"m.{c}").alias(c) for c in _KEY], F.col("m.start_ns").alias("start_ns"),
                            F.col("m.stop_ns").alias("stop_ns"))
                   .agg(F.min("o.start_ns").alias("lost_ns")))

    def marker(frame: DataFrame, at: str, order: int, owned: int, lost: int) -> DataFrame:
        return frame.select(*_KEY, F.col(at).alias("ts_ns"), F.lit(order).alias("order"),
                            F.lit(owned).alias("owned"), F.lit(lost).alias("lost"))

    return (marker(intervals, "start_ns", 0, 1, 0).unionByName(marker(intervals, "stop_ns", 2, -1, 0))
            .unionByName(marker(first_other, "lost_ns", 0, 0, 1))
            .unionByName(marker(first_other, "stop_ns", 2, 0, -1)))


def after_loss(acts: DataFrame, intervals: DataFrame) -> DataFrame:
    """_KEY, ts_ns, order, times: each act (a row of `acts` with _KEY and ts_ns) with how many of the after-loss
    rule's cases it meets (`_loss_markers`; 0: none, the actor held the partition and nobody newer did).

    One sort of the acts by actor, partition and time, with the ownership bounds
    swept in as markers, instead of a join of every act with every interval. The
    accepted commits (`zombie_commits_accepted`) are judged by it; the records
    processed (`processed_after_loss`) by the same rule in the bulk pass
    (`bulk_pass._stretches`), which needs no sort by Spark.
    """
    marked = acts.select(*_KEY, "ts_ns", F.lit(1).alias("order"), F.lit(0).alias("owned"), F.lit(0).alias("lost"))
    so_far = Window.partitionBy(*_KEY).orderBy("ts_ns", "order").rowsBetween(Window.unboundedPreceding, 0)
    return (marked.unionByName(_loss_markers(intervals))
            .withColumn("owned_now", F.sum("owned").over(so_far))
            .withColumn("lost_now", F.sum("lost").over(so_far))
            .where(F.col("order") == 1)
            .select(*_KEY, "ts_ns", "order",
                    (F.col("lost_now") + F.when(F.col("owned_now") == 0, 1).otherwise(0)).alias("times")))


def bulk_pass(events: DataFrame, intervals: DataFrame, windows: DataFrame,
              gap_s: float = PROCESSING_GAP_S) -> DataFrame:
    """`bulk_pass.SCHEMA`'s rows: every partition's stretches of processing and its offsets, in one pass.

    The bulk is shuffled once, by (trial, topic, partition), and cogrouped with
    the partition's ownership intervals; each group is judged in Arrow
    (`experiments/bulk_pass.py`). The change windows, a few rows per trial, go
    with the function."""
    lookup = _window_lookup(windows)
    gap_ns = int(gap_s * NS_PER_S)
    bulk = events.where(F.col("kind").isin(*BULK_KINDS)).select(
        *PARTITION_KEY, "actor", (F.col("kind") == "processed").alias("processed"), "ts_ns", "offset")
    # new names for the intervals' columns: both sides come from `events`, which Spark would call ambiguous
    owned = intervals.select(*(F.col(c).alias(c) for c in [*PARTITION_KEY, *OWNED_COLUMNS]))

    def judge(key, records, ownership):
        return judge_partition(key, records, ownership, lookup, gap_ns)

    return (bulk.groupBy(*PARTITION_KEY).cogroup(owned.groupBy(*PARTITION_KEY))
            .applyInArrow(judge, from_arrow_schema(SCHEMA)))


def bulk_pass_of_files(spark: SparkSession, files: list[str], intervals: DataFrame, windows: DataFrame,
                       gap_s: float = PROCESSING_GAP_S) -> DataFrame:
    """`bulk_pass`'s rows, read from the trace files themselves: one Spark task per file.

    Each task reads its file's bulk with pyarrow (typed and columnar, the other
    events filtered out as it reads) and judges each of its partitions
    (`bulk_pass.judge_trials`): no record goes through Spark's rows, a shuffle or
    the JVM-to-Python bridge, which cost the Spark-fed pass (`bulk_pass`) three
    quarters of its time (`benchmarks/README.md`, the metrics job). What it needs beside the files, the
    ownership intervals and the change windows (a few rows per change), goes
    with the function. Each file must hold whole trials (`Digest.of_files`)."""
    lookup = _window_lookup(windows)
    owned = intervals.select(*PARTITION_KEY, *OWNED_COLUMNS).toArrow()
    gap_ns = int(gap_s * NS_PER_S)
    columns = [*PARTITION_KEY, "actor", "kind", "ts_ns", "offset"]

    def judge_files(batches):
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for batch in batches:
            for index in batch.column("id").to_pylist():
                filesystem, path = store.filesystem(files[index])
                bulk = pq.read_table(path, filesystem=filesystem, columns=columns,
                                     filters=pc.field("kind").isin(BULK_KINDS))
                theirs = owned.filter(pc.is_in(owned["trial"], value_set=pc.unique(bulk["trial"])))
                yield from judge_trials(bulk, theirs, lookup, gap_ns).to_batches()

    return spark.range(0, len(files), 1, max(len(files), 1)).mapInArrow(judge_files, from_arrow_schema(SCHEMA))


def _window_lookup(windows: DataFrame) -> Windows:
    """The change windows (`change_windows`), a few rows a trial, collected for the bulk pass's function."""
    return Windows.of(windows.select("trial", "change_index", "start_ns", "stop_ns").collect())


def _no_partition_in_two_files(bulk: DataFrame) -> None:
    """Raise ValueError if the file pass judged a partition twice: its records were in two files."""
    twice = (bulk.where(F.col("row") == "offsets").groupBy(*PARTITION_KEY).count()
             .where(F.col("count") > 1).select("trial").distinct().limit(5).collect())
    if twice:
        raise ValueError(f"the records of a partition of trial(s) {', '.join(str(r.trial) for r in twice)} are in two "
                         "trace files: the file pass judges each file on its own, so a file must hold whole "
                         "trials (one file per trial, as `trace_reader.write_columnar` writes them); read such "
                         "files with `Digest.of` instead")


@contextmanager
def _settings(frame: DataFrame, settings: dict[str, str]) -> Iterator[None]:
    """`settings` in force in `frame`'s Spark session for the duration; what was set before, back after."""
    conf = frame.sparkSession.conf
    before = {key: conf.get(key, None) for key in settings}  # None: not set, Spark's default in force
    try:
        for key, value in settings.items():
            conf.set(key, value)
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


@dataclass(frozen=True)
class Digest:
    """A run's events as the metrics read them (see the module's docstring)."""

    control: DataFrame
    last_events: DataFrame
    #: the consumers' control events
    consumers: DataFrame
    #: who owned which partition when (`ownership_intervals`)
    intervals: DataFrame
    #: the changes' windows (`change_windows`)
    windows: DataFrame
    stretches: DataFrame
    offsets: DataFrame
    _cached: tuple[DataFrame, ...] = ()
    #: whether the control events are few (`SMALL_CONTROL_EVENTS`), when counted (`cache`)
    small: bool = False

    @classmethod
    def of(cls, events: DataFrame, *, cache: bool = False) -> Digest:
        """The digest of `events` (`lab_cluster.trace_reader.TRACE_SCHEMA`), its bulk shuffled through Spark
        (`bulk_pass`).

        Lazily (nothing computed yet), or with `cache`: every part computed now
        and kept in memory until `release`."""
        return cls._of(events, lambda intervals, windows: bulk_pass(events, intervals, windows), cache)

    @classmethod
    def of_files(cls, spark: SparkSession, files: list[str]) -> Digest:
        """The digest of the events in `files` (Parquet with `TRACE_SCHEMA`, each holding whole trials, as a
        trial's task writes them: `trace_reader.write_columnar`), computed and cached (`release` lets it go),
        its bulk read from the files themselves (`bulk_pass_of_files`). The same digest as `of` on the same
        events; raises ValueError if a partition's records span two files, which the file pass would judge
        in halves."""
        events = (spark.read.schema(TRACE_SCHEMA).parquet(*files) if files
                  else spark.createDataFrame([], TRACE_SCHEMA))
        return cls._of(events, lambda intervals, windows: bulk_pass_of_files(spark, files, intervals, windows),
                       cache=True, check=_no_partition_in_two_files)

    @classmethod
    def _of(cls, events: DataFrame, bulk_of: Callable[[DataFrame, DataFrame], DataFrame], cache: bool,
            check: Callable[[DataFrame], None] | None = None) -> Digest:
        kept: list[DataFrame] = []

        def keep(frame: DataFrame) -> DataFrame:
            if not cache:
                return frame
            frame = frame.cache()
            kept.append(frame)  # before it is computed: a failed count is released too
            frame.count()
            return frame

        try:
            control = keep(events.where(~F.col("kind").isin(*BULK_KINDS)))
            small = cache and control.count() < SMALL_CONTROL_EVENTS  # a count of the cached rows
            last_events = keep(events.groupBy("trial", "actor").agg(F.max("ts_ns").alias("ts_ns")))
            fitted = SMALL_INPUT_SETTINGS if small else {}
            with _settings(control, fitted):
                ce = keep(consumer_events(control))
                intervals = keep(ownership_intervals(ce, last_events))
                windows = keep(change_windows(control, ce))
            bulk = keep(bulk_of(intervals, windows))  # the records: in Spark's own settings
            with _settings(control, fitted):
                if check:
                    check(bulk)
                consumers = ce.select("trial", "actor").distinct()
                stretches = keep(bulk.where(F.col("row") == "stretch")
                                 .select(*_KEY, "start_ns", "stop_ns", "messages", "lost")
                                 .join(consumers, ["trial", "actor"], "left_semi"))
                offsets = keep(bulk.where(F.col("row") == "offsets").groupBy("trial")
                               .agg(*(F.sum(c).alias(c) for c in OFFSET_COUNTS)))
        except BaseException:  # a failed or interrupted pass: what was cached before it goes too
            for frame in kept:
                frame.unpersist()
            raise
        return cls(control, last_events, ce, intervals, windows, stretches, offsets, tuple(kept), small)

    def settings(self) -> AbstractContextManager[None]:
        """A context in which Spark plans the metrics over this digest as suits its size: with few control
        events (`small`), `SMALL_INPUT_SETTINGS`; else Spark's own."""
        return _settings(self.control, SMALL_INPUT_SETTINGS if self.small else {})

    def release(self) -> None:
        for frame in self._cached:
            frame.unpersist()

    def trials(self, trials: list[str]) -> Digest:
        """The digest of these trials only."""
        def only(frame: DataFrame) -> DataFrame:
            return frame.where(F.col("trial").isin(trials))
        return Digest(*(only(getattr(self, f.name)) for f in fields(self)
                        if isinstance(getattr(self, f.name), DataFrame)), small=self.small)


def digest_of(events: DataFrame | Digest) -> Digest:
    """`events` as a digest (a metric accepts either)."""
    return events if isinstance(events, Digest) else Digest.of(events)
