"""`bench group-size`'s own rules, without a trial: the commit it records, and a Ctrl-C that stops the sweep.

The trials themselves are the herd's (tests/test_herd.py); here `measure` is replaced, so what is checked is the
sweep around it.
"""

from __future__ import annotations

import argparse
import doctest
import json

import pytest

from experiments.bench import group_size
from lab_cluster.errors import LabError


def _args(tmp_path, designs: str = "zookeeper,classic") -> argparse.Namespace:
    return argparse.Namespace(designs=designs, sizes="2,4", profile="standard", master="local[1]", host_tasks=0,
                              out=str(tmp_path / "group_size.json"))


@pytest.fixture
def no_spark(monkeypatch):
    import lab_cluster.spark

    monkeypatch.setattr(lab_cluster.spark, "local_session", lambda master: None)
    monkeypatch.setattr(lab_cluster.spark, "stop_session", lambda: None)


def test_the_commit_is_read_once_before_the_sweep_writes_its_own_figures_file(tmp_path, monkeypatch, no_spark):
    # as git would say it: clean before the sweep, dirty once the sweep has written its figures file
    commits = iter(["abc", "abc+dirty", "abc+dirty"])
    monkeypatch.setattr(group_size, "lab_commit", lambda: next(commits))
    monkeypatch.setattr(group_size, "measure", lambda spark, design, n, profile, work, host_tasks=0: {"consumers": n,
                                                                                        "status": "ok"})
    assert group_size.run(_args(tmp_path)) == 0
    sweeps = json.loads((tmp_path / "group_size.json").read_text())["local"]
    assert [sweeps[d]["lab_commit"] for d in ("zookeeper", "classic")] == ["abc", "abc"]
    assert [sweeps[d]["largest_valid_n"] for d in ("zookeeper", "classic")] == [4, 4]


def test_a_ctrl_c_inside_a_spark_job_stops_the_sweep_and_is_not_recorded_as_the_benchmarks_failure(
        tmp_path, monkeypatch, no_spark):
    monkeypatch.setattr(group_size, "lab_commit", lambda: "abc")

    def cancelled(spark, design, n, profile, work, host_tasks=0):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:  # as PySpark's handler surfaces it: a Py4J error around the interrupt
            raise RuntimeError("An error occurred while calling o48232.getResult") from None

    monkeypatch.setattr(group_size, "measure", cancelled)
    with pytest.raises(KeyboardInterrupt):
        group_size.run(_args(tmp_path))
    written = tmp_path / "group_size.json"
    sweeps = json.loads(written.read_text())["local"] if written.exists() else {}
    assert "classic" not in sweeps  # the sweep did not go on to the next design
    assert all(p["status"] != "error" for s in sweeps.values() for p in s["points"])


def test_the_modules_worked_examples():
    assert doctest.testmod(group_size).failed == 0


def test_more_host_tasks_than_a_local_masters_slots_are_refused_before_the_sweep(tmp_path):
    """Every trial would fail on the slots, and the sweep record that as each design's failure at its first N."""
    args = _args(tmp_path)
    args.host_tasks = 2
    with pytest.raises(LabError, match="needs 2 task slots"):
        group_size.run(args)
    assert not (tmp_path / "group_size.json").exists()
