"""A trial's group spread over the tasks of one Spark barrier stage (`experiments/engine/host_tasks.py`).

Here on `local[2]`: two host tasks, each running half the group, beside a trial
on the driver. The trial must come out as a local one does (its changes
converge, every member's trace is complete, each host measured itself), the
members must be the slices the spec asks for, and nothing the tasks started may
outlive the run. A host that cannot start fails its trial with the reason; the
stage does not hang. `tests/test_spark_cluster.py` runs the same on a standalone
cluster, its tasks on two workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import descends_from_me, interrupt, left_by_run, run_experiment, tagged_env, trace_events, wait_for

from experiments.catalogue import herd
from experiments.engine.host_tasks import slices
from experiments.engine.trial import TrialSpec
from lab_cluster.errors import LabError
from lab_cluster.leaks import find_leaks, lab_processes, lab_temp_dirs, process_alive

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[1]


def test_slices_cut_the_group_in_even_contiguous_runs():
    for n in range(1, 40):
        for k in range(1, n + 1):
            parts = slices(n, k)
            members = [p.first + i for p in parts for i in range(p.count)]
            assert members == list(range(1, n + 1))
            assert max(p.count for p in parts) - min(p.count for p in parts) <= 1


def test_a_spec_spreads_only_a_shared_group_over_at_most_n_tasks():
    spec = TrialSpec("herd", "classic", 4, 8, host_tasks=2)
    assert spec.trial_id == "herd-classic-n4-h2-p8-s0-r0"
    assert TrialSpec.from_row(spec.as_row()) == spec
    with pytest.raises(LabError, match="host_tasks=5"):
        TrialSpec("herd", "classic", 4, 8, host_tasks=5)
    with pytest.raises(LabError, match="shared layout"):
        TrialSpec("zombie", "classic", 4, 8, host_tasks=2, layout="spread")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _new_leaks(before: set[str]) -> set[str]:
    """What this process has running or on disk now that it did not before the test (the session's own
    ZooKeeper, a fixture's, stays up between tests)."""
    return set(find_leaks()) - before


def _left_behind(trial: str) -> list[str]:
    """Lab processes of `trial` still running, whoever owns them (the tasks' Python workers own the hosts), and
    the tasks' temp dirs (this test process's, or orphans: not those of a trial the other xdist worker runs)."""
    running = [f"pid {pid}" for pid in lab_processes() if trial in _cmdline(pid)]
    return running + [f"temp dir {p}" for p, owner in lab_temp_dirs().items()
                      if "-host-c" in p.name and (descends_from_me(owner) or not process_alive(owner))]


@pytest.fixture(scope="module")
def spread_run(spark, tmp_path_factory):
    before = set(find_leaks())
    specs = [replace(s, host_tasks=2) for s in herd.grid("standard", ("zookeeper", "classic"), [4], partitions=8)]
    return (*run_experiment(spark, tmp_path_factory.mktemp("spread"), specs), before)


@pytest.mark.herd
def test_a_group_in_two_host_tasks_converges_as_a_local_one(spread_run):
    run_dir, specs, summary, before = spread_run
    assert set(summary.status) == {"ok"}, summary.reason.tolist()
    assert sorted(summary.change) == ["join", "join", "leave", "leave"] and summary.converged.all()
    # three hosts measured themselves in each trial: the two slices, and the joiner's on the driver's machine
    assert set(summary.hosts) == {3}
    for spec in specs:
        trial_dir = Path(run_dir) / "trials" / spec.trial_id
        placed = trace_events(trial_dir, "scenario", "hosts_placed")[0]["f"]["hosts"]
        assert [h["slice"] for h in placed] == ["c1-2", "c3-4"] and all(h["same_clock"] for h in placed)
        for member in ("c1", "c2", "c3", "c4"):  # returned by the tasks, whole
            kinds = [json.loads(line)["kind"] for line in (trial_dir / "traces" / f"{member}.jsonl").open()]
            assert kinds[0] == "trace_open" and kinds[-1] == "trace_close"
        assert (trial_dir / "proc" / "consumers-c3-4.log").exists()
        assert not _left_behind(spec.trial_id)
    assert not _new_leaks(before)


def test_a_host_that_cannot_start_fails_its_trial_with_the_reason(spark, tmp_path):
    spec = TrialSpec("herd", "classic", 2, 4, host_tasks=2, overrides=("session.timeout.ms=soon",))
    before = set(find_leaks())
    run_dir, _, summary = run_experiment(spark, tmp_path / "run", [spec])
    reason = summary.reason.iloc[0]
    assert summary.status.iloc[0] == "failed"
    assert "host task" in reason and "session.timeout.ms" in reason, reason
    assert not _left_behind(spec.trial_id) and not _new_leaks(before)


def test_more_host_tasks_than_task_slots_fail_at_once_with_what_to_do(spark, tmp_path):
    spec = TrialSpec("herd", "classic", 3, 4, host_tasks=3)  # the module's session is local[2]
    before = set(find_leaks())
    run_dir, _, summary = run_experiment(spark, tmp_path / "run", [spec])
    reason = summary.reason.iloc[0]
    assert summary.status.iloc[0] == "failed" and "needs 3 task slots" in reason and "local[3]" in reason, reason
    assert not _left_behind(spec.trial_id) and not _new_leaks(before)


def _host_pid(trial: str, first: int) -> int | None:
    """The pid of the host of `trial` whose slice begins at member `first`."""
    for pid in lab_processes():
        line = _cmdline(pid)
        if "consumer_host" in line and trial in line and f"--first {first} " in line:
            return pid
    return None


def test_a_host_that_dies_fails_its_trial_at_once_with_the_reason(spark, tmp_path):
    """A host killed mid-trial (its machine lost): the trial stops waiting for a group that cannot converge, and
    says which host went and how, rather than waiting out the runner's limit."""
    spec = TrialSpec("herd", "classic", 4, 8, host_tasks=2, converge_limit_s=600)
    before = set(find_leaks())
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(run=run_experiment(spark, tmp_path / "run", [spec])))
    runner.start()
    try:
        trial_dir = tmp_path / "run" / "trials" / spec.trial_id
        wait_for(lambda: (trial_dir / "traces" / "scenario.jsonl").exists()
                 and trace_events(trial_dir, "scenario", "hosts_placed"), "the hosts to start", timeout_s=180)
        os.kill(_host_pid(spec.trial_id, 3), signal.SIGKILL)
    finally:
        runner.join(300)
    assert not runner.is_alive()
    summary = outcome["run"][2]
    reason = summary.reason.iloc[0]
    assert summary.status.iloc[0] == "failed" and "cannot converge" in reason, reason
    assert "host task 1 (c3-4): host c3-4 exited with status -9" in reason, reason
    assert not _left_behind(spec.trial_id) and not _new_leaks(before)


@pytest.mark.slow
def test_ctrl_c_stops_a_spread_trial_and_its_host_tasks(tmp_path):
    """Ctrl-C while the group's hosts run in their tasks: the run ends, and nothing of the trial is left, on the
    driver or in the tasks."""
    trial = "herd-classic-n4-h2-p8-s0-r0"
    tag = f"ctrl-c-spread-{os.getpid()}"
    env = tagged_env(tag)
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "run", "herd", "--designs", "classic",
                             "--consumers", "4", "--partitions", "8", "--host-tasks", "2", "--master", "local[2]",
                             "--out", str(tmp_path / "run")], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or _host_pid(trial, 3) is not None, "the hosts in their tasks",
                 timeout_s=240)
        assert proc.poll() is None, proc.stderr.read()
    finally:
        interrupt(proc)
    assert proc.returncode != 0
    deadline = time.monotonic() + 15
    while (_left_behind(trial) or left_by_run(tag)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _left_behind(trial) and not left_by_run(tag)
