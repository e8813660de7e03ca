"""The storm section of the report: a rolling restart of the whole group, what each design pays (see `render.py`).

Rendered from the run's stored results only (`experiment.StoredRun`): its
summary rows, grid and timelines. The timelines show one restart per design
(the second, `c2`'s: the group has been through one already), cut from the
trial's whole timeline.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import storm  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.report import plotting  # noqa: E402
from experiments.report.figures import draw  # noqa: E402
from experiments.report.parts import STYLE, Section, findings_list, reproduce_line, table  # noqa: E402

TRIAL_TABLE = [("design", "design"), ("consumers", "N"), ("restarts", "restarts"),
               ("generations", "rebalance rounds"), ("members_revoking", "members revoking (sum)"),
               ("most_revoking", "most in one restart"), ("partitions_revoked", "partitions they revoked"),
               ("unowned_partition_s", "unowned partition-s"),
               ("double_processed_partition_s", "double-processed partition-s"), ("duplicates", "duplicates"),
               ("stable_after_last_ms", "stable after last restart ms"), ("all_converged", "all converged")]
RESTART_TABLE = [("design", "design"), ("restarted", "restarted"), ("generations", "rounds"),
                 ("members_revoking", "members revoking"), ("partitions_revoked", "partitions they revoked"),
                 ("rebalance_attempts", "rebalances begun"),
                 ("unowned_partition_s", "unowned partition-s"),
                 ("double_processed_partition_s", "double-processed partition-s"), ("converged", "converged"),
                 ("convergence_ms", "convergence ms")]
FIGURE = [("generations", "rebalance rounds"), ("members_revoking", "other members revoking"),
          ("partitions_revoked", "partitions they revoked"), ("unowned_partition_s", "unowned partition-s"),
          ("double_processed_partition_s", "double-processed partition-s")]
#: the restart whose timeline is drawn per design
SHOWN_RESTART = 2


def storm_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root = run.env, run.figures, run.root
    ok = summary[summary.status == "ok"]
    setup = [("designs", ", ".join(d for d in STYLE if (summary.design == d).any())),
             ("group", f"N = {run.spec(storm.NAME, 'consumers')} consumers `c1..cN`, each in its own process"),
             ("partitions P", run.spec(storm.NAME, "partitions")),
             ("producer", f"{run.spec(storm.NAME, 'rate')} records/s per partition"),
             ("scenario", "the stable group, then N restarts: the k-th stops `c<k>` gracefully (its family's "
                          f"close), waits {run.spec(storm.NAME, 'restart_down_s')} s and starts it again under the "
                          "same name and config; the next restart comes when the group has converged, "
                          f"{run.spec(storm.NAME, 'settle_s')} s to settle and {run.spec(storm.NAME, 'restart_gap_s')}"
                          " s more (a deploy that waits for each instance to be ready)"),
             ("TubeMQ client balance", "nobody else acts, so the runner cannot hear the group converge: it watches "
                                       "each restart for a fixed time and the analysis judges from the traces"),
             ("configs", "each family's defaults (Kafka 3's `session.timeout.ms` 45 s and "
                         "`heartbeat.interval.ms` 3 s in the coordinator era), from the start of the log; "
                         "the variants add `group.instance.id` = the member's name and/or "
                         "`partition.assignment.strategy=cooperative-sticky` (`modern_coord/variants.py`)")]
    trials = storm.per_trial(ok)
    trials = trials.assign(order=trials.design.map(list(STYLE).index)).sort_values(["order", "trial"])
    restarts = storm.per_restart(ok)
    restarts = restarts.assign(order=restarts.design.map(list(STYLE).index)).sort_values(["order", "change_index"])
    figure, zero_panels = _figure(restarts, figures / "storm.png")
    timeline = _timelines(run, ok, figures / "timeline-storm.png", root)
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

**Results per restart:**

{table([label for _, label in RESTART_TABLE], restarts[[c for c, _ in RESTART_TABLE]].itertuples(index=False))}





{timeline}

**In detail.** Static membership (KIP-345) removes the restart from the group's view: a
static member's close sends no LeaveGroup, and when it comes back under the
same `group.instance.id` within `session.timeout.ms`, the coordinator gives the
new member id the old one's place and answers with the current generation and
its old partitions (`modern_coord/coordinator/coordinator.py`, after Kafka's
`GroupCoordinator.updateStaticMemberAndRebalance`). The live members hear
nothing: no round, no revocation, the assertion of Kafka's
`test_static_consumer_bounce`. What it costs is the restarted member's own
partitions, idle for as long as it is down, and a failure must wait out the
session timeout before anyone takes them: in this lab, where an eager
rebalance is over within a heartbeat of the leave, that idle share is more
partition-seconds than the eager protocol's. Cooperative rebalancing (KIP-429)
keeps the rebalances and removes the stop: each member keeps what it owns
through the JoinGroup, the leader's `cooperative-sticky` assignment withholds
every partition that changes owner, and only those are revoked
(`partitions they revoked`), after which the revoking members rejoin for one
more round that hands them out (`lab_cluster/assignment/cooperative_sticky.py`,
`modern_coord/group_member.py: _handle_sync_response`). That round waits until every
member has rejoined, and a member that revoked nothing (the returning one)
hears of it only at its next heartbeat: the moving partitions wait up to
`heartbeat.interval.ms`, so cooperative pays in rounds and, here, in unowned
partition-seconds, where the eager stop is short. The eager stop is short
in the lab because every member learns of a rebalance at the same heartbeat
(their heartbeat timers restart at the same SyncGroup) and its revocation
callback does nothing; an application whose `onPartitionsRevoked` flushes
state makes every eager member wait for it, and that is the cost cooperative
removes. Java does not commit a revoked partition's position in the
cooperative protocol (the application may, in its callback), so the new owner
processes again what the old one had not committed (`duplicates`). Static and
cooperative together behave as static in a restart.

RocketMQ has no stop-the-world: every member re-splits the queues alone when
a broker pushes the change (`rocketmq_client/rebalance.py`) and drops only the
queues that move, so a restart costs some members some queues, twice, without
any coordination and with the fewest unowned partition-seconds; the price is
the offsets, which reach the broker with each pull (and every 5 s,
`persistConsumerOffsetInterval`), one pull behind what was processed: a
queue's next owner starts again from there (`duplicates`). TubeMQ's client
balance has no membership at all: the restarted node's share waits for it and
nobody else does anything (`tubemq_client/consumer.py`); its server balance
waits for the master's next tick, which moves the restarted consumer's
partitions away and back, one heartbeat per step
(`tubemq_client/master/balancer.py`)."""
    short = f"""**Results per design** (the N restarts' windows summed; "rebalance rounds" are
the coordinator era's new generations, the ZooKeeper era's and RocketMQ's new
membership views, TubeMQ's master's rebalance ids, `metrics.py:
rebalance_rounds`; "members revoking" counts, per restart, the members other
than the restarted one that revoked any partition; "stable after last restart"
is the last window's convergence, from the stop, its down time included;
duplicates are the trial's):

{table([label for _, label in TRIAL_TABLE], trials[[c for c, _ in TRIAL_TABLE]].itertuples(index=False))}"""
    takeaway = """A deploy restarts every instance, so whatever one
restart costs, the group pays N times. In the ZooKeeper era a restart is two
membership changes, and each is a group-wide stop: the stopping consumer's
session closes, its registration goes, every member's watch on the ids node
fires and every member releases all it owns before it reads the new
membership and claims its share again (`legacy_zk/consumer.py: _rebalance`,
0.8's `releasePartitionOwnership`); the start does it once more. The
coordinator era's eager protocol stops everyone too: the stopping member's
LeaveGroup and the new one's JoinGroup each make the coordinator begin a
rebalance, and every member revokes all it owns before it rejoins
(`modern_coord/group_member.py: _rebalance`, Java's `onJoinPrepare`); one
rebalance or two per restart, depending on whether the JoinGroup arrives
before the members have rejoined the first."""
    return Section("Storm", storm.QUESTION, findings_list(storm.findings(summary)),
                   f"![storm: what one restart costs, per design]({figure.relative_to(root).as_posix()})"
                   f"\n\n{zero_panels}",
                   short, takeaway, reproduce_line('storm', env), appendix,
                   "experiments/catalogue/storm.py: findings")


