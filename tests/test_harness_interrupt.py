"""Ctrl-C of a Spark run stops the trial in flight at once, faulted consumer and all.

The trial runs in a PySpark worker that the driver's Ctrl-C does not reach:
without `harness._interrupt_if_spark_dies`, the worker went on with the trial
to its own end, its ZooKeeper, brokers and consumers alive for as long. Here
the run is interrupted while the zombie trial holds its victim SIGSTOPped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import interrupt, left_by_run, tagged_env

from lab_cluster.leaks import lab_containers

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parent.parent
#: long enough for a few processes and a container to stop; far shorter than the rest of the trial
GRACE_S = 15


def test_ctrl_c_of_a_run_stops_the_trial_in_flight(tmp_path):
    tag = f"ctrl-c-zombie-{os.getpid()}"
    before = frozenset(c.name for c, _ in lab_containers())
    env = tagged_env(tag)
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "run", "zombie", "--designs", "zookeeper",
                             "--out", str(tmp_path / "run")], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    progress = tmp_path / "run" / "trials" / "zombie-pause-zookeeper-n2-p4-s0-r0" / "progress.json"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if json.loads(progress.read_text())["phase"].startswith("step 1"):
                    break  # the victim is paused
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read()
        assert left_by_run(tag, before)  # the trial's cluster is up
    finally:
        interrupt(proc)
    assert proc.returncode != 0
    deadline = time.monotonic() + GRACE_S
    while left_by_run(tag, before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left_by_run(tag, before), f"still running {GRACE_S} s after Ctrl-C: {left_by_run(tag, before)}"
