"""A local Spark session for the lab, stopped by the reaper like everything else.

`local_session()` gives `local[*]` with settings for a small machine (few
shuffle partitions, no UI, loopback only). Its driver JVM gets
`LAB_SPARK_DRIVER_MEMORY` (default 2g, Spark's own default is 1g): one session
serves a whole test run or reproduction, thousands of small jobs, and with 1g
an aggregation late in the test suite once found no memory left to take
(AGGREGATE_OUT_OF_MEMORY) although its input was a few megabytes. Experiments that run on a cluster
build their own session with `--master`; everything that reads traces takes
the session as an argument.

The driver JVM is the lab's like any server it starts. It carries
`-Drebalance.lab.spark.driver=<pid>` (`lab_cluster.leaks` finds a dead
process's), and the reaper stops it when the process ends (`stop_driver`):
PySpark leaves it to notice its stdin close, which it does only once it is up.
A Ctrl-C while it starts is held until it is up and registered
(`_start_holding_ctrl_c`): PySpark's `launch_gateway` would otherwise remove the
directory the starting JVM writes its port to, and that JVM, failing before it
listens to its stdin, would run on forever (seen: a `bench` interrupted two
seconds in). Once it is up, Ctrl-C cancels the session's jobs and raises
KeyboardInterrupt, as PySpark's own handler does, but from a thread of its own
and without Py4J's traceback (`_cancel_jobs_and_interrupt`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

from .cleanup import REAPER, SPARK_DRIVER_PROPERTY
from .processes import caused_by_ctrl_c, descendants, wait_gone

_session = None


def local_session(master: str | None = "local[*]", app: str = "rebalance-lab"):
    """The process's Spark session (created on first use, stopped at exit).

    `master=None` keeps the master `spark-submit` chose (its JVM is already up:
    PYSPARK_GATEWAY_PORT is set), and is `local[*]` otherwise.
    """
    global _session
    if _session is not None:
        return _session
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master) if master else SparkSession.builder
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # the JVM starts here, so its heap can still be chosen
        builder = (builder.config("spark.driver.memory", os.environ.get("LAB_SPARK_DRIVER_MEMORY", "2g"))
                   .config("spark.driver.extraJavaOptions", f"-D{SPARK_DRIVER_PROPERTY}={os.getpid()}"))
    builder = (builder.appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC")
               # a long-lived session: let the cleaner drop unreachable broadcasts and shuffles every few
               # minutes rather than every 30 (Spark's default), so that they do not pile up in its memory
               .config("spark.cleaner.periodicGC.interval", "5min"))
    global _token
    _session, interrupted = _start_holding_ctrl_c(builder)
    _token = REAPER.register("Spark session", stop_session)
    if interrupted:
        raise KeyboardInterrupt
    _session.sparkContext.setLogLevel("ERROR")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _cancel_jobs_and_interrupt)
        _quiet_py4j_interrupts()
    return _session


def _start_holding_ctrl_c(builder):
    """(`builder.getOrCreate()`, whether a Ctrl-C came meanwhile): a Ctrl-C is held until the session (and its
    JVM, if it starts one) is up, for the caller to register it with the reaper and then raise it.

    From the main thread the session starts in a thread of its own, which the main thread waits for, holding
    SIGINT: PySpark installs its own SIGINT handler only when its SparkContext starts in the main thread, and
    that handler would interrupt the start half-way."""
    def start():
        try:
            outcome["session"] = builder.getOrCreate()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc
        finally:
            _register_driver()  # also when the start failed half-way: a JVM may be up

    outcome: dict = {}
    held = []
    if threading.current_thread() is not threading.main_thread():
        start()
    else:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
        try:
            starter = threading.Thread(target=start, name="Spark session start")
            starter.start()
            while starter.is_alive():
                starter.join(0.2)
        finally:
            signal.signal(signal.SIGINT, previous)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["session"], bool(held)


def _cancel_jobs_and_interrupt(signum, frame):
    """Ctrl-C with a session up: cancel its running jobs, then raise KeyboardInterrupt where the main thread is.

    PySpark's own handler does the same, but cancels from the main thread, which is often inside a call to the
    JVM (waiting for a job): Py4J then finds that thread's connection busy ("reentrant call") and logs two
    tracebacks. A thread of its own has a connection of its own."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        threading.Thread(target=_cancel_all_jobs, args=(context,), name="cancel Spark jobs", daemon=True).start()
    raise KeyboardInterrupt


