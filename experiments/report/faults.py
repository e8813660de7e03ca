"""REPORT.md's sections for the two fault experiments: split brain and zombie (see `render.py`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import split_brain, zombie  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.report import plotting  # noqa: E402
from experiments.report.figures import figure as timeline_figure  # noqa: E402
from experiments.report.parts import STYLE, Section, findings_list, reproduce_line, table  # noqa: E402

SPLIT_TABLE = [("design", "design"), ("follower_delay_ms", "follower delay ms"),
               ("broker_delay_ms", "broker delay ms"), ("consumers", "N"),
               ("view_divergence", "views in a round"), ("stale_views", "stale views"),
               ("owner_conflicts", "owner conflicts"), ("rebalance_attempts", "attempts"),
               ("rebalance_failures", "failures"), ("converged", "converged"), ("convergence_ms", "convergence ms"),
               ("double_owned_partition_s", "double-owned partition-s"),
               ("double_processed_partition_s", "double-processed partition-s"),
               ("unowned_partition_s", "unowned partition-s")]
SPLIT_FIGURE = [("view_divergence", "most views in one round"), ("stale_views", "stale views"),
                ("owner_conflicts", "owner conflicts"), ("rebalance_failures", "failed rebalances")]
MISCONFIGURED_TABLE = [("variant", "newcomer"), ("consumers", "N"), ("rebalance_failures", "refused starts"),
                       ("view_divergence", "views in effect"), ("double_owned_partition_s", "double-owned partition-s"),
                       ("unowned_partition_s", "unowned partition-s")]
ZOMBIE_TABLE = [("variant", "fault"), ("design", "design"), ("change", "change"),
                ("convergence_ms", "convergence ms"), ("double_owned_partition_s", "double-owned partition-s"),
                ("double_processed_partition_s", "double-processed partition-s"),
                ("processed_after_loss", "records processed after loss"),
                ("zombie_commits_accepted", "zombie commits accepted"), ("unowned_partition_s", "unowned partition-s")]
ZOMBIE_TRIAL_TABLE = [("variant", "fault"), ("design", "design"), ("duplicates", "duplicates"), ("gaps", "gaps"),
                      ("zombie_commits_accepted", "zombie commits accepted"), ("commits_fenced", "commits fenced"),
                      ("offsets_moved_backwards", "offsets moved backwards")]


def split_brain_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root, timelines = run.env, run.figures, run.root, run.timelines
    overrides = run.overrides(split_brain.NAME)
    ok = summary[(summary.status == "ok") & (summary.change == "churn")]
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))}, each consumer "
                       "in its own process; consumer k holds its ZooKeeper session on server k mod "
                       f"{run.spec(split_brain.NAME, 'zk_servers')}"),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("ZooKeeper", f"{run.spec(split_brain.NAME, 'zk_servers')} servers per trial; one follower's quorum "
                           "link to the leader delayed, each way, by "
                           + ", ".join(f"{d} ms" for d in sorted(summary.follower_delay_ms.unique()))),
             ("RocketMQ", "instead of a follower, every consumer's link to the last broker delayed, each way, by "
                          + ", ".join(f"{d} ms" for d in sorted(summary.get("broker_delay_ms", pd.Series(
                              [], dtype=float)).unique()))),
             ("TubeMQ", "no lag (it has no membership view): a group of N, then `j1` starts misconfigured, "
                        "with a `nodeId` another node holds or another `sourceCount` ("
                        + ", ".join(f"`{v}`" for v in split_brain.MISCONFIGURED) + ")"),
             ("scenario", "stable group; then `j1` joins, `j2` joins, `j1` leaves, "
                          f"{run.spec(split_brain.NAME, 'churn_gap_s')} s apart (one change: "
                          "`churn`); the lag starts after the group first converged"),
             ("brokers", f"{run.spec(split_brain.NAME, 'brokers')} per trial, each hosting a group coordinator, "
                         "sessions spread over the ensemble"),
             ("configs", "each family's defaults (see the herd section) with `auto.offset.reset` from the start; "
                         "overrides: " + "; ".join(f"{design} {found}" for design, found in overrides))]
    rows = ok.sort_values(["design", "follower_delay_ms", "broker_delay_ms"])[[c for c, _ in SPLIT_TABLE]]
    misconfigured = summary[(summary.status == "ok") & (summary.variant.isin(list(split_brain.MISCONFIGURED)))]
    tube_rows = misconfigured.sort_values("variant")[[c for c, _ in MISCONFIGURED_TABLE]]
    tube_table = ("**TubeMQ, a misconfigured newcomer** (its `join`):\n\n"
                  + table([label for _, label in MISCONFIGURED_TABLE], tube_rows.itertuples(index=False))
                  if not tube_rows.empty else "")
    figure, zero_panels = _split_figure(ok, figures / "split_brain.png")
    panels = []
    for design in STYLE:
        largest = split_brain.at_largest_lag(ok, design)
        if not largest.empty:
            trial = largest.trial.iloc[0]
            panels.append((trial, f"{STYLE[design][1]}, {_lag(largest, design)}: {trial}"))
    timeline = _timeline(timelines, panels, figures / "timeline-split_brain.png", root)
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

**Results** (the `churn` change of each trial; "views in a round" is, in the
ZooKeeper era, the most distinct memberships the consumers' assignments in
effect at one instant were computed from, and in the coordinator era the
member lists a generation's assignment was computed from; a stale view is a
read older than one another consumer had already made; `metrics.py:
views_in_effect`, `stale_views`):

{table([label for _, label in SPLIT_TABLE], rows.itertuples(index=False))}

{tube_table}

{timeline}

**The other families in detail.** RocketMQ moved the membership from ZooKeeper into the brokers, and kept
the split: every broker keeps its own table from the heartbeats that reach it
(`rocketmq_client/broker/consumer_manager.py`), and a consumer allocates from
the id list of one broker picked at random
(`rocketmq_client/instance.py: find_consumer_id_list`). With one broker
behind, a consumer woken by a prompt broker's push may read the late one's
list, which still has the member that left or lacks the one that joined, and
take the queues that list gives it while the others work from the new list
(`rocketmq_client/rebalance.py`): two id lists in effect in one round, queues
with two owners or none, until the late broker's own push makes everyone
rebalance again. Nothing detects the disagreement; it ends because the next
push or the 20 s timer comes.

TubeMQ's client balance has no membership to disagree about: a node's share
is its `nodeId` modulo `sourceCount` and nothing else. What can split the
group is configuration, and there the master stands guard
(`tubemq_client/master/groups.py`, after TubeMQ's `ConsumeGroupInfo`): a
node whose `nodeId` another node holds is refused (CLIENT_DUPLICATE_INDEXID),
and so is one with another `sourceCount` (CLIENT_INCONSISTENT_SOURCECOUNT),
so it never computes a share and never registers a partition (the broker
would refuse a second holder anyway: PARTITION_OCCUPIED,
`tubemq_client/broker/registrations.py`). The price of that safety is the
herd section's: the group cannot change its size without every node
restarting."""
    return Section("Split brain", split_brain.QUESTION, findings_list(split_brain.findings(summary)),
                   f"![split brain: views, conflicts and failures against the follower's delay]"
                   f"({figure.relative_to(root).as_posix()})\n\n{zero_panels}",
                   _split_short(ok), SPLIT_TAKEAWAY, reproduce_line("split_brain", env), appendix,
                   "experiments/catalogue/split_brain.py: findings", SPLIT_WHY)