def _figure(restarts: pd.DataFrame, path: Path) -> tuple[Path, str]:
    """Per design, the mean cost of one restart: one bar per design in each panel."""
    panels, zero = plotting.drawn_and_zero(FIGURE, lambda m: restarts[m])
    cols = 2 if len(panels) > 2 else max(len(panels), 1)
    rows = -(-max(len(panels), 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols + 3, 3.6 * rows), layout="constrained", squeeze=False)
    designs = [d for d in STYLE if (restarts.design == d).any()]
    for ax, (metric, title) in zip(axes.flat, panels, strict=False):
        for i, design in enumerate(designs):
            values = restarts[restarts.design == design][metric].astype(float)
            ax.bar(i, values.mean(), color=STYLE[design][0], label=STYLE[design][1])
            ax.plot([i] * len(values), values, ".", color="0.55", markeredgecolor="white", markersize=6)  # a restart
        ax.set_xticks(range(len(designs)), designs, fontsize=7, rotation=45, ha="right")
        plotting.integer_ticks(ax, restarts[metric])
        ax.set_title(f"{title} per restart", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    plotting.legend_outside(fig, axes.flat)
    plotting.save(fig, path)
    return path, zero


def _timelines(run: StoredRun, ok: pd.DataFrame, path: Path, root: Path) -> str:
    """One panel per design: its first trial's restart number `SHOWN_RESTART`, from that change to the next."""
    if run.timelines is None or ok.empty:
        return ""
    stretches, marks = run.timelines
    designs = [d for d in STYLE if (ok.design == d).any()]
    fig, axes = plt.subplots(len(designs), 1, figsize=(12, 3.2 * len(designs)), constrained_layout=True,
                             squeeze=False)
    for ax, design in zip(axes.flat, designs, strict=True):
        trial = ok[ok.design == design].trial.iloc[0]
        m, s = marks[marks.trial == trial], stretches[stretches.trial == trial]
        changes = m[m.kind == "change"].sort_values("t_s").t_s.tolist()
        if len(changes) < SHOWN_RESTART:
            continue
        start = changes[SHOWN_RESTART - 1] - 1.0
        stop = changes[SHOWN_RESTART] if len(changes) > SHOWN_RESTART else m.t_s.max()
        s = s[(s.stop_s >= start) & (s.start_s <= stop)]
        s = s.assign(start_s=s.start_s.clip(lower=start), stop_s=s.stop_s.clip(upper=stop))
        draw(ax, s, m[(m.t_s >= start) & (m.t_s <= stop)],
             f"{STYLE[design][1]}: restart of c{SHOWN_RESTART} ({trial})")
        ax.set_xlim(start, stop)
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return (f"![timeline: one restart per design]({path.relative_to(root).as_posix()})\n\n*One restart per "
            f"design (`c{SHOWN_RESTART}`'s), from its change to the next: each bar is a stretch of processing by "
            "one consumer (one lane per consumer inside a partition's row); grey dashed lines are the scenario's "
            "change and the restarted member's stop and start, green dotted lines the moments the runner saw the "
            "group converged; ticks at the bottom are consumers' new assignments.*")
