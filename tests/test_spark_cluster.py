"""The grid on a real standalone Spark cluster, not only `local[*]`: `docs/use.md`'s `spark-submit` path, end
to end.

A master and two workers (one core each) start from the pyspark installation's
own `spark-class` on loopback (`lab_cluster/spark_standalone.py`); the lab is
zipped as `docs/use.md` says and `spark-submit` runs a small herd grid (two
trials) on the cluster; with `-m long`, a second grid spreads a group over
both workers' executors. Each trial provisions its own ZooKeeper (embedded:
from the worker's Spark jars) and brokers inside its executor's task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import interrupt

from lab_cluster.leaks import find_leaks
from lab_cluster.spark_standalone import StandaloneCluster, spark_home

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
#: what `docs/use.md`'s `zip -qr lab.zip ...` puts in the archive
PACKAGES = ("lab_cluster", "legacy_zk", "modern_coord", "rocketmq_client", "tubemq_client", "kafka_clients",
            "experiments")


def _lab_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for package in PACKAGES:
            for file in (REPO / package).rglob("*"):
                if file.is_file() and "__pycache__" not in file.parts:
                    archive.write(file, file.relative_to(REPO))
    return path


def _spark_submit(cluster, tmp_path: Path, *lab_args: str) -> Path:
    """`docs/use.md`'s `spark-submit` path: the lab zipped, `lab_experiments.py LAB_ARGS` on `cluster` with the
    embedded backend, into `tmp_path/run`, which it returns once the command has succeeded."""
    out = tmp_path / "run"
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
               "--conf", "spark.executor.memory=1g", "--conf", "spark.driver.host=127.0.0.1",
               "--py-files", str(_lab_zip(tmp_path / "lab.zip")), str(REPO / "scripts" / "lab_experiments.py"),
               *lab_args, "--backend", "embedded", "--out", str(out)]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()))
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def cluster():
    with StandaloneCluster(workers=2, cores_per_worker=1, memory_per_worker="2g") as started:
        yield started


def test_two_workers_register_on_loopback(cluster):
    workers = cluster.status()["workers"]
    assert [w["state"] for w in workers] == ["ALIVE", "ALIVE"]
    assert all(w["host"] == "127.0.0.1" and w["cores"] == 1 for w in workers)


def test_spark_submit_runs_a_grid_on_the_cluster(cluster, tmp_path):
    # the default run's herd trials of these two designs (tests/test_main_job.py runs the lab's other designs)
    out = _spark_submit(cluster, tmp_path, "run", "herd", "--designs", "zookeeper,classic", "--consumers", "2")
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.design) == {"zookeeper", "classic"} and set(summary.status) == {"ok"}, summary.reason.tolist()
    # the trials ran in the cluster's executors (a task's working dir is its executor's, under its worker's
    # work dir), not in a local[*] driver
    ran_in = pd.read_parquet(out / "results" / "trials.parquet").spark_task_dir.tolist()
    assert len(ran_in) == 2 and all("/worker" in d and "/app-" in d for d in ran_in), ran_in
    # and the application ran on the master, to its end
    apps = cluster.status()["completedapps"]
    assert apps and apps[-1]["state"] == "FINISHED"


@pytest.mark.long
def test_a_trials_group_spreads_over_the_clusters_executors(cluster, tmp_path):
    """`--host-tasks 2`: the group's two hosts run as a barrier stage's tasks, one on each worker's executor,
    while the trial runs on the driver (`experiments/engine/host_tasks.py`).

    A second spark-submit grid (about 100 s of the default run's budget), so `long`: the default run spreads a
    group over host tasks on `local[*]` (`tests/test_host_tasks.py`) and submits to this cluster once (above)."""
    out = _spark_submit(cluster, tmp_path, "run", "herd", "--designs", "classic", "--consumers", "4",
                        "--host-tasks", "2")
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.status) == {"ok"} and set(summary.hosts) == {3}, summary.reason.tolist()
    trials = pd.read_parquet(out / "results" / "trials.parquet")
    host_dirs = json.loads(trials.host_task_dirs.iloc[0])
    # each host task in an executor of its own worker; the trial itself on the driver (outside the workers)
    workers = {d.split("/app-")[0] for d in host_dirs}
    assert len(host_dirs) == 2 and len(workers) == 2 and all("/worker" in d for d in host_dirs), host_dirs
    assert "/app-" not in trials.spark_task_dir.iloc[0]


def test_spark_up_serves_until_ctrl_c_and_leaves_nothing():
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "spark", "up", "--workers", "1"], env=env,
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("master:"):
                break
        assert lines and lines[-1].startswith("master: spark://127.0.0.1:"), "".join(lines) + proc.stderr.read()
        assert any("worker " in line and "ALIVE" in line for line in lines), lines
    finally:
        interrupt(proc)
    assert proc.returncode in (0, 130)
    assert "Traceback" not in proc.stderr.read()
    assert find_leaks(proc.pid) == []
