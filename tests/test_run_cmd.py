"""The `run` command's results table stays readable where its output is not a terminal (a file, a CI log)."""

from __future__ import annotations

import pandas as pd

from experiments.cli import run as run_cmd


def _summary() -> pd.DataFrame:
    row = {"trial": "herd-zookeeper-n128-p256-s0-r0", "design": "zookeeper", "consumers": 128, "change": "join",
           "status": "failed", "reason": "the initial group did not converge within 90 s: c44 is rebalancing",
           "notifications_per_change": None, "zk_requests_per_change": None,
           "broker_requests_per_change": None, "rebalance_attempts": None, "owner_conflicts": None,
           "convergence_ms": None, "unowned_partition_s": None}
    return pd.DataFrame([row, {**row, "trial": "herd-classic-n128-p256-s0-r0", "design": "classic", "status": "ok",
                               "reason": "", "broker_requests_per_change": 723, "convergence_ms": 2510.4}])


def test_results_table_is_not_cut_when_written_to_a_file(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    run_cmd._print_table(run_cmd._console(), _summary())
    out = capsys.readouterr().out
    assert "…" not in out, out
    for text in ("zookeeper", "classic", "failed", "broker req.", "723", "2,510"):
        assert text in out, out
    assert "herd-zookeeper-n128-p256-s0-r0: the initial group did not converge within 90 s: c44 is rebalancing" in out


def test_columns_still_set_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert run_cmd._console().width == 100


def test_the_old_profile_name_works_and_says_what_it_is_now_called(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    from types import SimpleNamespace

    assert run_cmd._profile(SimpleNamespace(profile="quick")) == "standard"
    assert "profile 'quick' is now called 'standard' (the same grid); it still works" in capsys.readouterr().out
    assert run_cmd._profile(SimpleNamespace(profile="tour")) == "tour" and capsys.readouterr().out == ""


def test_the_tours_closing_shows_the_headline_the_findings_it_checked_and_the_rest(capsys, monkeypatch):
    """On the published run's summary, as if a tour had produced it: the table per design, the published findings
    it checked by id, and the command for the rest with its measured time."""
    from experiments.report import published

    monkeypatch.setenv("COLUMNS", "250")
    summary = published.published_summary()
    summary = summary[summary.experiment.isin(["herd", "split_brain", "zombie"])
                      & summary.design.isin(["zookeeper", "classic"])]
    outcomes = published.compare(summary, {})
    run_cmd._tour_closing(run_cmd._console(), summary, outcomes)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [c.strip() for c in lines[2].split("┃")[2:4]] == ["zookeeper", "classic"]  # a column per design run
    row = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]] for line in lines
           if line.startswith("│ herd")}
    # one join at N=32: the ZooKeeper era's requests (the published run's figure) and notifications, none for
    # the coordinator
    joins = summary[(summary.experiment == "herd") & (summary.change == "join") & (summary.consumers == 32)]
    requests = joins[joins.design == "zookeeper"].zk_requests_per_change.mean()
    assert row["herd: ZooKeeper requests for one join at N"] == [f"{requests:,.0f}", "0"]
    assert row["herd: notifications for one join at N"] == ["32", "0"]
    assert "herd/zookeeper-join-notified" in out and "zombie/classic-cut-fenced" in out
    assert "herd/consumer-848-join-revokes-only-moving" not in out  # KIP-848 was left out of this summary
    assert "python -m experiments reproduce --profile standard (about" in out