#: the body's short table: each design's churn at its largest lag
SPLIT_SHORT = [("view_divergence", "views in a round"), ("owner_conflicts", "owner conflicts"),
               ("rebalance_failures", "failed rebalances"), ("convergence_ms", "convergence ms"),
               ("double_processed_partition_s", "double-processed partition-s")]


def _lag(largest: pd.DataFrame, design: str) -> str:
    """`follower delay 1000 ms`: what lagged in the design's trials at its largest lag, and by how much."""
    lag = split_brain.LAG_PARAM[design]
    return f"{lag.split('_')[0]} delay {int(largest[lag].iloc[0])} ms"


def _split_short(ok: pd.DataFrame) -> str:
    rows = []
    for design in STYLE:
        largest = split_brain.at_largest_lag(ok, design)
        if not largest.empty:
            lag = split_brain.LAG_PARAM[design]
            rows.append((STYLE[design][1], f"{int(largest[lag].iloc[0])} ms ({lag.split('_')[0]})",
                         *(largest[c].mean() for c, _ in SPLIT_SHORT)))
    return ("The churn at each design's largest lag (every lag, and TubeMQ's misconfigured newcomers: the "
            "appendix):\n\n" + table(["design", "lag", *(label for _, label in SPLIT_SHORT)], rows)) if rows else ""


