"""A local Spark session for the lab, stopped by the reaper like everything else.

`local_session()` gives `local[*]` with settings for a small machine (few
shuffle partitions, no UI, loopback only). Its driver JVM gets
`LAB_SPARK_DRIVER_MEMORY` (default 2g, Spark's own default is 1g): one session
serves a whole test run or reproduction, thousands of small jobs, and with 1g
an aggregation late in the test suite once found no memory left to take
(AGGREGATE_OUT_OF_MEMORY) although its input was a few megabytes. Experiments that run on a cluster
build their own session with `--master`; everything that reads traces takes
the session as an argument.
"""

from __future__ import annotations

import os

from .cleanup import REAPER

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
        builder = builder.config("spark.driver.memory", os.environ.get("LAB_SPARK_DRIVER_MEMORY", "2g"))
    _session = (builder.appName(app)
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.shuffle.partitions", "4")
                .config("spark.sql.session.timeZone", "UTC")
                # a long-lived session: let the cleaner drop unreachable broadcasts and shuffles every few
                # minutes rather than every 30 (Spark's default), so that they do not pile up in its memory
                .config("spark.cleaner.periodicGC.interval", "5min")
                .getOrCreate())
    _session.sparkContext.setLogLevel("ERROR")
    global _token
    _token = REAPER.register("Spark session", stop_session)
    return _session


_token: int | None = None


def cached_datasets() -> list[str]:
    """What the process's session still keeps cached (none, between runs: each analysis unpersists its own)."""
    if _session is None:
        return []
    cached = _session.sparkContext._jsc.getPersistentRDDs()
    return [f"cached Spark dataset {cached.get(key).name() or key}" for key in cached.keySet().toArray()]


def stop_session() -> None:
    """Stop the process's session; the next `local_session()` starts a new one (a new SparkContext, with its
    own memory accounting, in the same driver JVM)."""
    global _session, _token
    if _session is not None:
        _session.stop()
        _session = None
    if _token is not None:
        REAPER.unregister(_token)
        _token = None
