"""The digest's one pass over the records agrees with the direct definitions it replaces.

`digest.bulk_pass` judges every record processed against the consumers'
ownership bounds, partition by partition, and cuts stretches of processing;
`metrics.processing_resumed` reads pauses off those stretches. Here random
trials (a few consumers trading two partitions, records on a coarse clock so
that ties with ownership bounds happen) are measured both ways: by the digest,
and by the definitions worked out in Python over the same rows (ownership
intervals, the after-loss rule, gaps and islands, pauses).
"""

from __future__ import annotations

import itertools
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from experiments import metrics
from experiments.digest import NS_PER_S, PROCESSING_GAP_S, Digest
from lab_cluster.spark import cached_datasets
from lab_cluster.trace_reader import ARROW_SCHEMA, TRACE_SCHEMA

pytestmark = pytest.mark.spark

TRIALS = 40
TICK = NS_PER_S // 4  # records and ownership bounds on a quarter-second clock: ties are common


def _trial(rng: random.Random, trial: str) -> list[tuple]:
    """Rows of TRACE_SCHEMA: a scenario with two changes, three consumers trading two partitions."""
    def row(ticks, actor, kind, partition=None, fields=None, topic=None):
        return (ticks * TICK, 0, trial, "zookeeper", actor, kind, "t" if partition is not None else topic, partition,
                None, None, None, None, None, fields)

    rows = [row(0, "scenario", "setup", fields='{"partitions": 2}', topic="t"),
            row(20, "scenario", "change", fields='{"index": 1, "change": "join"}'),
            row(50, "scenario", "change", fields='{"index": 2, "change": "leave"}'),
            row(80, "scenario", "end")]
    for actor in ("c1", "c2", "c3"):
        rows += [row(1, actor, "trace_open"), row(1, actor, "consumer_start")]
        for _ in range(rng.randint(1, 5)):
            kind = rng.choice(("assigned", "assigned", "revoked"))
            partition = rng.randint(0, 1)
            rows.append(row(rng.randint(2, 78), actor, kind, fields=f'{{"partitions": [["t", {partition}]]}}'))
        for _ in range(rng.randint(0, 60)):
            rows.append(row(rng.randint(2, 78), actor, "processed", partition=rng.randint(0, 1)))
        rows.append(row(79, actor, "trace_close"))
    return rows


@pytest.fixture(scope="module")
def digest(spark):
    rng = random.Random(20261124)
    rows = [r for t in range(TRIALS) for r in _trial(rng, f"trial{t}")]
    d = Digest.of(spark.createDataFrame(rows, TRACE_SCHEMA), cache=True)
    yield d, rows
    d.release()


def _after_loss_by_hand(rows, intervals) -> dict[str, int]:
    """Per trial, the records processed after a loss, by `metrics.processed_after_loss`'s definition: an act at t
    counts once for each of its actor's intervals [s, e] holding t in which another actor's ownership began in
    (s, t], and once if none of its actor's intervals holds t."""
    out: dict[str, int] = {}
    for r in rows:
        if r[5] != "processed":
            continue
        trial, actor, partition, t = r[2], r[4], r[7], r[0]
        same = [i for i in intervals if (i.trial, i.partition) == (trial, partition)]
        mine = [i for i in same if i.actor == actor and i.start_ns <= t <= i.stop_ns]
        times = sum(any(o.actor != actor and m.start_ns < o.start_ns <= t for o in same) for m in mine)
        times += not mine
        if times:
            out[trial] = out.get(trial, 0) + times
    return out


def test_records_processed_after_a_loss_are_the_rules_count(digest):
    d, rows = digest
    processed = d.stretches.select("trial", F.explode("lost").alias("a")).groupBy("trial").agg(
        F.sum("a.times").alias("n"))
    by_sweep = {r.trial: r.n for r in processed.collect() if r.n}
    expected = _after_loss_by_hand(rows, d.intervals.collect())
    assert expected, "the random trials hold records processed after a loss (else this compares nothing)"
    assert by_sweep == expected


def _stretches_by_hand(rows) -> set[tuple]:
    records: dict[tuple, list[int]] = {}
    for r in rows:
        if r[5] == "processed":
            records.setdefault((r[2], r[4], r[7]), []).append(r[0])
    out = set()
    for key, times in records.items():
        times.sort()
        start = prev = times[0]
        count = 1
        for ts in times[1:]:
            if ts - prev > PROCESSING_GAP_S * NS_PER_S:
                out.add((*key, start, prev, count))
                start, count = ts, 0
            prev = ts
            count += 1
        out.add((*key, start, prev, count))
    return out


