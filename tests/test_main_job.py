"""The README's main job where it runs for a new user: on the embedded backend, through Spark, and never at
the cost of the published report.

CI has a Docker engine, so `auto` would pick testcontainers there; these tests choose the machine state a
user without Docker has (LAB_ZK_BACKEND=embedded, or a DOCKER_HOST no engine answers at) so that the path
such a user takes runs in CI too:

- a small herd grid (N=2, the lab's designs but the two the Spark cluster's grid runs) through the Spark
  harness on the embedded backend: every trial ok, each one's ZooKeeper started inside its Spark task from
  Spark's own jars;
- the embedded backend finds ZooKeeper's jars where a Spark worker's `import pyspark` is Spark's zip;
- `doctor --start` with no Docker engine answering picks embedded and starts a server inside a Spark task;
- `reproduce` (the tour) whose every trial fails exits non-zero, says why, and leaves REPORT.md and report/
  byte-identical; publishing refuses such a run and a run of uncommitted code, and re-publishing the
  published report from its own sources changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, cli, module_session, run_experiment

from experiments.catalogue import EXPERIMENTS, herd
from experiments.engine.families import FAMILIES
from experiments.report import published
from lab_cluster.errors import LabError
from lab_cluster.ports import free_port

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def spark():
    """This module's Spark session: three task slots, so that the herd grid's trials run three at a time, as the
    main job runs them (`reproduce`: "3 at a time per machine")."""
    yield from module_session("local[3]")


def _stated() -> int:
    """How many findings the published report states as holding."""
    return sum(bool(o.published) for o in published.compare(published.published_summary()))


def _published_bytes() -> dict[str, str]:
    """A digest of every file of the published report."""
    files = [published.REPORT, *sorted(p for p in published.SOURCES.rglob("*") if p.is_file())]
    return {str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


#: the designs whose herd trial the default run gives the Spark cluster's `spark-submit` grid instead
ON_THE_CLUSTER = ("zookeeper", "classic")


@pytest.mark.slow
def test_a_herd_grid_runs_through_spark_on_the_embedded_backend(spark, tmp_path, monkeypatch):
    # read on the driver and carried to the tasks: the Spark workers started with the test process's
    # environment, so only the carried request can make them use the embedded backend
    monkeypatch.setenv("LAB_ZK_BACKEND", "embedded")
    # three at a time, as the main job runs its trials (the module's session has three task slots)
    # the lab's designs: the real systems' JVMs have smoke trials of their own (tests/test_real_kafka*.py), and
    # the zookeeper and classic designs' herd trials run on the Spark cluster (tests/test_spark_cluster.py)
    lab_designs = tuple(d for d in herd.DESIGNS if not FAMILIES[d].counterpart and d not in ON_THE_CLUSTER)
    _, specs, summary = run_experiment(spark, tmp_path, herd.grid("standard", designs=lab_designs, consumers=[2]),
                                       trials_per_machine=3)
    assert sorted(s.design for s in specs) == sorted(lab_designs)
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert set(summary.zk_backend) == {"embedded"}
    assert len(summary) == sum(len(s.steps) for s in specs)  # each trial's changes (TubeMQ: join, leave, depart)
    for spec in specs:
        setup = next(json.loads(line) for line in
                     (tmp_path / "trials" / spec.trial_id / "traces" / "scenario.jsonl").read_text().splitlines()
                     if json.loads(line)["kind"] == "setup")
        assert json.loads(setup["fields"])["zk_backend_reason"] == "LAB_ZK_BACKEND=embedded", setup


def test_the_jars_are_found_where_pyspark_is_sparks_zip():
    """A Spark worker imports pyspark from `pyspark/python/lib/pyspark.zip`, with no `jars` beside it."""
    import pyspark

    zip_path = next(Path(pyspark.__file__).parent.glob("python/lib/pyspark.zip"))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import pyspark; "
            "from lab_cluster.zk.distribution import find_distribution; "
            "print(pyspark.__file__); print(find_distribution().describe())")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "ZOOKEEPER_HOME")}
    out = subprocess.run([sys.executable, "-c", code, str(zip_path)], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    imported, found = out.stdout.splitlines()
    assert "pyspark.zip" in imported
    assert found.startswith("ZooKeeper 3.9.") and "via the installed pyspark package" in found


def test_doctor_without_a_docker_engine_picks_embedded_and_starts_a_server_inside_spark(tmp_path):
    result = cli("doctor", "--start", timeout=300,
                 env_changes={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "LAB_ZK_BACKEND": None,
                              "COLUMNS": "400"})
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "backend: embedded" in out
    lines = [line for line in out.splitlines() if line.startswith("in a Spark task")]
    assert any("a trial gets backend embedded (auto: No Docker engine answers" in line for line in lines), out
    assert any("started ZooKeeper 3.9." in line and "ruok: imok" in line for line in lines), out


@pytest.mark.slow
def test_reproduce_whose_trials_all_fail_leaves_the_published_report_untouched(tmp_path):
    """The main job as the README gives it (`reproduce`: the tour) where no trial can work."""
    before = _published_bytes()
    port = free_port()  # nothing listens there
    run_dir = tmp_path / "run"
    result = cli("reproduce", "--out", str(run_dir), timeout=900,
                 env_changes={"LAB_ZK_BACKEND": "external", "LAB_ZK_CONNECT": f"127.0.0.1:{port}", "COLUMNS": "300"})
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    trials = len(json.loads((run_dir / "grid.json").read_text()))
    tour = [s for e in EXPERIMENTS.values() if e.runs_in("tour") for s in e.specs("tour")]
    assert trials == len(tour)
    assert f"{trials} of {trials} trials failed" in out
    assert f"No server of LAB_ZK_CONNECT=127.0.0.1:{port} answered" in out
    # no finding holds (the tour has no computed part), and the verdict counts the published ones it checked and
    # those it left to the standard profile
    found = pd.read_csv(run_dir / "findings.csv")
    assert not found.here.isin([True]).any()
    counted = re.search(r"0 of (\d+) findings of the published report reproduced \((\d+) more", out)
    assert counted and int(counted[1]) > 0 and int(counted[1]) + int(counted[2]) == _stated(), out[-3000:]
    assert "published findings this tour checked and reproduced (0 of" in out
    assert "python -m experiments reproduce --profile standard" in out
    assert "the published one, REPORT.md, is unchanged" in out
    assert "it cannot be published" in out and "it ran the tour profile" in out
    assert _published_bytes() == before
    # the run's own report is in the run directory, listing why its trials failed
    assert "## Failed trials" in (run_dir / "REPORT.md").read_text()
    # and publishing it is refused, with the published report unchanged
    refused = cli("report", str(run_dir), "--publish")
    assert refused.returncode == 2 and f"{trials} of {trials} trials failed" in refused.stderr, refused.stderr
    assert _published_bytes() == before


def test_the_published_report_reproduces_its_own_findings():
    summary = published.published_summary()
    outcomes = published.compare(summary, published.published_computed())
    assert len(outcomes) == _stated() > 0 and all(o.reproduced for o in outcomes)
    n = len(outcomes)
    assert published.verdict(outcomes) == f"{n} of {n} findings of the published report reproduced"


def test_a_run_that_lost_a_finding_says_which(tmp_path):
    summary = published.published_summary()
    # the coordinator era's zombie commits, all accepted: its fencing findings no longer hold
    zombie_modern = (summary.experiment == "zombie") & (summary.design == "classic")
    summary.loc[zombie_modern, "zombie_commits_accepted"] = 3
    outcomes = published.compare(summary, published.published_computed())
    lost = [(o.experiment, o.finding) for o in outcomes if o.published and not o.here]
    assert lost == [("zombie", "classic-pause-fenced"), ("zombie", "classic-cut-fenced")]
    stated = _stated()
    assert published.verdict(outcomes) == f"{stated - 2} of {stated} findings of the published report reproduced"
    saved = pd.read_csv(published.save(outcomes, tmp_path))
    assert len(saved) == stated and (~saved.here).sum() == 2
    assert list(saved[~saved.here].finding) == ["classic-pause-fenced", "classic-cut-fenced"]


def _copy_of_published_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(published.SOURCES, run_dir, ignore=shutil.ignore_patterns("figures"))
    return run_dir


def test_publishing_refuses_failed_trials_missing_experiments_and_uncommitted_code(tmp_path):
    run_dir = _copy_of_published_run(tmp_path)
    summary = pd.read_csv(run_dir / "summary.csv")
    summary["reason"] = summary["reason"].astype(object)
    summary.loc[summary.experiment == "zombie", ["status", "reason"]] = ["failed", "the victim never woke"]
    summary = summary[summary.experiment != "split_brain"]
    failed, trials = summary[summary.experiment == "zombie"].trial.nunique(), summary.trial.nunique()
    summary.to_csv(run_dir / "summary.csv", index=False)
    env = json.loads((run_dir / "environment.json").read_text())
    (run_dir / "environment.json").write_text(json.dumps({**env, "lab_commit": env["lab_commit"] + "+dirty"}))
    before = _published_bytes()
    with pytest.raises(LabError) as info:
        published.publish(run_dir)
    problem = info.value.problem
    assert f"{failed} of {trials} trials failed" in problem and "the victim never woke" in problem
    assert "no trial of split_brain" in problem
    assert "code that was not committed" in problem and "+dirty" in problem
    assert _published_bytes() == before


def test_report_renders_into_the_run_directory_and_only_publish_writes_the_published_one(tmp_path):
    run_dir = _copy_of_published_run(tmp_path)
    before = _published_bytes()
    result = cli("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert (run_dir / "REPORT.md").read_text() == published.REPORT.read_text()  # same stored results, same bytes
    assert (run_dir / "report" / "figures" / "herd.png").exists()
    refused = cli("report", str(run_dir), "--out", str(published.REPORT))
    assert refused.returncode == 2 and "only --publish replaces" in refused.stderr, refused.stderr
    # re-publishing the published report from its own sources changes nothing
    assert cli("report", str(published.SOURCES), "--publish").returncode == 0
    assert _published_bytes() == before


def test_a_run_an_older_lab_wrote_is_refused_with_what_it_lacks(tmp_path):
    run_dir = _copy_of_published_run(tmp_path)
    summary = pd.read_csv(run_dir / "summary.csv")
    summary.drop(columns=["membership_reads_per_change"]).to_csv(run_dir / "summary.csv", index=False)
    result = cli("report", str(run_dir))
    assert result.returncode == 2, result.stderr
    assert "written by an older version of the lab: it has no membership_reads_per_change" in result.stderr
    assert "Traceback" not in result.stderr and not (run_dir / "REPORT.md").exists()


def test_a_published_report_an_older_lab_rendered_is_not_checked_and_the_verdict_says_why(tmp_path, monkeypatch):
    old = _copy_of_published_run(tmp_path)
    summary = pd.read_csv(old / "summary.csv")
    summary.drop(columns=["membership_reads_per_change"]).to_csv(old / "summary.csv", index=False)
    monkeypatch.setattr(published, "SOURCES", old)
    outcomes = published.compare(pd.read_csv(REPO / "report" / "summary.csv"))  # this run: today's columns
    assert outcomes and all(o.published is None and o.here is not None for o in outcomes)
    assert "rendered by an older lab (its summary has no membership_reads_per_change)" in published.verdict(outcomes)


def test_the_report_states_the_set_up_the_run_recorded_not_todays_constants(tmp_path):
    run_dir = _copy_of_published_run(tmp_path)
    grid = json.loads((run_dir / "grid.json").read_text())
    for spec in grid:
        spec.update({"zombie": {"hold_s": 7.5}, "split_brain": {"churn_gap_s": 0.25, "brokers": 5}}.get(
            spec["experiment"], {}))
    (run_dir / "grid.json").write_text(json.dumps(grid))
    assert cli("report", str(run_dir)).returncode == 0
    text = (run_dir / "REPORT.md").read_text()
    assert "converged without it and 7.5 s more" in text and "`j1` leaves, 0.25 s apart" in text
    assert "| brokers | 5 per trial, each hosting a group coordinator, sessions spread" in text
