"""The lab's own overhead in each trial, and the trials it starved: read from the hosts' `host_health` events.

Every consumer host measures itself once a second (`lab_cluster/host_health.py`):
how late its threads woke, the CPU it took, and, where its members talk to
ZooKeeper, how late their pings went out and how long they took to answer.
Per trial (`host_overhead`):

- `hosts`: the host processes that reported;
- `host_late_ms_max`: the latest any host's threads woke, in a window it was
  judged (not paused by a fault), and `host_late_ms_mean`, the mean over every
  judged window of every host;
- `host_cpu_share_max`: the most CPU one host took in a full window (1.0: a
  whole core), and `host_cpu_s`, the CPU seconds all the hosts took together;
- `zk_ping_late_ms_max`, `zk_ping_rtt_ms_max`: the latest ping (or request) a
  ZooKeeper client sent, and the slowest answer it had (null for designs without
  ZooKeeper clients). A ping's answer time includes the server's queue, which is
  the design's load as much as the lab's, so it is shown, not judged;
- `hosts_starved`: the hosts that were starved in some judged window: woke, or
  sent a ping, later than `STARVED_FRACTION` of their session timeout.

A trial with a starved host is invalid (`starved`): a session that expired
there may have expired for the lab's sake, so its figures are not the design's
(`harness.analyse` marks it, and the report leaves it out). Windows that
overlap a `pause` of the host's process (the fault's `pid`; from the fault to
its `resume`, or to the end if there was none) are not judged: a paused host is late because the experiment
paused it. A window's lateness reaches back before its start by as much as it was late (a ping due in the
pause goes out after it, perhaps in the window after the one the host woke in), so a window counts as
paused when that reach overlaps the pause.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from experiments.digest import NS_PER_S, Digest, digest_of, field
from lab_cluster.host_health import HEALTH, STARVED_FRACTION

#: a window at least this long (`host_health.HealthProbe` records one a second) is a full one
FULL_WINDOW_S = 0.5
COLUMNS = ("hosts", "host_late_ms_max", "host_late_ms_mean", "host_cpu_share_max", "host_cpu_s",
           "zk_ping_late_ms_max", "zk_ping_rtt_ms_max", "hosts_starved")


def health_windows(control: DataFrame) -> DataFrame:
    """trial, host, pid, start_ns, ts_ns and the figures of every `host_health` window, with `paused` (a fault
    paused that host during it), `late_ms` (its threads' or its pings' lateness, the larger) and `starved`."""
    windows = control.where(F.col("kind") == HEALTH).select(
        "trial", field("host").alias("host"), field("pid").alias("pid"), "ts_ns",
        (F.col("ts_ns") - (field("window_s").cast("double") * NS_PER_S).cast("long")).alias("start_ns"),
        *[field(name).cast("double").alias(name) for name in (
            "late_ms_max", "late_ms_mean", "cpu_share", "window_s", "session_timeout_ms", "ping_late_ms_max",
            "ping_rtt_ms_max")])
    # a fault names the process it paused (`consumers-c2`, its `pid`): the host is the process of that pid
    faults = control.where(F.col("kind") == "fault").select("trial", field("pid").alias("pid"), "ts_ns",
                                                            field("action").alias("action"))
    pauses = faults.where(F.col("action") == "pause").select("trial", "pid", F.col("ts_ns").alias("p_start"))
    resumes = faults.where(F.col("action") == "resume").select("trial", "pid", F.col("ts_ns").alias("r_ts"))
    paused = (pauses.join(resumes, ["trial", "pid"], "left")
              .where(F.col("r_ts").isNull() | (F.col("r_ts") >= F.col("p_start")))
              .groupBy("trial", "pid", "p_start").agg(F.min("r_ts").alias("p_stop")))
    # how late the host was: its threads' wake-ups or its ZooKeeper clients' sends, whichever more
    windows = windows.withColumn("late_ms", F.greatest("late_ms_max", F.coalesce("ping_late_ms_max", F.lit(0.0))))
    # a send late by L ms seen in a window was due L ms before it was seen, so the lateness a window records
    # reaches back to its start minus L: a ping kazoo's thread sends just after a resume, once the probe has
    # closed the window it woke in, is late by the whole pause and lands in the next window
    reaches_back_ns = F.col("w.start_ns") - (F.col("w.late_ms") * 1e6).cast("long")
    overlapping = (windows.alias("w").join(paused.alias("p"), ["trial", "pid"])
                   .where((F.col("p_start") < F.col("w.ts_ns"))
                          & (F.col("p_stop").isNull() | (F.col("p_stop") > reaches_back_ns)))
                   .select("trial", "host", "w.ts_ns").distinct().withColumn("paused", F.lit(True)))
    return (windows.join(overlapping, ["trial", "host", "ts_ns"], "left")
            .fillna(False, subset=["paused"])
            .withColumn("starved", ~F.col("paused")
                        & (F.col("late_ms") > F.lit(STARVED_FRACTION) * F.col("session_timeout_ms"))))


def host_overhead(events: DataFrame | Digest) -> DataFrame:
    """trial and `COLUMNS`, for every trial whose hosts reported (see the module's docstring)."""
    windows = health_windows(digest_of(events).control)
    judged = windows.where(~F.col("paused"))
    per_trial = windows.groupBy("trial").agg(
        F.countDistinct("host").alias("hosts"),
        # a host's last window ends when it stops, often a few ms after the one before: its CPU share, a few
        # 10 ms clock ticks over those ms, says nothing, so the highest share is taken over full windows
        F.max(F.when(F.col("window_s") >= FULL_WINDOW_S, F.col("cpu_share"))).alias("host_cpu_share_max"),
        F.round(F.sum(F.col("cpu_share") * F.col("window_s")), 2).alias("host_cpu_s"),
        F.max("ping_rtt_ms_max").alias("zk_ping_rtt_ms_max"))
    judged_per_trial = judged.groupBy("trial").agg(
        F.max("late_ms_max").alias("host_late_ms_max"),
        F.round(F.avg("late_ms_mean"), 1).alias("host_late_ms_mean"),
        F.max("ping_late_ms_max").alias("zk_ping_late_ms_max"),
        F.countDistinct(F.when(F.col("starved"), F.col("host"))).alias("hosts_starved"))
    return per_trial.join(judged_per_trial, "trial", "left").select("trial", *COLUMNS)


def starved(events: DataFrame | Digest) -> DataFrame:
    """(trial, problem) for every trial with a starved host, naming the worst one and by how much."""
    windows = health_windows(digest_of(events).control).where(F.col("starved"))
    worst = windows.groupBy("trial").agg(
        F.countDistinct("host").alias("hosts"),
        F.max_by(F.struct("host", "late_ms", "session_timeout_ms"), "late_ms").alias("w"))
    return worst.select("trial", F.format_string(
        "%d host(s) starved by the lab's own load, the worst %s %.0f ms late (more than a third of its %.0f ms "
        "session timeout): its figures may be the lab's, not the design's", "hosts", "w.host", "w.late_ms",
        "w.session_timeout_ms").alias("problem"))
