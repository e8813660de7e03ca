"""The one pass over a run's bulk (`processed` and `produced` records), one partition at a time, in Arrow.

Why. The bulk is 99% of a trace, and every figure drawn from it is a
question about one partition: who processed which records when (stretches of
processing, and records processed after the consumer lost the partition) and
which offsets were processed twice, never, or without being produced. So each
partition's records are judged together with that partition's ownership
intervals, in Arrow and numpy (`judge_partition`): no Spark sort, window or
join per record. Spark did the same work in two shuffles, a sort and a dozen
window and join operators; this was the digest's largest cost (`bench harness`).
How the records reach it: a run's analysis reads each trial's trace file in
one Spark task, and `judge_trials` splits it by partition (`groups`);
records given as a DataFrame are shuffled by partition and cogrouped with the
intervals (`digest.bulk_pass`).

What a group yields (one Arrow table, `SCHEMA`, told apart by `row`):

- `stretch` rows, one per stretch of processing of one actor: consecutive
  `processed` records at most `gap_ns` apart (gaps and islands), with
  `lost`: per change window (`change_index`, null outside every window), how
  many of the stretch's records count as processed after a loss (`times`,
  the after-loss rule of `digest._loss_markers`), where that is not zero;
- one `offsets` row: duplicates, records processed and produced, gaps and
  phantom records of the partition (`_offsets`): per offset, how many times
  it was processed and whether it was produced; a duplicate is a processing
  beyond the first, a gap a record produced at or below the partition's
  highest processed offset but never processed, a phantom a record processed
  but never produced.

The after-loss rule, per record at t of actor a (intervals of a: [s, e]):
`owned(t)` = a's intervals holding t; `lost(t)` = a's lost ranges [L, e]
holding t, where L is the first start of another actor's interval in (s, e];
`times` = `lost(t)` + (1 if `owned(t)` is 0). Both counts are two binary
searches in the sorted bounds (a bound at t holds t: starts count from t,
ends until t).

Worked example: c1 owns partition 0 from 0 to 10 s; c2 takes it at 6 s. c1
processes at 1, 2 and 7 s; c2 at 8 s; one change window, index 1, from 5 s:

    >>> import pyarrow as pa
    >>> s = 1_000_000_000
    >>> bulk = pa.table({"actor": ["c1", "c1", "c1", "c2"], "processed": [True] * 4,
    ...                  "ts_ns": [1 * s, 2 * s, 7 * s, 8 * s], "offset": [0, 1, 2, 2]})
    >>> owned = pa.table({"actor": ["c1", "c2"], "start_ns": [0, 6 * s], "stop_ns": [10 * s, 20 * s]})
    >>> windows = Windows.of([("t0", 1, 5 * s, 30 * s)])
    >>> rows = judge_partition(("t0", "t", 0), bulk, owned, windows, gap_ns=s).to_pylist()
    >>> [(r["actor"], r["messages"], r["lost"]) for r in rows if r["row"] == "stretch"]
    [('c1', 2, []), ('c1', 1, [{'change_index': 1, 'times': 1}]), ('c2', 1, [])]
    >>> [(r["duplicates"], r["messages_processed"], r["phantom_messages"]) for r in rows if r["row"] == "offsets"]
    [(1, 3, 3)]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

LOST = pa.list_(pa.struct([("change_index", pa.int32()), ("times", pa.int64())]))
SCHEMA = pa.schema([
    ("row", pa.string()), ("trial", pa.string()), ("actor", pa.string()), ("topic", pa.string()),
    ("partition", pa.int32()), ("start_ns", pa.int64()), ("stop_ns", pa.int64()), ("messages", pa.int64()),
    ("lost", LOST), ("duplicates", pa.int64()), ("messages_processed", pa.int64()),
    ("messages_produced", pa.int64()), ("gaps", pa.int64()), ("phantom_messages", pa.int64())])

#: the events there is one of per record: the bulk of a trace
BULK_KINDS = ("processed", "produced")
#: what the bulk is grouped by: one partition of one trial
PARTITION_KEY = ["trial", "topic", "partition"]
#: what `judge_partition` reads of a partition's records
RECORD_COLUMNS = ["actor", "processed", "ts_ns", "offset"]
#: what `judge_partition` reads of a partition's ownership intervals
OWNED_COLUMNS = ["actor", "start_ns", "stop_ns"]
#: a record outside every change window (before the first change, or after the trial's end), as a sortable key
NO_WINDOW = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Windows:
    """Each trial's change windows (start <= t < stop; they do not overlap), sorted by start, for lookup."""

    by_trial: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, rows) -> Windows:
        """From (trial, change_index, start_ns, stop_ns) rows."""
        grouped: dict[str, list] = {}
        for trial, index, start, stop in rows:
            grouped.setdefault(trial, []).append((start, stop, index))
        return cls({trial: tuple(np.array(col, dtype=np.int64) for col in zip(*sorted(ws), strict=True))
                    for trial, ws in grouped.items()})

    def change_index(self, trial: str, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, inside): each time's change index, and whether it falls in a window at all."""
        if trial not in self.by_trial:
            return np.zeros(len(ts), dtype=np.int64), np.zeros(len(ts), dtype=bool)
        starts, stops, indexes = self.by_trial[trial]
        at = np.searchsorted(starts, ts, side="right") - 1
        inside = (at >= 0) & (ts < stops[np.maximum(at, 0)])
        return indexes[np.maximum(at, 0)], inside


