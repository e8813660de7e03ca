"""Load a trial's traces into Spark, and check that they are complete.

`load_traces(spark, trial_dir)` reads every `traces/*.jsonl` of a trial into a
DataFrame with the fixed schema `TRACE_SCHEMA` (the columns documented in
`trace.py`). `write_columnar(trial_dir)` stores the same events once more, as
one Parquet file (`traces.parquet`), when the trial ends, in its own task: what
a run's analysis reads (typed and columnar, it reads a run twice as fast as the
JSON lines, which stay the trial's record, for people and tests).
`check_complete(df)` answers, with Spark SQL, whether the trial may be
analysed:

- every actor that opened its trace closed it, unless the fault injector
  recorded killing it (a `fault` event with `action` `kill` and that `target`):
  a killed process's trace ends where the kill cut it, and says so;
- every `processed` message was `produced`: a consumer cannot have processed
  an offset the producer never wrote.

A trial that fails either check is reported as incomplete with the reasons,
never analysed as if it had succeeded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

TRACE_SCHEMA = StructType([
    StructField("ts_ns", LongType(), True),  # always present
    StructField("wall_ms", LongType(), True),  # always present
    StructField("trial", StringType(), True),  # always present
    StructField("design", StringType(), True),  # always present
    StructField("actor", StringType(), True),  # always present
    StructField("kind", StringType(), True),  # always present
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("path", StringType(), True),
    StructField("generation", IntegerType(), True),
    StructField("member", StringType(), True),
    StructField("error", StringType(), True),
    StructField("fields", StringType(), True),
])


#: a trial's events in one typed, columnar file, next to its `traces/` (`write_columnar`)
COLUMNAR_FILE = "traces.parquet"
_ARROW_TYPES = {LongType(): pa.int64(), IntegerType(): pa.int32(), StringType(): pa.string()}
ARROW_SCHEMA = pa.schema([(f.name, _ARROW_TYPES[f.dataType]) for f in TRACE_SCHEMA.fields])


def write_columnar(trial_dir: str | Path, out: str | Path | None = None) -> Path:
    """Every event of a trial's `traces/*.jsonl` in one Parquet file with `TRACE_SCHEMA` (`out`, default
    `<trial_dir>/traces.parquet`); returns its path.

    As Spark reads the JSON lines (PERMISSIVE): a line that is not a JSON
    object (a process killed mid-write can leave half of one) is dropped, and a
    value of the wrong type is null. pyarrow reads a clean file in one go; a file
    with such a line is read line by line.
    """
    trial_dir = Path(trial_dir)
    tables = [_read_lines(path) for path in sorted((trial_dir / "traces").glob("*.jsonl"))]
    out = Path(out) if out else trial_dir / COLUMNAR_FILE
    pq.write_table(pa.concat_tables(tables) if tables else ARROW_SCHEMA.empty_table(), out)
    return out


def _read_lines(path: Path) -> pa.Table:
    options = pa_json.ParseOptions(explicit_schema=ARROW_SCHEMA, unexpected_field_behavior="ignore")
    try:
        return pa_json.read_json(path, parse_options=options).select(ARROW_SCHEMA.names)
    except pa.ArrowInvalid:
        pass
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            rows.append({f.name: _typed(event.get(f.name), f.type) for f in ARROW_SCHEMA})
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)


def _typed(value, arrow_type):
    if arrow_type == pa.string():
        return value if isinstance(value, str) else None if value is None else json.dumps(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_traces(spark: SparkSession, trial_dir: str | Path) -> DataFrame:
    """Every event of a trial, one row each, with `TRACE_SCHEMA`."""
    pattern = str(Path(trial_dir) / "traces" / "*.jsonl")
    return spark.read.schema(TRACE_SCHEMA).option("mode", "FAILFAST").json(pattern)


@dataclass
class Completeness:
    complete: bool
    problems: list[str] = field(default_factory=list)
    #: Actors whose trace ends at a recorded kill.
    killed: list[str] = field(default_factory=list)


def unclosed_traces(df: DataFrame) -> DataFrame:
    """(trial, actor, killed): every trace opened and never closed, and whether a kill of it was recorded: of its
    actor by name, or of the process that wrote it (the kill's `pid` is the one its `trace_open` recorded: a
    consumer host's traces, its members' and its own, die with it)."""
    opened = df.where(F.col("kind") == "trace_open").select("trial", "actor", F.get_json_object("fields", "$.pid")
                                                            .alias("pid"))
    closed = df.where(F.col("kind") == "trace_close").select("trial", "actor").distinct()
    kills = df.where((F.col("kind") == "fault") & (F.get_json_object("fields", "$.action") == "kill")).select(
        "trial", F.get_json_object("fields", "$.target").alias("target"),
        F.get_json_object("fields", "$.pid").alias("kill_pid"))
    unclosed = opened.join(closed, ["trial", "actor"], "left_anti")
    killed = (unclosed.join(kills, "trial")
              .where((F.col("target") == F.col("actor")) | (F.col("kill_pid") == F.col("pid")))
              .select("trial", "actor").distinct().withColumn("killed", F.lit(True)))
    return (unclosed.select("trial", "actor").distinct().join(killed, ["trial", "actor"], "left")
            .fillna(False, subset=["killed"]))


def phantom_messages(df: DataFrame) -> DataFrame:
    """(trial, actor, topic, partition, offset): every processed message that was never produced."""
    key = ["trial", "topic", "partition", "offset"]
    produced = df.where(F.col("kind") == "produced").select(*key).distinct()
    return df.where(F.col("kind") == "processed").select("actor", *key).join(produced, key, "left_anti")


def incomplete_trials(df: DataFrame, phantoms: DataFrame | None = None) -> DataFrame:
    """(trial, problem) for every trial of `df` that may not be analysed; the grouped form of `check_complete`.

    `phantoms` (trial, phantom_messages), if the caller has counted them already (the metrics' digest does, in
    its one pass over the records: `experiments/digest.py`); else they are counted here from `df`."""
    unclosed = (unclosed_traces(df).where(~F.col("killed"))
                .groupBy("trial").agg(F.array_join(F.array_sort(F.collect_list("actor")), ", ").alias("actors"))
                .select("trial", F.format_string("the trace of %s was never closed (and no kill was recorded)",
                                                 "actors").alias("problem")))
    if phantoms is None:
        phantoms = phantom_messages(df).groupBy("trial").agg(F.count(F.lit(1)).alias("phantom_messages"))
    phantom = (phantoms.where(F.col("phantom_messages") > 0)
               .select("trial", F.format_string("%d processed message(s) were never produced", "phantom_messages")
                       .alias("problem")))
    return unclosed.unionByName(phantom)


def check_complete(df: DataFrame, max_examples: int = 5) -> Completeness:
    """Whether the one trial of `df` may be analysed, with the reasons if not."""
    unclosed = unclosed_traces(df).collect()
    missing = sorted(r.actor for r in unclosed if not r.killed)
    cut = sorted(r.actor for r in unclosed if r.killed)
    phantom = phantom_messages(df)
    phantom_count = phantom.count()

    problems = [f"the trace of {actor} was never closed (and no kill of it was recorded)" for actor in missing]
    if phantom_count:
        examples = ", ".join(f"{r.actor} processed {r.topic}-{r.partition}@{r.offset}"
                             for r in phantom.orderBy("topic", "partition", "offset").limit(max_examples).collect())
        problems.append(f"{phantom_count} processed message(s) were never produced: {examples}")
    return Completeness(not problems, problems, cut)
