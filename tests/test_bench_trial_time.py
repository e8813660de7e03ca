"""`bench trial-time`: a stored run's trial seconds split into phases from the scenario's own events."""

from __future__ import annotations

import doctest
import json

import pyarrow as pa
import pyarrow.parquet as pq

from experiments.bench import trial_time
from experiments.bench.trial_time import PHASES, longest_trials, measure, phases
from lab_cluster.trace_reader import COLUMNAR_FILE

S = 1_000_000_000


def test_the_worked_example_in_phases_holds():
    assert doctest.testmod(trial_time).failed == 0


def test_a_change_that_ran_out_its_limit_is_converging_until_not_converged_and_holds_count_per_step():
    events = [(0, "trace_open", ""), (2 * S, "setup", ""), (4 * S, "converged", "0"),
              (5 * S, "change", "1"), (35 * S, "not_converged", "1"),  # the limit ran out: 30 s converging
              (39 * S, "change", "2"), (41 * S, "converged", "2"),
              (45 * S, "end", ""), (47 * S, "trace_close", "")]
    out = phases(events, wall_s=47.0)
    assert out == {"cluster": 2.0, "forming": 2.0, "converging": 32.0, "holding": 1.0 + 4.0 + 4.0,
                   "stopping": 2.0, "outside_trace": 0.0}
    # every second of the trace is in exactly one phase
    assert sum(out.values()) == 47.0


def test_a_trial_that_failed_while_forming_has_only_its_cluster_phase():
    out = phases([(0, "trace_open", ""), (3 * S, "setup", ""), (95 * S, "trace_close", "")], wall_s=96.0)
    assert out["cluster"] == 3.0 and out["forming"] == out["converging"] == out["holding"] == 0.0
    assert out["outside_trace"] == 1.0


def test_measure_sums_a_stored_runs_trials_per_experiment_and_design(tmp_path):
    (tmp_path / "results").mkdir()
    rows = [("herd", "zookeeper", "t1", 10.0), ("herd", "zookeeper", "t2", 12.0), ("zombie", "classic", "t3", 20.0),
            ("zombie", "classic", "never-ran", None)]
    pq.write_table(pa.table({"experiment": [r[0] for r in rows], "design": [r[1] for r in rows],
                             "trial": [r[2] for r in rows], "status": ["ok"] * 4,
                             "wall_s": pa.array([r[3] for r in rows], pa.float64())}),
                   tmp_path / "results" / "trials.parquet")
    for trial, wall in (("t1", 10), ("t2", 12), ("t3", 20)):
        (tmp_path / "trials" / trial).mkdir(parents=True)
        scenario = [(0, "trace_open", None), (1 * S, "setup", None), (2 * S, "converged", {"index": 0}),
                    (2 * S, "change", {"index": 1}), ((wall - 3) * S, "converged", {"index": 1}),
                    ((wall - 2) * S, "end", None), (wall * S, "trace_close", None)]
        other = [(5 * S, "processed", None)]  # another actor's event: not the scenario's
        pq.write_table(pa.table({
            "ts_ns": [e[0] for e in scenario + other],
            "actor": ["scenario"] * len(scenario) + ["c1"],
            "kind": [e[1] for e in scenario + other],
            "fields": [json.dumps(e[2]) if e[2] else None for e in scenario + other]}),
            tmp_path / "trials" / trial / COLUMNAR_FILE)
    figures = measure(tmp_path)
    assert set(figures) == {"all", "herd/zookeeper", "zombie/classic"}
    herd = figures["herd/zookeeper"]
    assert herd["trials"] == 2 and herd["wall_s"] == 22.0
    assert (herd["cluster"], herd["forming"], herd["converging"], herd["holding"], herd["stopping"]) == \
        (2.0, 2.0, 5.0 + 7.0, 2.0, 4.0)  # each converging from 2 s to wall - 3 s
    assert figures["all"]["trials"] == 3  # the trial that never ran has no traces, and no phases
    assert sum(figures["all"][p] for p in PHASES) == figures["all"]["wall_s"]
    assert [(t["trial"], t["wall_s"]) for t in longest_trials(tmp_path, count=2)] == [("t3", 20.0), ("t2", 12.0)]
