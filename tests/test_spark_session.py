"""The lab's Spark session (`lab_cluster/spark.py`) under Ctrl-C: whenever it comes, the process says it was
interrupted, prints no traceback, and leaves no driver JVM behind.

Each test runs a small lab process of its own and interrupts it, as a user at a terminal would.
"""

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab_cluster.leaks import find_leaks
from lab_cluster.spark import _quiet_interrupted_call, _quiet_py4j_interrupts

REPO = Path(__file__).resolve().parent.parent

#: A lab process: starts a session, says so, runs a job that would take a minute, and reports how it ended.
CHILD = """
import sys, time
import pyspark
from lab_cluster.processes import caused_by_ctrl_c, honour_ctrl_c
honour_ctrl_c()
from lab_cluster.spark import local_session
print("starting", flush=True)
try:
    spark = local_session("local[1]")
    print("running", flush=True)
    spark.sparkContext.parallelize([1], 1).map(lambda x: time.sleep(60)).collect()
    print("finished", flush=True)
except (KeyboardInterrupt, Exception) as error:  # as the lab's CLI reports a Ctrl-C (`experiments.cli.main`)
    if not caused_by_ctrl_c(error):
        raise
    print("interrupted", flush=True)
    sys.exit(130)
"""


def _start_child():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(proc, line: str) -> None:
    for got in proc.stdout:
        if got.strip() == line:
            return
    raise AssertionError(f"the child ended before printing {line!r}: {proc.stderr.read()[-2000:]}")


def _interrupt(after: str, wait_s: float, while_running=None) -> str:
    """Start the child, wait for its line `after` and `wait_s` more (then call `while_running(pid)`), Ctrl-C it;
    check that it said so, exited 130, printed no traceback and left nothing. Its stdout."""
    proc = _start_child()
    try:
        _wait_for(proc, after)
        time.sleep(wait_s)
        if while_running is not None:
            while_running(proc.pid)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=50)  # the job alone would take 60 s
        except subprocess.TimeoutExpired:
            raise AssertionError("Ctrl-C did not end the child") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "interrupted" in out, (out, err[-2000:])
    assert proc.returncode == 130
    assert "Traceback" not in err, err[-3000:]
    assert find_leaks(proc.pid) == []
    return out


def test_ctrl_c_while_the_driver_jvm_starts_leaves_no_jvm():
    """The JVM takes seconds to start; a Ctrl-C half a second after the start begins lands inside it. PySpark
    alone would leave that JVM running forever (it removes the directory the JVM writes its port to)."""
    assert "running" not in _interrupt(after="starting", wait_s=0.5)


def test_ctrl_c_during_a_job_cancels_it_and_stops_the_driver_jvm():
    def its_driver_is_found(pid: int) -> None:
        # while it lives, its driver JVM is found as its own (so the check after it ends can see one left)
        assert any(leak.startswith("Spark driver JVM") for leak in find_leaks(pid)), find_leaks(pid)

    # 2 s after "running", the job's task is running
    assert "finished" not in _interrupt(after="running", wait_s=2, while_running=its_driver_is_found)


def _raised_while_handling(context: BaseException) -> BaseException:
    try:
        try:
            raise context
        except BaseException:
            raise BrokenPipeError(32, "Broken pipe")  # noqa: B904 - Python chains it, as in Py4J's shutdown_socket
    except BrokenPipeError as error:
        return error


@pytest.mark.parametrize("module, error, shown", [
    ("java_gateway", KeyboardInterrupt(), False),  # Py4J's "KeyboardInterrupt while sending command."
    # then its "Exception occurred while shutting down connection": a broken pipe while the Ctrl-C was handled
    ("clientserver", _raised_while_handling(KeyboardInterrupt()), False),
    ("clientserver", _raised_while_handling(ConnectionResetError()), True),  # not during a Ctrl-C: kept
    ("java_gateway", ConnectionResetError(), True),  # a real error of Py4J's stays in the log
    ("trial", KeyboardInterrupt(), True),  # and so does anyone else's record
])
def test_only_py4js_records_of_an_interrupted_call_are_kept_out_of_the_log(module, error, shown):
    record = logging.LogRecord("root", logging.ERROR, f"/x/{module}.py", 1, "msg", None,
                               (type(error), error, None))
    assert _quiet_interrupted_call(record) is shown


def test_py4js_records_of_an_interrupted_call_reach_no_handler_and_its_other_records_do(caplog):
    """A filter on the root logger does not see what its children propagate: the lab's filter is on each logger
    Py4J writes an interrupted call's records to (the CI failure of this test's neighbour: the broken pipe that
    `shutdown_socket` logs on `py4j.clientserver` after a Ctrl-C)."""
    _quiet_py4j_interrupts()
    shutdown = logging.getLogger("py4j.clientserver")
    with caplog.at_level(logging.ERROR):
        try:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                raise BrokenPipeError(32, "Broken pipe")  # noqa: B904
        except BrokenPipeError:
            shutdown.exception("Exception occurred while shutting down connection")
        try:
            raise ConnectionResetError
        except ConnectionResetError:
            shutdown.exception("a real error")
    assert [r.getMessage() for r in caplog.records] == ["a real error"]


#: A lab process whose call to the JVM is cut short, as pytest-timeout cuts a test short (its `Failed` is a
#: BaseException, which Py4J does not clean up after as it does after a KeyboardInterrupt).
CUT_CHILD = """
import os, signal, time
from lab_cluster.leaks import find_leaks
from lab_cluster.spark import local_session, stop_driver

class Cut(BaseException):
    pass

def cut(*_):
    raise Cut

spark = local_session("local[1]")
signal.signal(signal.SIGALRM, cut)
signal.setitimer(signal.ITIMER_REAL, 2.0)
try:
    spark.sparkContext.parallelize([1], 1).map(lambda x: time.sleep(4) or x).collect()
except Cut:
    print("cut", flush=True)
time.sleep(4)  # the job ends; its answer waits, unread, on the main thread's connection
try:
    print("next call:", spark.range(3).count(), flush=True)
except Exception as error:
    print("next call:", type(error).__name__, flush=True)
stop_driver()
print("left:", find_leaks(os.getpid()), flush=True)
print("new session:", local_session("local[1]").range(3).count(), flush=True)
stop_driver()
"""


def test_a_call_cut_short_breaks_the_gateway_and_stop_driver_starts_afresh():
    """Why the tests' `module_session` stops the driver JVM after a test cut short by its timeout: the call's
    answer is read by the next call, and only a new JVM (a new gateway) answers right again."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", CUT_CHILD], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    lines = [line for line in done.stdout.splitlines() if line.split(":")[0] in ("cut", "next call", "left",
                                                                                   "new session")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines[0] == "cut" and lines[1] != "next call: 3", lines  # the gateway is broken
    assert lines[2:] == ["left: []", "new session: 3"], (lines, done.stderr[-3000:])
