"""What a run records of where and how it ran (environment.json), and of the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd


def machine() -> dict:
    """CPUs, memory, CPU model, platform and Python of this machine."""
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1), "cpu": cpu,
            "platform": platform.platform(), "python": platform.python_version()}


def environment(spark, summary: pd.DataFrame, profile: str, command: str,
                commit: str | None = None, experiment_versions: dict[str, int] | None = None) -> dict:
    """What the report's environment section says: recorded once per run, in environment.json.

    `commit`: the lab commit read when the run began (default: now); `experiment_versions`: {experiment:
    `Experiment.version`}, kept for the experiments this run ran."""
    backends = sorted({str(b) for b in summary["zk_backend"].dropna()})
    versions = sorted({str(v) for v in summary["zk_version"].dropna()})
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "profile": profile, "command": command,
            "zk_backend": ", ".join(backends) or "unknown", "zk_version": ", ".join(versions) or "unknown",
            "spark_version": spark.version, "spark_master": spark.sparkContext.master,
            "python_version": platform.python_version(), "platform": platform.platform(),
            "machine": machine(), "cpu_count": os.cpu_count(), "lab_commit": commit or lab_commit(),
            "experiment_versions": {name: version for name, version in (experiment_versions or {}).items()
                                    if (summary["experiment"] == name).any()}}


def lab_commit() -> str:
    """The commit of the lab's code that made the run (with `+dirty` if files differed from it), or `unknown`.

    It ties a stored run, and so the report, to the code that produced it. Unknown where the lab runs
    without its git checkout (a zip shipped to a Spark cluster)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]  # the lab checkout
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty else "")
