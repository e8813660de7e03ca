"""Nothing leaks: a lab process that ends in any way leaves no JVM, container, proxy or temp dir.

Each case runs a real lab process (tests/lab_child.py) that starts ZooKeeper
and then exits, raises, or is sent SIGINT, SIGTERM or SIGKILL. Afterwards
`find_leaks(child pid)` must be empty. SIGKILL gives the process no chance to
clean up: the kernel kills its JVMs (parent-death signal), and what is left
on disk is removed by `reap_orphans()`, the lab's stand-in for Ryuk.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab_cluster.leaks import find_leaks, lab_containers, lab_processes, reap_orphans

CHILD = Path(__file__).with_name("lab_child.py")
REPO = CHILD.parent.parent


def _spawn(backend, servers, ending):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(CHILD), backend, str(servers), ending], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def _wait_ready(proc):
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"child failed to start: {line!r} {proc.stderr.read()[-2000:]}"


def _owned_by(pid):
    return ([p for p, o in lab_processes().items() if o == pid], [c.name for c, o in lab_containers() if o == pid])


def _wait_gone(pid, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_owned_by(pid)):
        time.sleep(0.2)


@pytest.mark.parametrize("ending", ["exit", "raise"])
def test_normal_exit_and_exception_leave_nothing(ending):
    proc = _spawn("embedded", 1, ending)
    _wait_ready(proc)
    proc.wait(timeout=60)
    assert (proc.returncode == 0) == (ending == "exit")
    assert find_leaks(proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_an_ensemble_and_its_proxies(sig):
    proc = _spawn("embedded", 3, "wait")
    _wait_ready(proc)
    jvms, _ = _owned_by(proc.pid)
    assert len(jvms) == 3
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert find_leaks(proc.pid) == []


def test_sigkill_leaves_no_jvm_and_the_orphans_are_reaped():
    proc = _spawn("embedded", 1, "wait")
    _wait_ready(proc)
    proc.kill()
    proc.wait(timeout=30)
    _wait_gone(proc.pid)
    assert _owned_by(proc.pid) == ([], [])  # the kernel killed the JVM with its parent
    reaped = reap_orphans()  # its temp dir is all that is left, and the reaper takes it
    assert find_leaks(proc.pid) == []
    assert all("temp dir" in r for r in reaped if str(proc.pid) in r)


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_containers_are_removed_on_sigterm_and_reaped_after_sigkill(docker_backend, sig):
    proc = _spawn(docker_backend, 1, "wait")
    _wait_ready(proc)
    assert len(_owned_by(proc.pid)[1]) == 1
    proc.send_signal(sig)
    proc.wait(timeout=60)
    if sig == signal.SIGKILL:
        # Nobody ran the child's cleanup: without Ryuk, the lab's reaper removes it.
        assert len(_owned_by(proc.pid)[1]) == 1
        reap_orphans()
    assert find_leaks(proc.pid) == []
