"""Find what a lab process left running, and remove what dead ones left.

Every lab resource carries the pid of the process that owns it:

- ZooKeeper JVMs: `-Drebalance.lab.owner=<pid>` on their command line;
- the Spark driver JVM a lab process starts: `-Drebalance.lab.spark.driver=<pid>`
  (it serves its process until the process ends: a leak only once the owner is
  gone, so `find_leaks` lists it for another process, not for the caller);
- brokers, producers, consumer hosts: `--rebalance.lab.owner=<pid>` likewise;
- containers: the label `rebalance-lab.owner=<pid>`;
- temp dirs: `<tmp>/rebalance-lab-<pid>-...`;
- fault proxies: in-process only (`faultproxy.open_proxies()`).

`find_leaks(pid)` lists what is still there for one owner: the tests call it
after stopping everything (and for child processes after they are killed).
`reap_orphans()` removes whatever belongs to owners that no longer exist: it
stands in for testcontainers' Ryuk where Ryuk's image cannot be pulled.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

from .cleanup import OWNER_LABEL, OWNER_PROPERTY, SPARK_DRIVER_PROPERTY, TEMP_PREFIX
from .faultproxy import open_proxies
from .processes import proc_stat

# `-Drebalance.lab.owner=PID` on a JVM, `--rebalance.lab.owner=PID` on a Python child.
_OWNER_ARG = re.compile(rf"-{{1,2}}D?{re.escape(OWNER_PROPERTY)}=(\d+)")
_DRIVER_ARG = re.compile(rf"-D{re.escape(SPARK_DRIVER_PROPERTY)}=(\d+)")
_TEMP_NAME = re.compile(rf"^{re.escape(TEMP_PREFIX)}(\d+)-")


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


def lab_processes(marker: re.Pattern = _OWNER_ARG) -> dict[int, int]:
    """{pid: owner pid} for every running lab child process (ZooKeeper JVMs, brokers, ...)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        m = marker.search(cmdline)
        if m and process_alive(int(entry.name)):
            found[int(entry.name)] = int(m.group(1))
    return found


def spark_drivers() -> dict[int, int]:
    """{pid: owner pid} for every running Spark driver JVM a lab process started (`lab_cluster.spark`)."""
    return lab_processes(_DRIVER_ARG)


def lab_containers():
    """[(container, owner pid)] for every lab container, if a Docker engine answers."""
    try:
        from .docker_engine import docker_client

        client = docker_client(timeout_s=3)
    except Exception:
        return []
    out = []
    for c in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        out.append((c, int(c.labels.get(OWNER_LABEL, "0"))))
    return out


def lab_temp_dirs() -> dict[Path, int]:
    root = Path(tempfile.gettempdir())
    found = {}
    for path in root.glob(f"{TEMP_PREFIX}*"):
        m = _TEMP_NAME.match(path.name)
        if m and path.is_dir():
            found[path] = int(m.group(1))
    return found


def find_leaks(owner_pid: int | None = None) -> list[str]:
    """What the lab process `owner_pid` (default: this one) still has running or on disk."""
    owner = owner_pid or os.getpid()
    leaks = [f"lab process pid {pid}" for pid, o in lab_processes().items() if o == owner]
    if owner != os.getpid():
        leaks += [f"Spark driver JVM pid {pid}" for pid, o in spark_drivers().items() if o == owner]
    leaks += [f"container {c.name} ({c.status})" for c, o in lab_containers() if o == owner]
    leaks += [f"temp dir {p}" for p, o in lab_temp_dirs().items() if o == owner]
    if owner == os.getpid():
        leaks += [f"fault proxy {p!r}" for p in open_proxies()]
    return leaks


def reap_orphans() -> list[str]:
    """Remove JVMs, containers and temp dirs whose owning lab process is gone."""
    reaped = []
    for pid, owner in [*lab_processes().items(), *spark_drivers().items()]:
        if not process_alive(owner):
            try:
                os.kill(pid, signal.SIGKILL)
                reaped.append(f"lab process pid {pid} (owner {owner} is gone)")
            except ProcessLookupError:
                pass
    for container, owner in lab_containers():
        if not process_alive(owner):
            container.remove(force=True)
            reaped.append(f"container {container.name} (owner {owner} is gone)")
    for path, owner in lab_temp_dirs().items():
        if not process_alive(owner):
            shutil.rmtree(path, ignore_errors=True)
            reaped.append(f"temp dir {path} (owner {owner} is gone)")
    return reaped
