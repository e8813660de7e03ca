"""The bulk pass's judgement of one partition, without Spark: offsets, stretches and the after-loss rule.

`experiments/bulk_pass.py` judges each partition's records in numpy; these are
its definitions worked by hand on small partitions (the Spark side, which
shuffles the records to it, is compared with the direct definitions in
`test_digest.py`).
"""

from __future__ import annotations

import doctest

import pyarrow as pa

from experiments import bulk_pass
from experiments.bulk_pass import Windows, judge_partition

S = 1_000_000_000
KEY = ("t0", "t", 0)


def _judge(records, owned=(), windows=(), gap_ns=S):
    bulk = pa.table({"actor": [r[0] for r in records], "processed": [r[1] == "processed" for r in records],
                     "ts_ns": pa.array([r[2] for r in records], pa.int64()),
                     "offset": pa.array([r[3] for r in records], pa.int64())})
    intervals = pa.table({"actor": pa.array([o[0] for o in owned], pa.string()),
                          "start_ns": pa.array([o[1] for o in owned], pa.int64()),
                          "stop_ns": pa.array([o[2] for o in owned], pa.int64())})
    rows = judge_partition(KEY, bulk, intervals, Windows.of([("t0", *w) for w in windows]), gap_ns).to_pylist()
    assert all((r["trial"], r["topic"], r["partition"]) == KEY for r in rows)
    return ([r for r in rows if r["row"] == "offsets"],
            [(r["actor"], r["start_ns"], r["stop_ns"], r["messages"], sorted(r["lost"], key=str))
             for r in rows if r["row"] == "stretch"])


def test_the_worked_example_in_the_modules_docstring_holds():
    assert doctest.testmod(bulk_pass).failed == 0


def test_offsets_count_duplicates_gaps_up_to_the_highest_processed_and_phantoms_with_a_null_offset_a_group():
    processed = [0, 1, 1, 3, 7, None, None]
    produced = [0, 1, 2, 3, 4, None]
    records = ([("c1", "processed", i * S // 10, o) for i, o in enumerate(processed)]
               + [("producer", "produced", 0, o) for o in produced])
    (offsets,), _ = _judge(records)
    assert offsets["duplicates"] == 2  # offset 1 twice, the null offset twice
    assert offsets["messages_processed"] == 5  # 0, 1, 3, 7 and the null offset
    assert offsets["messages_produced"] == 6  # 0 to 4 and the null offset
    assert offsets["gaps"] == 2  # 2 and 4: produced, never processed, at or below 7
    assert offsets["phantom_messages"] == 1  # 7: processed, never produced


def test_a_partition_nobody_processed_has_no_gaps_and_no_stretches():
    (offsets,), stretches = _judge([("producer", "produced", 0, o) for o in range(3)])
    assert (offsets["messages_produced"], offsets["messages_processed"], offsets["gaps"]) == (3, 0, 0)
    assert stretches == []


def test_stretches_break_at_gaps_longer_than_the_gap_and_each_actor_has_its_own():
    records = [("c1", "processed", t, None) for t in (0, S, 2 * S + 1, 10 * S)] + [("c2", "processed", 5 * S, None)]
    _, stretches = _judge(records, owned=[("c1", 0, 20 * S), ("c2", 0, 20 * S)])
    # 0 and 1 s are one gap apart (not more): one stretch; 2 s + 1 ns is more than a gap after 1 s
    assert stretches == [("c1", 0, S, 2, []), ("c1", 2 * S + 1, 2 * S + 1, 1, []), ("c1", 10 * S, 10 * S, 1, []),
                         ("c2", 5 * S, 5 * S, 1, [])]


def test_after_loss_bounds_hold_their_instant_and_records_outside_every_window_have_no_index():
    # c1 owns [0, 10 s]; c2's ownership begins at 4 s; c1 processes at 2 s (nobody newer), at 4 s (the instant
    # c2 began: after loss), at 10 s (its own interval's end, still after loss) and at 12 s (no interval: once)
    records = [("c1", "processed", t * S, None) for t in (2, 4, 10, 12)]
    owned = [("c1", 0, 10 * S), ("c2", 4 * S, 30 * S)]
    _, stretches = _judge(records, owned, windows=[(1, 5 * S, 11 * S), (2, 11 * S, 30 * S)], gap_ns=100 * S)
    assert stretches == [("c1", 2 * S, 12 * S, 4, sorted([{"change_index": None, "times": 1},
                                                            {"change_index": 1, "times": 1},
                                                            {"change_index": 2, "times": 1}], key=str))]


def test_an_actor_that_never_owned_the_partition_processed_every_record_after_loss():
    records = [("c3", "processed", t * S, None) for t in (1, 2)]
    _, stretches = _judge(records, owned=[("c1", 0, 10 * S)], windows=[(1, 0, 10 * S)])
    assert stretches == [("c3", S, 2 * S, 2, [{"change_index": 1, "times": 2}])]
