"""Today's analysis on real traces, without running a trial: the stored tour run in `tests/data/tour-run/`.

That directory holds one tour (`reproduce`, the main job) as the lab's committed code ran it: every trial's
columnar trace, the trials' results, the grid, and the summary and environment (command, commit, machine) the
run's own analysis wrote. `scripts/refresh-tour-run.sh` makes it again. Here the traces are analysed again
with today's metrics and checks:

- the summary comes out as the run's own analysis wrote it (a change to a metric that moves a figure on real
  traces shows here, by column and trial);
- every finding of the tour's experiments holds on it, judged by today's `findings()`;
- the headline figures the tour ends with show the herd in the ZooKeeper era only.

A test of the metrics' logic, not of the designs: the trials' behaviour is what the stored run recorded. The
designs' own behaviour is tested by the trials the suite runs (`test_main_job.py` and the modules per design).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from experiments.catalogue import EXPERIMENTS, KEEP_TIMELINES
from experiments.engine.harness import RESULT_SCHEMA, SUMMARY_COLUMNS, analyse
from experiments.engine.trial import TrialSpec
from experiments.report.headline import headline
from experiments.report.published import with_added_columns

pytestmark = [pytest.mark.spark]

STORED = Path(__file__).resolve().parent / "data" / "tour-run"
#: what the trial's task knew of its machine, not what its traces say: not in the stored results
FROM_THE_TASK = ("zk_backend", "zk_version")


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory) -> pd.DataFrame:
    run = tmp_path_factory.mktemp("tour-run") / "run"
    shutil.copytree(STORED, run)
    specs = [TrialSpec.from_row(row) for row in json.loads((run / "grid.json").read_text())]
    stored = pd.read_parquet(run / "results" / "trials.parquet")
    results = stored.assign(trial_dir=[str(run / "trials" / t) for t in stored.trial], environment="{}")
    analyse(spark, str(run), specs, results[RESULT_SCHEMA.names], timelines_for=KEEP_TIMELINES)
    return pd.read_csv(run / "summary.csv")  # as the run's own was written and is read back


def test_the_stored_run_is_a_tour_of_committed_code():
    env = json.loads((STORED / "environment.json").read_text())
    assert env["profile"] == "tour" and not env["lab_commit"].endswith("+dirty"), env
    tour = sorted(s.trial_id for e in EXPERIMENTS.values() if e.runs_in("tour") for s in e.specs("tour"))
    assert sorted(p.name for p in (STORED / "trials").iterdir()) == tour, (
        "the tour's grid changed since the stored run was made: scripts/refresh-tour-run.sh makes it again")


def test_todays_analysis_of_its_traces_gives_the_summary_its_run_wrote(analysed):
    # a column added since the run (the growth experiment's) reads as empty, and today's analysis must agree
    stored = with_added_columns(pd.read_csv(STORED / "summary.csv"))
    keys = ["trial", "change_index"]
    columns = [c for c in SUMMARY_COLUMNS if c not in FROM_THE_TASK]
    ours = analysed[columns].sort_values(keys).reset_index(drop=True)
    theirs = stored[columns].sort_values(keys).reset_index(drop=True)
    assert set(ours.status) == {"ok"}
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False, check_exact=False, rtol=1e-9)


def test_every_finding_of_the_tour_holds_on_its_traces(analysed):
    for experiment in (e for e in EXPERIMENTS.values() if e.runs_in("tour")):
        findings = experiment.check(analysed[analysed.experiment == experiment.name])
        assert findings, experiment.name
        assert [f.id for f in findings if not f.holds] == [], experiment.name


def test_the_headline_shows_the_herd_in_the_zookeeper_era_only(analysed):
    rows = headline(analysed).set_index("design")
    assert rows.loc["zookeeper", "zk_requests"] > 0 and rows.loc["zookeeper", "notifications"] >= rows.loc["zookeeper",
                                                                                                     "herd_n"]
    for design in ("classic", "consumer-848"):
        assert rows.loc[design, "zk_requests"] == 0 and rows.loc[design, "notifications"] == 0
    assert rows.loc["zookeeper", "zombie_accepted"] > 0 and rows.loc["classic", "zombie_accepted"] == 0
    assert rows.loc["classic", "zombie_fenced"] > 0
    assert rows.loc["consumer-848", "members_stopped"] < rows.loc["classic", "members_stopped"]
