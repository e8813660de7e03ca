"""Each backend starts (or attaches to) a real server: ruok, mntr, an ephemeral node, a version."""

import os
import re

import pytest
from conftest import kazoo


def _exercise(ensemble):
    server = ensemble.servers[0]
    assert server.four_letter("ruok").strip() == "imok"
    mntr = server.mntr()
    assert mntr["zk_server_state"] in ("standalone", "leader", "follower")
    assert re.match(r"3\.9\.\d+$", ensemble.version), ensemble.version
    assert mntr["zk_version"].startswith(ensemble.version)
    client = kazoo(ensemble.connect)
    try:
        path = client.create("/eph", b"v", ephemeral=True)
        data, stat = client.get(path)
        assert data == b"v"
        assert stat.ephemeralOwner == client.client_id[0]
    finally:
        client.stop()
        client.close()
    # The ephemeral node went with the session.
    other = kazoo(ensemble.connect)
    try:
        assert other.exists("/eph") is None
    finally:
        other.stop()
        other.close()


def test_embedded_backend_runs_a_real_server(ensembles):
    zk = ensembles(servers=1, backend="embedded")
    assert zk.backend == "embedded"
    assert "embedded" in zk.reason
    pid = zk.servers[0].pid
    assert "QuorumPeerMain" in open(f"/proc/{pid}/cmdline").read()
    _exercise(zk)


@pytest.mark.docker
def test_testcontainers_backend_runs_a_real_server(ensembles, docker_backend):
    zk = ensembles(servers=1, backend=docker_backend)
    assert zk.backend == "testcontainers"
    container = zk.servers[0].container.get_wrapped_container()
    container.reload()
    assert container.status == "running"
    assert container.attrs["HostConfig"]["NetworkMode"] == "host"
    env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
    assert env["ZOO_4LW_COMMANDS_WHITELIST"] == "*"  # configured the official image's way
    assert env["ZOO_MY_ID"] == "1"
    _exercise(zk)


def test_external_backend_uses_the_servers_it_is_given(ensembles, monkeypatch):
    real = ensembles(servers=1, backend="embedded")
    monkeypatch.setenv("LAB_ZK_CONNECT", real.connect)
    zk = ensembles(servers=1, backend="external")
    assert zk.backend == "external"
    assert zk.connect == real.connect
    _exercise(zk)


def test_external_backend_refuses_to_control_servers(ensembles, monkeypatch):
    from lab_cluster.errors import LabError

    real = ensembles(servers=1, backend="embedded")
    monkeypatch.setenv("LAB_ZK_CONNECT", real.connect)
    zk = ensembles(servers=1, backend="external")
    with pytest.raises(LabError, match="cannot start, stop or pause"):
        zk.servers[0].pause()


def test_auto_says_which_backend_and_why(monkeypatch):
    from lab_cluster.zk import choose_backend
    from lab_cluster.zk.backends import testcontainers_problem

    monkeypatch.delenv("LAB_ZK_BACKEND", raising=False)
    choice = choose_backend()
    problem = testcontainers_problem()
    if problem is None:
        assert choice.name == "testcontainers" and "image" in choice.reason
    else:
        assert choice.name == "embedded" and problem.rstrip(".") in choice.reason