def _holding(starts: np.ndarray, stops: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """How many of the ranges [start, stop] hold each time (ends included)."""
    return (np.searchsorted(np.sort(starts), ts, side="right")
            - np.searchsorted(np.sort(stops), ts, side="left"))


def _lost_ranges(mine: np.ndarray, owned: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The actor's lost ranges [L, e] (`mine`: which intervals are the actor's): for each of its intervals
    [s, e], L is the first start of another actor's interval in (s, e], if any."""
    others = owned["start_ns"][~mine]
    starts, stops = [], []
    for s, e in zip(owned["start_ns"][mine], owned["stop_ns"][mine], strict=True):
        taken = others[(others > s) & (others <= e)]
        if len(taken):
            starts.append(taken.min())
            stops.append(e)
    return np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)


def _stretches(actor: str, ts: np.ndarray, owned: dict[str, np.ndarray], windows: Windows, trial: str,
               gap_ns: int) -> list[dict]:
    """One actor's stretches of processing of the partition (`ts` sorted), each with its records after loss."""
    mine = owned["actor"] == actor
    unowned = _holding(owned["start_ns"][mine], owned["stop_ns"][mine], ts) == 0
    times = _holding(*_lost_ranges(mine, owned), ts) + unowned
    new = np.concatenate(([True], np.diff(ts) > gap_ns))  # a record more than the gap after the one before
    stretch = np.cumsum(new) - 1
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:], len(ts)) - 1
    lost: list[list[dict]] = [[] for _ in firsts]
    after = np.flatnonzero(times)  # few in a healthy trial, most of a zombie's: summed per (stretch, window)
    if len(after):
        index, inside = windows.change_index(trial, ts[after])
        window = np.where(inside, index, NO_WINDOW)
        # in time order, a (stretch, window) pair's records are one run, or two for the records outside every
        # window (before the first change and after the end): sum the runs, then merge
        run = np.flatnonzero(np.concatenate(([True], (np.diff(stretch[after]) != 0) | (np.diff(window) != 0))))
        sums: dict[tuple[int, int], int] = {}
        for at, total in zip(run, np.add.reduceat(times[after], run), strict=True):
            pair = (int(stretch[after][at]), int(window[at]))
            sums[pair] = sums.get(pair, 0) + int(total)
        for (s, w), total in sums.items():
            lost[s].append({"change_index": None if w == NO_WINDOW else w, "times": total})
    return [{"row": "stretch", "actor": actor, "start_ns": int(ts[lo]), "stop_ns": int(ts[hi]),
             "messages": int(hi - lo + 1), "lost": lost[i]}
            for i, (lo, hi) in enumerate(zip(firsts, lasts, strict=True))]