def _cancel_all_jobs(context) -> None:
    with contextlib.suppress(Exception):  # the interrupted process may have stopped the session first
        context.cancelAllJobs()


#: where Py4J logs an interrupted call: `GatewayClient.send_command` logs on the root logger itself
#: (`logging.exception`), then closes the connection's Java socket and logs a failure of that on its own logger
#: (`ClientServerConnection.shutdown_socket`). A logger's filter sees only what is logged to it directly, not what
#: its children propagate, so each gets the filter.
_PY4J_LOGGERS = ("", "py4j.java_gateway", "py4j.clientserver")


def _quiet_py4j_interrupts() -> None:
    for name in _PY4J_LOGGERS:
        logging.getLogger(name).addFilter(_quiet_interrupted_call)


def _quiet_interrupted_call(record: logging.LogRecord) -> bool:
    """Py4J logs a KeyboardInterrupt in a call to the JVM as an error, traceback and all
    (`GatewayClient.send_command`), and then, often, the broken pipe of closing that call's connection, raised
    while the KeyboardInterrupt was handled (`shutdown_socket`); to the lab a Ctrl-C is no error, and the CLI says
    what it stopped. Any other record stays."""
    from_py4j = record.name.startswith("py4j.") or record.module in ("java_gateway", "clientserver")
    return not (from_py4j and record.exc_info is not None
                and caused_by_ctrl_c(record.exc_info[1]))


_driver_token: int | None = None


def _driver_proc():
    """The `Popen` of the driver JVM this process started, if it did (None when `spark-submit` started it)."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def _register_driver() -> None:
    """Have the reaper stop the driver JVM this process started."""
    global _driver_token
    if _driver_token is None and _driver_proc() is not None:
        _driver_token = REAPER.register("Spark driver JVM", stop_driver)


def stop_driver() -> None:
    """Stop the session, then the driver JVM: its stdin closed, it exits (Spark's `PythonGatewayServer` waits for
    that); killed if it has not within 10 s.

    Also the way out of a broken gateway (a call interrupted half-way leaves its answer unread on the
    connection, so every later call reads the answer to the one before it): the session's stop may then fail,
    and the JVM goes anyway; the next `local_session()` starts a new one."""
    global _driver_token
    from pyspark import SparkContext

    try:
        stop_session()
    except Exception:  # noqa: BLE001 - the gateway is broken: PySpark's own record of the session goes too
        from pyspark.sql import SparkSession

        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = SparkSession._activeSession = None
    proc = _driver_proc()
    if proc is not None:
        with contextlib.suppress(Exception):
            SparkContext._gateway.shutdown()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except Exception:  # noqa: BLE001 - it did not go by itself
            proc.kill()
            proc.wait()
    SparkContext._gateway = SparkContext._jvm = None
    if _driver_token is not None:
        REAPER.unregister(_driver_token)
        _driver_token = None


_token: int | None = None


def cached_datasets() -> list[str]:
    """What the process's session still keeps cached (none, between runs: each analysis unpersists its own)."""
    if _session is None:
        return []
    cached = _session.sparkContext._jsc.getPersistentRDDs()
    return [f"cached Spark dataset {cached.get(key).name() or key}" for key in cached.keySet().toArray()]


#: how long a stop waits for the session's Python workers to end: a trial running in one stops what it started
WORKERS_STOP_S = 60.0


def stop_session() -> None:
    """Stop the process's session and wait for its Python workers to end; the next `local_session()` starts a
    new one (a new SparkContext, with its own memory accounting, in the same driver JVM).

    Spark's stop tells its Python workers to go (PySpark's daemon sends them SIGHUP) but does not wait for
    them. A worker in the middle of a trial (Ctrl-C came) then stops the trial's servers and writes its last
    files; the caller, once this returns, may remove the directory they go to."""
    global _session, _token
    if _session is not None:
        driver = _driver_proc()
        workers = descendants(driver.pid) if driver is not None else []
        # what a stop cuts short (a task running when Ctrl-C came: its worker is killed) is no error to report
        with contextlib.suppress(Exception):
            _session.sparkContext.setLogLevel("OFF")
        try:
            _session.stop()
        finally:  # a stop that fails (a broken gateway) forgets the session all the same: `stop_driver` follows
            _session = None
            if _token is not None:
                REAPER.unregister(_token)
                _token = None
        wait_gone(workers, WORKERS_STOP_S)