def _split_figure(ok: pd.DataFrame, path: Path) -> tuple[Path, str]:
    """The churn's views, stale views, conflicts and failures against the lag, a line per design; a panel all
    zeros is left out and said (the path and that sentence)."""
    panels, zero = plotting.drawn_and_zero(SPLIT_FIGURE, lambda m: ok[m] if m in ok else [])
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(3.6 * max(len(panels), 1) + 3, 3.4),
                             layout="constrained", squeeze=False)
    for ax, (metric, title) in zip(axes.flat, panels, strict=False):
        drawn = [d for d in STYLE if not split_brain.per_delay(ok, d, metric, "mean").empty]
        for k, design in enumerate(drawn):
            s = split_brain.per_delay(ok, design, metric, "mean")
            # the earlier drawn, the larger its markers: designs with equal values show one inside another
            ax.plot(s.index, s.values, "-", markersize=5 + 2.5 * (len(drawn) - 1 - k), markerfacecolor="none",
                    markeredgewidth=1.5, **plotting.look(design))
        ax.set_title(title)
        ax.set_xlabel("delay (ms, each way): a follower's, or\nRocketMQ's broker's")
        plotting.integer_ticks(ax, ok[metric] if metric in ok else [])
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    plotting.legend_outside(fig, axes.flat)
    plotting.save(fig, path)
    return path, zero


def zombie_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    env, figures, root, timelines = run.env, run.figures, run.root, run.timelines
    overrides = run.overrides(zombie.NAME)
    ok = summary[summary.status == "ok"].sort_values(["variant", "design", "change_index"])
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))}: the victim "
                       "`c1` and the others, each in its own process"),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("faults", "`pause`: SIGSTOP `c1` until the group converged without it and "
                        f"{run.spec(zombie.NAME, 'hold_s')} s more, then SIGCONT; `cut`: blackhole `c1`'s link to "
                        "ZooKeeper (`zookeeper`) or to its coordinator (`classic`), its broker links untouched, or its "
                        "links to every broker (RocketMQ and TubeMQ, whose membership and messages share one "
                        "channel per broker), as long, then heal; a TubeMQ group cannot converge without `c1`, so "
                        f"the fault is held {zombie.CONVERGE_LIMIT_S['tubemq']:.0f} s (past its broker's 30 s "
                        "release) and the hold"),
             ("ZooKeeper", f"{run.spec(zombie.NAME, 'zk_servers')} server per trial"),
             ("brokers", f"{run.spec(zombie.NAME, 'brokers')} per trial, each hosting a group coordinator and "
                         "RocketMQ's consumer table")]
    per_change = ok[[c for c, _ in ZOMBIE_TABLE]]
    per_trial = zombie.per_trial(ok)[[c for c, _ in ZOMBIE_TRIAL_TABLE]]  # a trial's changes summed
    figure, zero_panels = _zombie_figure(ok, figures / "zombie.png")
    parts = []
    for variant in zombie.VARIANTS:
        panels = []
        for design in STYLE:
            trial = ok[(ok.design == design) & (ok.variant == variant)].trial
            if len(trial):
                panels.append((trial.iloc[0], f"{STYLE[design][1]}, {variant}: {trial.iloc[0]}"))
        parts.append(_timeline(timelines, panels, figures / f"timeline-zombie-{variant}.png", root))
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

