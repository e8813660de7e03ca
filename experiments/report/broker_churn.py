"""The broker-churn section of the report: a broker killed and restarted under a stable group (see `render.py`).

Rendered from the run's stored summary and grid only (`experiment.StoredRun`):
a table with one row per trial, a figure of the rebalance rounds and the time
until every partition was processed again, after the kill and after the
restart, per design and victim.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import broker_churn  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.report.parts import STYLE, Section, findings_list, reproduce_line, table  # noqa: E402

TRIAL_TABLE = [("design", "design"), ("case", "victim"), ("consumers", "N"),
               ("kill_generations", "rounds after the kill"), ("kill_rebalances", "rebalances begun (kill)"),
               ("kill_revoking", "members revoking (kill)"),
               ("restart_generations", "rounds after the restart"),
               ("restart_rebalances", "rebalances begun (restart)"), ("restart_revoking", "members revoking (restart)"),
               ("partitions_revoked", "partitions revoked"),
               ("unowned_partition_s", "unowned partition-s"), ("unprocessed_partition_s", "unprocessed partition-s"),
               ("resumed_after_kill_ms", "all processed again after the kill, ms"),
               ("resumed_after_restart_ms", "... after the restart, ms"), ("duplicates", "duplicates")]
FIGURE = [("kill_rebalances", "rebalances begun after the kill"),
          ("restart_rebalances", "rebalances begun after the restart"),
          ("resumed_after_kill_ms", "ms until every partition is processed again (kill)"),
          ("unprocessed_partition_s", "unprocessed partition-s (both)")]


def broker_churn_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root = run.env, run.figures, run.root
    trials = _ordered(broker_churn.per_trial(summary[summary.status == "ok"]))
    setup = [("designs", ", ".join(d for d in STYLE if (summary.design == d).any())),
             ("group", f"N = {run.spec(broker_churn.NAME, 'consumers')} consumers `c1..cN`, each in its own process"),
             ("partitions P", f"{run.spec(broker_churn.NAME, 'partitions')}, led round-robin by 3 brokers "
                              "(replicas on all three)"),
             ("producer", f"{run.spec(broker_churn.NAME, 'rate')} records/s per partition"),
             ("scenario", "the stable group; SIGKILL one broker and wait until ZooKeeper expired its session "
                          "(6 s) and the controller gave its partitions new leaders; watch the group; start the "
                          "broker again under its id and port; watch again. Each window is watched for "
                          f"{run.spec(broker_churn.NAME, 'hold_s')} s once the group is whole (longer where a "
                          "design learns of new leaders on a period)"),
             ("victim", "`coordinator`: the broker that coordinates the group (FindCoordinator); `other`: the "
                        "highest-numbered broker that is not; the ZooKeeper era's `watch-always` and "
                        "`watch-when_empty`: how its consumers watch `/brokers/ids` (`watch_broker_ids`)"),
             ("configs", "each family's defaults; the ZooKeeper era's `watch_broker_ids` as the victim says")]
    figure = _figure(trials, figures / "broker-churn.png")
    rows = trials.assign(case=[f"{v} ({w})" if w else v for v, w in zip(trials.victim, trials.watch, strict=True)])
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

"""
    short = f"""**Results per trial** ("rounds" are the rebalance rounds some consumer entered,
`metrics.py: rebalance_rounds`: generations in the coordinator era, membership
views in the ZooKeeper era, which a broker change does not change; "rebalances
begun" every consumer's rebalance attempts; "members revoking" the consumers that revoked
any partition; "unprocessed partition-s" the partition-seconds nobody processed
(a leaderless partition is owned and unprocessed); "all processed again" the
time from the change until every partition was processed again after its last
pause of more than a second, empty if one never was within the window;
duplicates are the trial's; TubeMQ's windows are not required to converge, see
the module's docstring):

{table([label for _, label in TRIAL_TABLE], rows[[c for c, _ in TRIAL_TABLE]].itertuples(index=False))}"""
    takeaway = """In the ZooKeeper era a broker is part of what every
consumer watches: with `/brokers/ids` watched, the broker's session expiry and
its return each fire every consumer's watch, and every consumer releases all
it owns and rebalances (`legacy_zk/consumer.py`), although the group's
membership did not change. Kafka 0.8.2.2's own code watched `/brokers/ids`
only when a rebalance had found no broker at all, and then nobody rebalances:
each fetcher finds its partition's new leader with a Metadata request
(`legacy_zk/fetching.py`). In the coordinator era a broker's death is no group
event: the members' fetchers move to the new leaders and the coordinator
hears nothing (Kafka's `test_broker_failure`). When the dead broker was the
coordinator, the next leader of the group's `__consumer_offsets` partition
replays the log, group record included, and holds the group Stable in the same
generation (`modern_coord/coordinator/coordinator.py: load_partition`); the
members look the coordinator up again and heartbeat on. Either way the cost is
the same: the dead broker's partitions wait for its session to expire and the
controller to elect new leaders, and nothing else stops. RocketMQ and TubeMQ
learn of new leaders on their own periods, and their recovery is that long. Their duplicates are what the dead
broker had not flushed (every 5 s; the lab carries the flushed offsets to the new leader,
`lab_cluster/partition_offsets.py`): it dies seconds after the first records, as a real broker's would be."""
    return Section("Broker churn", broker_churn.QUESTION, findings_list(broker_churn.findings(summary)),
                   f"![broker churn: rounds and recovery per design and victim]({figure.relative_to(root).as_posix()})",
                   short, takeaway, reproduce_line('broker_churn', env), appendix,
                   "experiments/catalogue/broker_churn.py: findings")


def _ordered(trials: pd.DataFrame) -> pd.DataFrame:
    if trials.empty:
        return trials.assign(order=[])
    return trials.assign(order=trials.design.map(list(STYLE).index)).sort_values(["order", "victim", "watch",
                                                                                   "trial"])


def _figure(trials: pd.DataFrame, path: Path) -> Path:
    """One bar per (design, case) in each panel: the mean over its trials, a dot per trial."""
    fig, axes = plt.subplots(1, len(FIGURE), figsize=(18, 4), constrained_layout=True)
    cases = list(dict.fromkeys(zip(trials.design, trials.victim, trials.watch, strict=True)))
    names = [f"{d} {v}" + (f" {w}" if w else "") for d, v, w in cases]
    for ax, (metric, title) in zip(axes.flat, FIGURE, strict=True):
        for i, (design, victim, watch) in enumerate(cases):
            values = trials[(trials.design == design) & (trials.victim == victim)
                            & (trials.watch == watch)][metric].astype(float)
            ax.bar(i, values.mean(), color=STYLE[design][0], hatch="//" if victim == "coordinator" else None)
            ax.plot([i] * len(values), values, "k.", markersize=4)
        ax.set_xticks(range(len(cases)), names, fontsize=7, rotation=35, ha="right")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path
