"""The `run` command's results table stays readable where its output is not a terminal (a file, a CI log)."""

from __future__ import annotations

import pandas as pd

from experiments.cli import run as run_cmd


def _summary() -> pd.DataFrame:
    row = {"trial": "herd-legacy-n128-p256-s0-r0", "design": "legacy", "consumers": 128, "change": "join",
           "status": "failed", "reason": "the initial group did not converge within 90 s: c44 is rebalancing",
           "notifications_per_change": None, "zk_requests_per_change": None,
           "broker_requests_per_change": None, "rebalance_attempts": None, "owner_conflicts": None,
           "convergence_ms": None, "unowned_partition_s": None}
    return pd.DataFrame([row, {**row, "trial": "herd-modern-n128-p256-s0-r0", "design": "modern", "status": "ok",
                               "reason": "", "broker_requests_per_change": 723, "convergence_ms": 2510.4}])


def test_results_table_is_not_cut_when_written_to_a_file(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    run_cmd._print_table(run_cmd._console(), _summary())
    out = capsys.readouterr().out
    assert "…" not in out, out
    for text in ("legacy", "modern", "failed", "broker req.", "723", "2,510"):
        assert text in out, out
    assert "herd-legacy-n128-p256-s0-r0: the initial group did not converge within 90 s: c44 is rebalancing" in out


def test_columns_still_set_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert run_cmd._console().width == 100