Config overrides, beyond `auto.offset.reset` (`lab.processing.ms` is the lab's
stand-in for the application's work on each record, so that a zombie that wakes
up behind catches up at a realistic pace; it is not a Kafka setting):

{table(["design", "overrides"], overrides)}

**Results per change** (the fault's window runs from the fault to the heal;
double-owned counts what each consumer *believed* it owned, double-processed
what two consumers actually processed at once, and records processed after
loss what a consumer processed of a partition another had taken from it, at
whatever moment):

{table([label for _, label in ZOMBIE_TABLE], per_change.itertuples(index=False))}

{chr(10).join(parts)}

**The other families in detail.** RocketMQ fences nothing. Its broker forgets a silent consumer only when the
scan finds no heartbeat from it for 120 s, and that road of change tells
nobody (`rocketmq_client/broker/consumer_manager.py: scan_not_active_channel`),
so the survivors take the zombie's queues at their next periodic rebalance
(`rocketmq.client.rebalance.waitInterval`, 20 s): convergence takes minutes,
not seconds, and the queues the zombie held are not consumed meanwhile. Awake
again, the zombie still holds those queues until its own next rebalance, which
comes as soon as its heartbeat registers it again and the brokers push
NOTIFY_CONSUMER_IDS_CHANGED; meanwhile it processes them, and the offsets it
persists, on its timer or as it lets a queue go
(`rocketmq_client/rebalance.py: remove_unnecessary`), go to a broker that
accepts an offset from anyone (`rocketmq_client/broker/offsets.py`). Cut off,
its requests time out and close their channels (RocketMQ's
`closeSocketIfTimeout`); healed, it connects again and does the same.
RocketMQ's own answer is the orderly consumer's broker-side lock
(`messageListener=orderly`, `rocketmq_client/broker/locks.py`), which stops a
second consumer from *taking* a locked queue for 60 s; it still does not fence
an offset.