def test_auto_falls_back_to_embedded_without_docker(monkeypatch):
    from lab_cluster.zk import choose_backend

    monkeypatch.delenv("LAB_ZK_BACKEND", raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    choice = choose_backend()
    assert choice.name == "embedded"
    assert "No Docker engine answers" in choice.reason


def test_session_fixture_backend_is_reported(zk):
    assert zk.backend in ("embedded", "testcontainers", "external")
    record = zk.describe()
    assert record["zk_backend"] == zk.backend and record["zk_version"] == zk.version
    assert os.environ.get("LAB_ZK_BACKEND", "auto") in ("auto", zk.backend)


def test_a_server_that_fails_to_start_shows_its_log():
    from lab_cluster.errors import LabError
    from lab_cluster.leaks import find_leaks
    from lab_cluster.zk import ZkSettings, provision

    running_before = set(find_leaks())  # e.g. the session's own server
    with pytest.raises(LabError) as info:
        provision(servers=1, backend="embedded", settings=ZkSettings(heap_mb=1))  # the JVM refuses a 1 MB heap
    assert "exited during start-up" in info.value.problem
    assert "heap" in info.value.details.lower()  # the server's own output, shown to the user
    assert set(find_leaks()) == running_before  # the half-started ensemble was cleaned up


def test_zookeeper_home_is_preferred_when_set(ensembles, monkeypatch, tmp_path):
    """An Apache-release layout (`$ZOOKEEPER_HOME/lib/*.jar`) runs too; here made from the same real jars."""
    from lab_cluster.zk.distribution import _from_spark, find_distribution

    lib = tmp_path / "apache-zookeeper-bin" / "lib"
    lib.mkdir(parents=True)
    for jar in _from_spark().classpath:
        (lib / os.path.basename(jar)).symlink_to(jar)
    monkeypatch.setenv("ZOOKEEPER_HOME", str(lib.parent))
    dist = find_distribution()
    assert dist.source == "ZOOKEEPER_HOME" and all(p.startswith(str(lib)) for p in dist.classpath)
    zk = ensembles(servers=1, backend="embedded")
    assert zk.servers[0].distribution.source == "ZOOKEEPER_HOME"
    _exercise(zk)


def test_zookeeper_home_without_jars_is_a_clear_error(monkeypatch, tmp_path):
    from lab_cluster.errors import LabError
    from lab_cluster.zk.distribution import find_distribution

    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    with pytest.raises(LabError, match="holds no zookeeper-X.Y.Z.jar"):
        find_distribution()


def test_a_server_whose_port_was_taken_meanwhile_is_started_again_on_new_ports(monkeypatch):
    """The port race: a port picked free is taken before the JVM binds it. The server exits with "Address
    already in use"; the ensemble is started again on fresh ports rather than failing the run."""
    import dataclasses
    import socket

    from lab_cluster.leaks import find_leaks
    from lab_cluster.zk import ensemble as ensemble_module
    from lab_cluster.zk import provision
    from lab_cluster.zk.settings import plan_ensemble

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    plans = []

    def first_plan_loses_its_client_port(size, client_port=None, ports=None):
        plan = plan_ensemble(size, client_port=client_port, ports=ports)
        if not plans:
            plan[0] = dataclasses.replace(plan[0], client_port=busy)
        plans.append(plan)
        return plan

    monkeypatch.setattr(ensemble_module, "plan_ensemble", first_plan_loses_its_client_port)
    running_before = set(find_leaks())
    try:
        with provision(servers=1, backend="embedded") as zk:
            assert len(plans) == 2 and zk.servers[0].address.client_port != busy
            assert zk.servers[0].srvr().get("serving")
    finally:
        taken.close()
    assert set(find_leaks()) == running_before


def test_a_trial_whose_server_fails_to_start_keeps_the_servers_log(monkeypatch, tmp_path):
    from experiments.engine import trial
    from lab_cluster.zk import ZkSettings, provision

    monkeypatch.setattr(trial, "provision", lambda servers, backend: provision(
        servers=servers, backend="embedded", settings=ZkSettings(heap_mb=1)))  # the JVM refuses a 1 MB heap
    result = trial.run_trial(trial.TrialSpec("herd", "zookeeper", consumers=1, partitions=2), tmp_path / "t")
    assert result.status == "failed" and "exited during start-up" in result.reason
    assert "failure.log" in result.reason
    assert "heap" in (tmp_path / "t" / "failure.log").read_text().lower()


def test_a_trial_that_meets_an_unexpected_error_fails_alone_with_its_traceback(monkeypatch, tmp_path):
    """A bug in one trial fails that trial (the run's others go on); it must not crash the Spark job."""
    from experiments.engine import trial

    def provision(servers, backend):
        raise KeyError("a bug")

    monkeypatch.setattr(trial, "provision", provision)
    result = trial.run_trial(trial.TrialSpec("herd", "zookeeper", consumers=1, partitions=2), tmp_path / "t")
    assert result.status == "failed" and result.reason.startswith("unexpected KeyError")
    assert "KeyError: 'a bug'" in (tmp_path / "t" / "failure.log").read_text()


def test_creating_a_topic_again_with_its_assignment_is_allowed_and_with_another_refused(zk):
    """Idempotent, so a retry after a ConnectionLoss that hid whether the write landed succeeds."""
    import uuid

    from lab_cluster.broker.admin import create_topic
    from lab_cluster.errors import LabError

    client = kazoo(zk.connect)
    try:
        topic = f"t{uuid.uuid4().hex[:8]}"
        first = create_topic(client, topic, 4, [1, 2, 3])
        assert create_topic(client, topic, 4, [1, 2, 3]) == first
        with pytest.raises(LabError, match="another assignment"):
            create_topic(client, topic, 5, [1, 2, 3])
    finally:
        client.stop()
        client.close()