def _in(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Whether each value is in `sorted_set` (sorted, unique): a binary search, not a hash of both."""
    at = np.minimum(np.searchsorted(sorted_set, values), max(len(sorted_set) - 1, 0))
    return sorted_set[at] == values if len(sorted_set) else np.zeros(len(values), dtype=bool)


def _offsets(processed: pa.ChunkedArray, produced: pa.ChunkedArray) -> dict:
    """The partition's duplicates, records processed and produced, gaps and phantoms, by offset (a null offset
    is a group of its own, as in a Spark aggregate)."""
    done, counts = np.unique(processed.drop_null().to_numpy(), return_counts=True)
    made = np.unique(produced.drop_null().to_numpy())
    null_done, null_made = processed.null_count, produced.null_count > 0
    reached = done.max() if len(done) else None
    return {"row": "offsets", "duplicates": int((counts - 1).sum()) + max(null_done - 1, 0),
            "messages_processed": len(done) + (null_done > 0), "messages_produced": len(made) + null_made,
            "gaps": 0 if reached is None else int(((made <= reached) & ~_in(made, done)).sum()),
            "phantom_messages": int((~_in(done, made)).sum()) + (null_done > 0 and not null_made)}


def judge_partition(key: tuple, bulk: pa.Table, owned: pa.Table, windows: Windows, gap_ns: int) -> pa.Table:
    """One partition's stretches and offsets (`SCHEMA`).

    `key`: (trial, topic, partition); `bulk`: its records (actor; processed: true for a `processed` record,
    false for a `produced` one; ts_ns; offset); `owned`: its ownership intervals (actor, start_ns, stop_ns)."""
    trial, topic, partition = (k.as_py() if isinstance(k, pa.Scalar) else k for k in key)
    if bulk.num_rows == 0:
        return SCHEMA.empty_table()
    is_processed = bulk["processed"]
    processed = bulk.filter(is_processed).sort_by([("actor", "ascending"), ("ts_ns", "ascending")])
    intervals = {c: owned[c].to_numpy() for c in ("start_ns", "stop_ns")}
    intervals["actor"] = np.array(owned["actor"].to_pylist(), dtype=object)
    rows = [_offsets(processed["offset"], bulk.filter(pc.invert(is_processed))["offset"])]
    actors = processed["actor"].to_numpy()
    ts = processed["ts_ns"].to_numpy()
    bounds = np.flatnonzero(actors[1:] != actors[:-1]) + 1
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(ts)])), strict=True):
        if hi > lo:
            rows += _stretches(actors[lo], ts[lo:hi], intervals, windows, trial, gap_ns)
    for row in rows:
        row.update(trial=trial, topic=topic, partition=partition)
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def groups(table: pa.Table, keys: list[str]) -> Iterator[tuple[tuple, pa.Table]]:
    """`table`'s rows by `keys`: (key, rows) pairs, in ascending order of the keys, from one sort of small
    integer codes and a slice per run of equal keys. A null is a key of its own, as in a Spark group.

    >>> t = pa.table({"p": [1, None, 0, 1], "v": [10, 20, 30, 40]})
    >>> [(key, rows["v"].to_pylist()) for key, rows in groups(t, ["p"])]
    [((0,), [30]), ((1,), [10, 40]), ((None,), [20])]
    """
    if table.num_rows == 0:
        return
    codes = [_codes(table[k]) for k in keys]
    order = np.lexsort(codes[::-1])  # lexsort's last key is its first
    table = table.take(order)
    new = np.zeros(table.num_rows, dtype=bool)
    new[0] = True
    for code in codes:
        code = code[order]
        new[1:] |= code[1:] != code[:-1]
    starts = np.flatnonzero(new)
    for lo, hi in zip(starts, np.append(starts[1:], table.num_rows), strict=True):
        rows = table.slice(lo, hi - lo)
        yield tuple(rows[k][0].as_py() for k in keys), rows


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """Each value's rank among the column's distinct values (0 the least; a null after them all): a hash of
    the values, and a sort of the distinct ones only (a trace's keys repeat: trials, topics, partitions)."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    distinct = len(encoded.dictionary)
    ranks = pc.rank(encoded.dictionary, "ascending", tiebreaker="dense").to_numpy().astype(np.int64) - 1
    return np.append(ranks, distinct)[pc.fill_null(encoded.indices, distinct).to_numpy()]


def judge_trials(bulk: pa.Table, owned: pa.Table, windows: Windows, gap_ns: int) -> pa.Table:
    """`judge_partition` on every partition of whole trials' bulk: `bulk` has `PARTITION_KEY`, `kind`
    (`processed` or `produced`), `actor`, `ts_ns` and `offset`; `owned` the trials' ownership intervals
    (`PARTITION_KEY`, actor, start_ns, stop_ns). What the file pass (`digest.bulk_pass_of_files`) runs on
    each trace file, with no Spark shuffle."""
    bulk = bulk.append_column("processed", pc.equal(bulk["kind"], "processed"))
    owners = {key: rows.select(OWNED_COLUMNS) for key, rows in groups(owned, PARTITION_KEY)}
    no_owner = owned.select(OWNED_COLUMNS).slice(0, 0)
    judged = [judge_partition(key, rows.select(RECORD_COLUMNS), owners.get(key, no_owner), windows, gap_ns)
              for key, rows in groups(bulk, PARTITION_KEY)]
    return pa.concat_tables(judged) if judged else SCHEMA.empty_table()