def test_stretches_are_gaps_and_islands(digest):
    d, rows = digest
    got = {(r.trial, r.actor, r.partition, r.start_ns, r.stop_ns, r.messages)
           for r in metrics.processing_intervals(d).collect()}
    assert got == _stretches_by_hand(rows)


def _resumed_by_hand(rows) -> dict[tuple, float | None]:
    """processing_resumed_ms per (trial, change_index), from the definition over the records themselves."""
    gap = PROCESSING_GAP_S * NS_PER_S
    out = {}
    for trial in {r[2] for r in rows}:
        mine = [r for r in rows if r[2] == trial]
        changes = sorted(r[0] for r in mine if r[5] == "change")
        end = min(r[0] for r in mine if r[5] == "end")
        for index, (start, stop) in enumerate(zip(changes, [*changes[1:], end], strict=True), 1):
            resumed, stalled = None, False
            for partition in (0, 1):
                times = sorted(r[0] for r in mine if r[5] == "processed" and r[7] == partition)
                pauses = [b for a, b in itertools.pairwise(times) if b - a > gap and start <= b < stop]
                if pauses:
                    resumed = max(resumed or 0, max(pauses))
                before = [ts for ts in times if ts < stop]
                stalled |= not before or stop - before[-1] > gap
            out[(trial, index)] = None if stalled else ((resumed - start) / 1e6 if resumed else 0.0)
    return out


def test_processing_resumed_from_stretches_is_the_pauses_between_records(digest):
    d, rows = digest
    got = {(r.trial, r.change_index): r.processing_resumed_ms
           for r in metrics.processing_resumed(d.control, d.stretches, d.windows).collect()}
    expected = _resumed_by_hand(rows)
    assert any(v is None for v in expected.values()) and any(v for v in expected.values())
    assert got == expected


def _write_trace_files(rows, folder, files: int) -> list[str]:
    """The rows in `files` Parquet files, whole trials in each, as trials' tasks write them (`write_columnar`)."""
    paths = []
    for i in range(files):
        mine = [r for r in rows if int(r[2].removeprefix("trial")) % files == i]
        path = folder / f"part{i}.parquet"
        pq.write_table(pa.table({f.name: [r[n] for r in mine] for n, f in enumerate(ARROW_SCHEMA)},
                                schema=ARROW_SCHEMA), path)
        paths.append(str(path))
    return paths


def _every_output(d: Digest) -> dict[str, list]:
    frames = {"changes": metrics.change_metrics(d), "trials": metrics.trial_metrics(d),
              "cross_check": metrics.cross_check(d), "stretches": d.stretches, "offsets": d.offsets}
    return {name: sorted(map(tuple, frame.collect()), key=repr) for name, frame in frames.items()}


def test_the_file_pass_in_small_settings_gives_the_metrics_spark_gives(spark, digest, tmp_path):
    """`Digest.of_files` (the bulk judged from each trace file, the rest in `SMALL_INPUT_SETTINGS`) against
    `Digest.of` left lazy (everything in Spark's own settings): the change and trial metrics, the cross-check,
    the stretches and the offsets the same."""
    _, rows = digest
    files = _write_trace_files(rows, tmp_path, 4)
    (tmp_path / "empty").mkdir()
    files += _write_trace_files([], tmp_path / "empty", 1)  # a trial that recorded nothing
    reference = _every_output(Digest.of(spark.createDataFrame(rows, TRACE_SCHEMA)))
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    d = Digest.of_files(spark, files)
    try:
        assert d.small
        with d.settings():
            assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
            got = _every_output(d)
    finally:
        d.release()
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive  # the settings end with the context
    assert reference["stretches"] and any(r[-1] for r in reference["stretches"])  # stretches with records lost
    assert got == reference


def test_a_partition_split_over_two_files_is_refused(spark, digest, tmp_path):
    _, rows = digest
    trial0 = [r for r in rows if r[2] == "trial0"]
    processed = [r for r in trial0 if r[5] == "processed" and r[7] == 0]
    assert len(processed) >= 2
    rest = [r for r in trial0 if r not in processed[:1]]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = _write_trace_files(rest, tmp_path / "a", 1) + _write_trace_files(processed[:1], tmp_path / "b", 1)
    before = cached_datasets()  # the module's digest stays cached meanwhile
    with pytest.raises(ValueError, match="trial0 are in two trace files"):
        Digest.of_files(spark, files)
    assert cached_datasets() == before  # what the refused digest had cached went with it
