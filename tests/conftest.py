"""The lab's test harness, after kazoo's.

- One real ZooKeeper per test process (`zk`, session-scoped, on the backend
  LAB_ZK_BACKEND picks, `auto` by default), and a chroot per test
  (`zk_client`), removed after the test.
- Tests that start their own ensembles use `ensembles`, which keeps them up
  until the test's report is written, so a failing test shows the servers' logs.
- Tests marked `docker` use `docker_backend`: they skip with the reason where
  no Docker engine or image is available, except under CI=true, where that is
  a failure (CI installs both).
- At the end of the session everything the lab started must be gone: any JVM,
  container, proxy or temp dir of this process left behind fails the run.
"""

from __future__ import annotations

import os
import uuid

import pytest
from kazoo.client import KazooClient

from lab_cluster.cleanup import REAPER
from lab_cluster.leaks import find_leaks, reap_orphans
from lab_cluster.zk import Ensemble, ZkSettings, provision
from lab_cluster.zk.backends import testcontainers_problem
from lab_cluster.zk.server import tail

IN_CI = os.environ.get("CI", "").lower() == "true"


def pytest_sessionstart(session):
    reaped = reap_orphans()
    if reaped:
        print("\nremoved what earlier lab runs left behind: " + "; ".join(reaped))


def pytest_sessionfinish(session, exitstatus):
    failures = REAPER.stop_all()
    leaks = find_leaks()
    if leaks or failures:
        print("\nLEAK CHECK FAILED: the lab left behind: " + "; ".join(leaks + failures))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def zk():
    """The test process's own real ZooKeeper server."""
    with provision(servers=1) as ensemble:
        yield ensemble


def kazoo(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=30)
    return client


@pytest.fixture
def zk_client(zk, request):
    """A kazoo client chrooted to a fresh path, removed after the test."""
    chroot = f"/tests/{request.node.name.replace('/', '_')[:60]}-{uuid.uuid4().hex[:8]}"
    admin = kazoo(zk.connect)
    admin.ensure_path(chroot)
    client = kazoo(zk.connect + chroot)
    yield client
    client.stop()
    client.close()
    admin.delete(chroot, recursive=True)
    admin.stop()
    admin.close()


@pytest.fixture
def ensembles():
    """Start ensembles with `ensembles(servers=3, backend=...)`; closed after the test."""
    started: list[Ensemble] = []

    def start(servers: int = 3, backend: str | None = None, settings: ZkSettings | None = None) -> Ensemble:
        ensemble = provision(servers=servers, backend=backend, settings=settings)
        started.append(ensemble)
        return ensemble

    start.started = started
    yield start
    for ensemble in started:
        ensemble.close()


@pytest.fixture(scope="session")
def spark():
    """A local Spark session for the whole test run (stopped at exit)."""
    from lab_cluster.spark import local_session

    return local_session("local[2]")


@pytest.fixture
def docker_backend():
    """'testcontainers', or a skip (a failure under CI) saying why it cannot run."""
    problem = testcontainers_problem()
    if problem:
        if IN_CI:
            pytest.fail(f"CI must run the Docker tests, but: {problem}")
        pytest.skip(problem)
    return "testcontainers"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    found = [v for v in item.funcargs.values() if isinstance(v, Ensemble)]
    factory = item.funcargs.get("ensembles")
    if factory is not None:
        found += factory.started
    for ensemble in found:
        for sid, log in ensemble.server_logs().items():
            report.sections.append((f"ZooKeeper {ensemble.backend} server {sid} log (tail)", tail(log, 60)))