TubeMQ's broker fences, and nobody takes the zombie's place. Its broker keeps
one registration per group and partition and serves and commits for the
holder only (`tubemq_client/broker/registrations.py`); the other nodes take
only their own hash share, so the zombie's partitions wait for it (it still
believes it holds them, and nobody else claims them: "double-owned" 0).
After 30 s without a heartbeat or a fetch the broker releases its
registrations and rolls back the batch it had handed out; the zombie, awake
or healed, is refused what it then sends (a confirm is UNAUTHORIZED:
"commits fenced"; a fetch HB_NO_NODE), drops the partition, and registers it
again at its next balance round, from the offset the broker kept. No
partition is processed by two consumers at once and no commit of a
non-holder is accepted; the rolled-back batch is processed again
("duplicates"), and the share idles for as long as its node is away."""
    short = ("Per trial, the zombie's changes summed (every change window: the appendix):\n\n"
             + table([label for _, label in ZOMBIE_TRIAL_TABLE], per_trial.itertuples(index=False)))
    return Section("Zombie", zombie.QUESTION, findings_list(zombie.findings(summary)),
                   f"![zombie: double processing, duplicates, accepted and fenced commits]"
                   f"({figure.relative_to(root).as_posix()})\n\n{zero_panels}",
                   short, ZOMBIE_TAKEAWAY, reproduce_line("zombie", env), appendix,
                   "experiments/catalogue/zombie.py: findings", ZOMBIE_WHY)


def _zombie_figure(ok: pd.DataFrame, path: Path) -> tuple[Path, str]:
    """Per fault, a bar per design in each panel; a panel all zeros is left out and said."""
    trials = zombie.per_trial(ok)
    metrics = [("double_processed_partition_s", "double-processed partition-s"),
               ("processed_after_loss", "records processed after loss"), ("duplicates", "duplicates"),
               ("zombie_commits_accepted", "zombie commits accepted"),
               ("offsets_moved_backwards", "offsets moved backwards"), ("commits_fenced", "commits fenced")]
    metrics, zero = plotting.drawn_and_zero(metrics, lambda m: trials[m] if m in trials else [])
    cols = min(max(len(metrics), 1), 3)
    rows = -(-max(len(metrics), 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols + 3, 3.2 * rows), layout="constrained", squeeze=False)
    variants = list(zombie.VARIANTS)
    designs = [d for d in STYLE if (trials.design == d).any()]  # the run's designs, side by side per variant
    width = 0.8 / max(len(designs), 1)
    for ax, (metric, title) in zip(axes.flat, metrics, strict=False):
        for k, design in enumerate(designs):
            color, label = STYLE[design]
            values = [trials[(trials.design == design) & (trials.variant == v)][metric].mean() for v in variants]
            ax.bar([i + (k - (len(designs) - 1) / 2) * width for i in range(len(variants))], values, width,
                   color=color, label=label)
        ax.set_xticks(range(len(variants)), variants)
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        plotting.integer_ticks(ax, trials[metric])
    for ax in axes.flat[len(metrics):]:
        ax.set_visible(False)
    plotting.legend_outside(fig, axes.flat)
    plotting.save(fig, path)
    return path, zero


def _timeline(timelines, panels: list[tuple[str, str]], path: Path, root: Path) -> str:
    if timelines is None or not panels:
        return ""
    stretches, marks = timelines
    timeline_figure(panels, stretches, marks, path)
    return (f"![timeline: which consumer processed each partition, with the fault and the rebalances]"
            f"({path.relative_to(root).as_posix()})\n\n*Each bar is a stretch of processing by one consumer "
            "(one lane per consumer inside a partition's row: two bars at one time are two consumers processing "
            "one partition); red lines are the faults, grey dashed lines the scenario's changes, green dotted "
            "lines the moments the runner saw the group converged; ticks at the bottom are consumers' new "
            "assignments, red crosses expired sessions and fenced commits.*")


# What to take from each section (its body), and why, step by step (its appendix's first paragraph)

SPLIT_TAKEAWAY = """Nobody coordinates a ZooKeeper-era rebalance: each
consumer reacts to its own watch, reads the membership from its own server and
computes its share alone, so in a burst of changes the assignments in effect
come from different memberships, and claims collide. A lagging follower makes
it worse: its consumers learn late and release late, the others' claims are
refused, back off and retry, and convergence stretches with the lag. In the
coordinator era the coordinator holds the membership and only the leader
computes, from one member list per generation: one view at any lag."""

SPLIT_WHY = """Nobody coordinates a ZooKeeper-era rebalance:
each consumer reacts to its own watch, reads the membership from its own
server (`legacy_zk/view.py: read_view`) and computes the range split
alone (`legacy_zk/partition_assignor.py`), so during a burst of changes the assignments in
effect at one moment come from different memberships (views in a round above
1 at every delay): each consumer claims the partitions *its* view gives it,
while the previous owners, working from another view, still hold them. A
lagging follower makes that worse. A follower's copy of the tree is as old as
its quorum link is slow, its watches fire when *it* applies a change, and every
write a consumer sends through it is answered only after the commit has come
back over the slow link. The consumers on the lagging follower learn of each
change late, and then commit offsets and delete their owner znodes
(`legacy_zk/ownership.py: release_all`) one slow write at a time, and a
consumer that meets a conflict has first claimed every other partition of its
share, and undoes them one slow write at a time too (0.8's
`reflectPartitionOwnershipDecision`), so the others' claims are refused
(`owner_conflicts`, one per refused partition), back off
`rebalance.backoff.ms` and retry, and may give up after
`rebalance.max.retries` (`rebalance_failures`: 0.8's
`ConsumerRebalanceFailedException`, which leaves the share unconsumed);
convergence stretches with the lag. Stale reads (a view older than one
another consumer had already read) are possible too, but in this scenario the
lagging consumers' own writes come first, and by the time they read, their
server has caught up: `stale_views` counts them, and the table shows how often
it happened. Kafka 0.8 sized its back-off to the follower lag:
`rebalance.backoff.ms` defaults to `zookeeper.sync.time.ms` ("how far a ZK
follower can be behind a ZK leader"), its only use in 0.8.2.2's consumer, and
users were told to raise retries and back-off to outlast the lag. In the coordinator era nothing of this
depends on ZooKeeper: the coordinator holds the membership in memory, and only
the leader computes, from the list it was given for that generation
(`modern_coord/consumer.py: _assign_as_leader`), so each generation has exactly
one view at any lag, and the churn costs the same."""

ZOMBIE_TAKEAWAY = """A ZooKeeper-era consumer learns that the group gave
up on it only when it hears from ZooKeeper again: until then it processes
partitions another now owns, and its offsets go to ZooKeeper as plain writes
that nothing refuses, so a committed offset can move backwards. In the
coordinator era every commit carries the member id and generation, and the
coordinator refuses a stale one: commits are fenced and offsets only move
forward. Fencing stops commits, not processing: cut off from its coordinator, a
zombie processes until it hears it was fenced, and duplicates remain in both
eras."""

ZOMBIE_WHY = """A ZooKeeper-era consumer learns that the group gave
up on it only when it hears from ZooKeeper again; until then nothing stops its
fetchers (`legacy_zk/consumer.py`, session handling: a lost connection changes
nothing), so it processes partitions the group has given to someone else, and
its offsets go to ZooKeeper as plain writes that nothing refuses
(`legacy_zk/offsets.py: commit_offset`). When it hears again, its session has
expired: 0.8's `handleNewSession` empties its registry, so its rejoin commits
and releases nothing. What it does write depends on how it was gone. *Cut
off* while running, it keeps processing for the whole cut, and the auto-commit
it was making when the link went down waits in zkclient's `retryUntilConnected`
and then writes the positions it took before the outage, on its new session,
after the new owner's commits: the committed offset moves backwards (the next
owner after a rebalance re-processes what was already done). *Paused*, it
wakes, processes for the fraction of a second its first contact with ZooKeeper
takes, and its fixed-rate auto-commit runs the ticks it missed at once, with
the positions it had at the pause (`legacy_zk/consumer.py: _auto_commit_loop`):
a zombie commit only if it had processed anything since its last commit
before the pause, and then one behind what the new owner committed meanwhile,
so the committed offset moves backwards here too; a pause that falls just
after a tick leaves nothing to commit. The
finding claims what the faithful model guarantees: the zombie processes
what another owns, and nothing refuses its commits. In the
coordinator era every OffsetCommit carries the member id and generation, and
the coordinator refuses a stale one with ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID (`modern_coord/coordinator/`), so the zombie's commits are
fenced and the committed offsets only move forward; the zombie then rejoins as
a new member. Fencing buys refused commits, not stopped processing: Kafka's consumers never wait on their
coordinator to fetch (the auto-commit does not wait for its answer, `modern_coord/auto_commit.py`), so one cut
off from it goes on processing what another now owns until it hears it was fenced, as the ZooKeeper-era
zombie does. Duplicates remain in both eras; Kafka's answer is idempotent processing
and transactions."""
