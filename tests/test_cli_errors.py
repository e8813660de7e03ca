"""Bad input gets one clear paragraph, exit status 2, no traceback, and no hang.

Each case runs the real CLI in a subprocess with a broken environment and a
time limit; the time limit is a guard against hangs, not a speed assertion.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from conftest import REPO, cli, interrupt, kazoo

from lab_cluster.leaks import find_leaks
from lab_cluster.ports import free_port


def assert_clear_error(result, *phrases):
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    first = result.stderr.strip().splitlines()[0]
    assert first.startswith("error: ")
    for phrase in phrases:
        assert phrase in result.stderr, (phrase, result.stderr)


def test_java_missing():
    result = cli("doctor", "--start", "--backend", "embedded",
                 env_changes={"JAVA_HOME": None, "PATH": "/nonexistent"})
    assert_clear_error(result, "Java was not found", "openjdk-17-jre-headless")


def test_java_home_wrong():
    result = cli("zk", "up", "--backend", "embedded", env_changes={"JAVA_HOME": "/nonexistent/jdk"})
    assert_clear_error(result, "JAVA_HOME is set to /nonexistent/jdk")


def test_unknown_backend():
    result = cli("doctor", env_changes={"LAB_ZK_BACKEND": "zookeeper-in-the-cloud"})
    assert_clear_error(result, "Unknown ZooKeeper backend 'zookeeper-in-the-cloud'", "embedded, testcontainers")


def test_port_in_use():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = cli("zk", "up", "--backend", "embedded", "--port", str(port))
    assert_clear_error(result, f"Port {port} on 127.0.0.1", "already in use")


@pytest.mark.parametrize("command", [("reproduce",), ("run", "herd")])
def test_a_run_into_a_directory_that_holds_one_is_refused_and_the_old_run_is_kept(tmp_path, command):
    old = tmp_path / "run"
    (old / "trials").mkdir(parents=True)
    (old / "grid.json").write_text("[]")
    result = cli(*command, "--out", str(old))
    assert_clear_error(result, f"{old} already holds a run", "Give --out a new directory")
    assert (old / "grid.json").read_text() == "[]" and sorted(p.name for p in old.iterdir()) == ["grid.json", "trials"]


def test_docker_unreachable():
    result = cli("doctor", "--start", "--backend", "testcontainers",
                 env_changes={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert_clear_error(result, "No Docker engine answers at unix:///nonexistent/docker.sock", "setup.sh --docker")


@pytest.mark.docker
def test_image_missing_says_how_to_build_it(docker_backend):
    result = cli("doctor", "--start", "--backend", docker_backend,
                 env_changes={"LAB_ZK_IMAGE": "rebalance-lab/no-such-image:0"})
    assert_clear_error(result, "rebalance-lab/no-such-image:0 is not in the local Docker engine",
                       "docker/build-image.sh")


def test_external_unreachable():
    port = free_port()
    result = cli("doctor", "--start", "--backend", "external",
                 env_changes={"LAB_ZK_CONNECT": f"127.0.0.1:{port}"})
    assert_clear_error(result, f"No server of LAB_ZK_CONNECT=127.0.0.1:{port} answered")


def test_external_connect_string_malformed():
    result = cli("doctor", "--start", "--backend", "external", env_changes={"LAB_ZK_CONNECT": "localhost"})
    assert_clear_error(result, "is not a ZooKeeper connect string")


def test_doctor_reports_a_usable_backend():
    result = cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "backend embedded" in result.stdout and "backend:" in result.stdout


def test_doctor_start_runs_ruok_and_mntr_and_stops():
    result = cli("doctor", "--start", "--backend", "embedded")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ruok: imok" in result.stdout
    assert "zk_server_state=standalone" in result.stdout
    assert "started ZooKeeper 3.9." in result.stdout


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="needs Java")
def test_zk_up_serves_until_ctrl_c_and_leaves_nothing():
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    # Started the way a script's background job (`cmd &`) or a CI runner starts it: with SIGINT
    # ignored, which the child inherits. Ctrl-C must stop it all the same (`honour_ctrl_c`).
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "zk", "up", "--backend", "embedded",
                             "--servers", "3"], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        connect = None
        for line in proc.stdout:
            if line.startswith("connect string:"):
                connect = line.split(":", 1)[1].strip()
                break
        assert connect and connect.count(",") == 2, proc.stderr.read()
        client = kazoo(connect)
        client.create("/poked", b"yes")
        client.stop()
        client.close()
    finally:
        interrupt(proc)
    assert proc.returncode in (0, 130)
    assert "Traceback" not in proc.stderr.read()
    assert find_leaks(proc.pid) == []


@pytest.mark.parametrize("raised_while_handled, exit_status", [(KeyboardInterrupt, 130), (None, None)])
def test_an_error_raised_while_a_ctrl_c_was_handled_is_the_ctrl_c(monkeypatch, capsys, raised_while_handled,
                                                                   exit_status):
    """PySpark's `collect`, interrupted, clears its call site on a new Py4J connection, and under load that call
    can fail and replace the KeyboardInterrupt: the CLI still says it was interrupted. Any other error is raised."""
    import argparse

    import experiments.cli as cli_module

    def run(args):
        try:
            if raised_while_handled is not None:
                raise raised_while_handled
        except KeyboardInterrupt:
            raise RuntimeError("Answer from Java side is empty")  # noqa: B904 - Python chains it, as Py4J's does
        raise RuntimeError("a bug")

    parser = argparse.ArgumentParser()
    parser.set_defaults(run=run)
    monkeypatch.setattr(cli_module, "build_parser", lambda: parser)
    if exit_status is None:
        with pytest.raises(RuntimeError, match="a bug"):
            cli_module.main([])
    else:
        assert cli_module.main([]) == exit_status
        assert capsys.readouterr().err.startswith("interrupted;")
