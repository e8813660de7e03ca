"""`bench harness`'s timed reproduction: the command it runs and what it counts (no reproduction is run here)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from types import SimpleNamespace

from experiments.bench import harness
from experiments.report.published import Outcome, load, save


def test_the_docstring_examples_hold():
    result = doctest.testmod(harness)
    assert result.attempted > 0 and result.failed == 0


def test_the_timed_reproduction_runs_the_users_command_and_counts_trials_by_their_rows(tmp_path, monkeypatch):
    seen = []

    def fake_run(command, **kwargs):
        seen.append(command)
        # summary.csv has a row per change: a trial is ok only when all its rows are
        (tmp_path / "summary.csv").write_text("trial,status,host_late_ms_max,hosts_starved\na,ok,12.5,0\na,ok,,0\n"
                                              "b,ok,99.1,0\nb,failed,3100,1\nc,ok,1,0\n")
        # findings.csv as `published.save` writes it: a finding the published report does not hold is not counted
        (tmp_path / "findings.csv").write_text("experiment,finding,claim,here,published\n"
                                               "herd,f1,x,True,True\nherd,f2,x,False,True\nherd,f3,x,True,\n"
                                               "herd,f4,x,True,False\nherd,f5,x,,True\n")
        (tmp_path / "environment.json").write_text('{"zk_backend": "embedded"}')
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    figure = harness.reproduce_wall_time(tmp_path, "standard", trials_per_machine=1)
    assert figure["zk_backend"] == "embedded"
    assert seen == [[sys.executable, "-m", "experiments", "reproduce", "--profile", "standard",
                     "--trials-per-machine", "1", "--out", str(tmp_path)]]
    assert figure["command"] == "python -m experiments reproduce --profile standard --trials-per-machine 1"
    assert (figure["profile"], figure["trials_per_machine"]) == ("standard", 1)
    assert (figure["exit_status"], figure["trials"], figure["trials_ok"]) == (0, 3, 2)
    assert (figure["host_late_ms_max"], figure["hosts_starved"]) == (3100.0, 1)
    # f5, which the run did not check (a design it left out), is not counted
    assert (figure["findings_checked"], figure["findings_reproduced"]) == (2, 1)


def test_the_cli_quotes_the_last_measured_reproduction_with_its_trials_at_a_time(tmp_path):
    figures = tmp_path / "harness.json"
    assert harness.measured_reproduction("standard", figures) is None
    figures.write_text(json.dumps({"reproduce_standard": {
        "command": "python -m experiments reproduce --profile quick --trials-per-machine 2", "seconds": 2080.4}}))
    assert harness.measured_reproduction("standard", figures)["trials_per_machine"] == 2
    assert harness.measured_reproduction("tour", figures) is None


def test_a_new_figure_keeps_the_one_it_replaces_newest_first():
    doc = {}
    for seconds in (651.1, 2040.0, 1990.0):
        harness.keep_before(doc, "reproduce_standard", {"seconds": seconds})
    assert doc["reproduce_standard"] == {"seconds": 1990.0}
    assert doc["reproduce_standard_before"] == [{"seconds": 2040.0}, {"seconds": 651.1}]


def test_the_figure_is_labelled_with_the_commit_the_run_started_at(tmp_path, monkeypatch):
    """A commit made while the reproduction runs (half an hour and more) does not label the figure."""
    head = ["at-start"]

    def reproduce(run_dir, profile, trials_per_machine):
        head[0] = "made-meanwhile"  # somebody commits while the reproduction runs
        return {"seconds": 1.0, "trials": 1}

    monkeypatch.setattr(harness, "lab_commit", lambda: head[0])
    monkeypatch.setattr(harness, "reproduce_wall_time", reproduce)
    out = tmp_path / "harness.json"
    args = SimpleNamespace(out=str(out), skip_reproduce=False, skip_analysis=True, analyse_run=None, run_dir=None,
                           profile="tour", trials_per_machine=2)
    harness.run(args)
    assert json.loads(out.read_text())["reproduce_tour"]["lab_commit"] == "at-start"


def test_a_runs_saved_findings_load_as_they_were_saved(tmp_path):
    outcomes = [Outcome("herd", "f1", "a claim, with a comma", True, True),
                Outcome("herd", "f2", "x", False, None), Outcome("zombie", "f3", "y", None, False)]
    save(outcomes, tmp_path)
    assert load(tmp_path) == outcomes
    assert load(tmp_path / "no-run") == []
