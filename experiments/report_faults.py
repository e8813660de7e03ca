"""REPORT.md's sections for the two fault experiments: split brain and zombie (see `report.py`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import split_brain, timeline_figure, zombie  # noqa: E402

STYLE = {"legacy": ("tab:red", "ZooKeeper era (legacy_zk)"), "modern": ("tab:blue", "coordinator era (modern_coord)")}
SPLIT_TABLE = [("design", "design"), ("follower_delay_ms", "follower delay ms"), ("consumers", "N"),
               ("view_divergence", "views in a round"), ("stale_views", "stale views"),
               ("owner_conflicts", "owner conflicts"), ("rebalance_attempts", "attempts"),
               ("rebalance_failures", "failures"), ("converged", "converged"), ("convergence_ms", "convergence ms"),
               ("double_owned_partition_s", "double-owned partition-s"),
               ("double_processed_partition_s", "double-processed partition-s"),
               ("unowned_partition_s", "unowned partition-s")]
SPLIT_FIGURE = [("view_divergence", "most views in one round"), ("stale_views", "stale views"),
                ("owner_conflicts", "owner conflicts"), ("rebalance_failures", "failed rebalances")]
ZOMBIE_TABLE = [("variant", "fault"), ("design", "design"), ("change", "change"),
                ("convergence_ms", "convergence ms"), ("double_owned_partition_s", "double-owned partition-s"),
                ("double_processed_partition_s", "double-processed partition-s"),
                ("zombie_commits_accepted", "zombie commits accepted"), ("unowned_partition_s", "unowned partition-s")]
ZOMBIE_TRIAL_TABLE = [("variant", "fault"), ("design", "design"), ("duplicates", "duplicates"), ("gaps", "gaps"),
                      ("zombie_commits_accepted", "zombie commits accepted"), ("commits_fenced", "commits fenced"),
                      ("offsets_moved_backwards", "offsets moved backwards")]


def _findings(checked) -> str:
    return "\n".join(f"- {'✅' if f.holds else '❌'} {f.claim}. *{f.evidence}.*" for f in checked)


def _overrides(summary: pd.DataFrame, grid_of) -> list[tuple[str, str]]:
    specs = {s.design: s for s in grid_of("quick")}
    return [(design, ", ".join(f"`{o}`" for o in spec.overrides) or "none") for design, spec in sorted(specs.items())]


def split_brain_section(summary: pd.DataFrame, env: dict, figures: Path, root: Path, table, timelines) -> str:
    ok = summary[(summary.status == "ok") & (summary.change == "churn")]
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))}, each consumer "
                       "in its own process; consumer k holds its ZooKeeper session on server k mod 3"),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("ZooKeeper", "3 servers per trial; one follower's quorum link to the leader delayed, each way, by "
                           + ", ".join(f"{d} ms" for d in sorted(summary.follower_delay_ms.unique()))),
             ("scenario", "stable group; then `j1` joins, `j2` joins, `j1` leaves, 0.5 s apart (one change: "
                          "`churn`); the lag starts after the group first converged"),
             ("brokers", "3 per trial, each hosting a group coordinator, sessions spread over the ensemble"),
             ("configs", "each family's defaults (see the herd section) with `auto.offset.reset` from the start")]
    rows = ok.sort_values(["design", "follower_delay_ms"])[[c for c, _ in SPLIT_TABLE]]
    figure = _split_figure(ok, figures / "split_brain.png")
    panels = []
    largest = ok.follower_delay_ms.max() if not ok.empty else None
    for design in ("legacy", "modern"):
        trial = ok[(ok.design == design) & (ok.follower_delay_ms == largest)].trial
        if len(trial):
            panels.append((trial.iloc[0], f"{STYLE[design][1]}, follower delay {int(largest)} ms: {trial.iloc[0]}"))
    timeline = _timeline(timelines, panels, figures / "timeline-split_brain.png", root)
    return f"""## Split brain: {split_brain.QUESTION}

**Set-up.**

{table(["", ""], setup)}

**Results** (the `churn` change of each trial; a round is, in the ZooKeeper
era, the newest membership any consumer had read so far, and in the
coordinator era a generation; `metrics.py: view_rounds`):

{table([label for _, label in SPLIT_TABLE], rows.itertuples(index=False))}

![split brain: views, conflicts and failures against the follower's delay]({figure.relative_to(root).as_posix()})

{timeline}

**The finding, checked on these results** (`experiments/split_brain.py: findings`):

{_findings(split_brain.findings(summary))}

**What to take from it.** ZooKeeper is linearizable for writes, not for reads:
a follower answers reads from its own copy of the tree, which is as old as its
quorum link is slow, and it fires a watch when *it* applies the change. A
ZooKeeper-era consumer computes its share from what its own server shows
it (`legacy_zk/rebalance.py: read_view`, then `compute_share`), so consumers on
the lagging follower compute the range split of an older membership than the
others in the same round (`stale_views`, `view_divergence` above 1). They then
try to claim partitions that another consumer, computing from the newer
membership, is claiming or still holds: the claim is refused (`owner_conflicts`,
`legacy_zk/ownership.py: claim_all`), the attempt backs off and retries, and
after `rebalance.max.retries` it gives up (`rebalance_failures`; 0.8's
`ConsumerRebalanceFailedException`), leaving its share unconsumed. Kafka 0.8
knew: `zookeeper.sync.time.ms` is "how far a ZK follower can be behind a ZK
leader", and the docs told users to tune retries and back-off to outlast it.
In the coordinator era nothing of this depends on ZooKeeper: the coordinator
holds the membership in memory, and only the leader computes, from the list it
was given for that generation (`modern_coord/consumer.py: _assign_as_leader`),
so there is exactly one view per generation at any lag.

**Reproduce:** `python -m experiments run split_brain --profile {env.get('profile', 'quick')}` (or `reproduce`)."""


def _split_figure(ok: pd.DataFrame, path: Path) -> Path:
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.4), constrained_layout=True)
    for ax, (metric, title) in zip(axes.flat, SPLIT_FIGURE, strict=True):
        for design, (color, label) in STYLE.items():
            s = split_brain.per_delay(ok, design, metric, "mean")
            if not s.empty:
                ax.plot(s.index, s.values, "-o", color=color, label=label)
        ax.set_title(title)
        ax.set_xlabel("follower delay (ms, each way)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def zombie_section(summary: pd.DataFrame, env: dict, figures: Path, root: Path, table, timelines) -> str:
    ok = summary[summary.status == "ok"].sort_values(["variant", "design", "change_index"])
    setup = [("designs", ", ".join(sorted(summary.design.unique()))),
             ("group", f"N = {', '.join(str(int(n)) for n in sorted(summary.consumers.unique()))}: the victim "
                       "`c1` and the others, each in its own process"),
             ("partitions P", ", ".join(str(int(p)) for p in sorted(summary.partitions.unique()))),
             ("faults", "`pause`: SIGSTOP `c1` until the group converged without it and "
                        f"{zombie.HOLD_S:g} s more, then SIGCONT; `cut`: blackhole `c1`'s link to ZooKeeper "
                        "(legacy) or to its coordinator (modern), its broker links untouched, as long, then heal"),
             ("ZooKeeper", "1 server per trial"), ("brokers", "3 per trial, each hosting a group coordinator")]
    overrides = _overrides(summary, zombie.grid)
    per_change = ok[[c for c, _ in ZOMBIE_TABLE]]
    per_trial = ok.drop_duplicates("trial")[[c for c, _ in ZOMBIE_TRIAL_TABLE]]
    figure = _zombie_figure(ok, figures / "zombie.png")
    parts = []
    for variant in zombie.VARIANTS:
        panels = []
        for design in ("legacy", "modern"):
            trial = ok[(ok.design == design) & (ok.variant == variant)].trial
            if len(trial):
                panels.append((trial.iloc[0], f"{STYLE[design][1]}, {variant}: {trial.iloc[0]}"))
        parts.append(_timeline(timelines, panels, figures / f"timeline-zombie-{variant}.png", root))
    return f"""## Zombie: {zombie.QUESTION}

**Set-up.**

{table(["", ""], setup)}

Config overrides, beyond `auto.offset.reset` (`lab.processing.ms` is the lab's
stand-in for the application's work on each record, so that a zombie that wakes
up behind catches up at a realistic pace; it is not a Kafka setting):

{table(["design", "overrides"], overrides)}

**Results per change** (the fault's window runs from the fault to the heal;
double-owned counts what each consumer *believed* it owned, double-processed
what two consumers actually processed at once):

{table([label for _, label in ZOMBIE_TABLE], per_change.itertuples(index=False))}

**Results per trial:**

{table([label for _, label in ZOMBIE_TRIAL_TABLE], per_trial.itertuples(index=False))}

![zombie: double processing, duplicates, accepted and fenced commits]({figure.relative_to(root).as_posix()})

{chr(10).join(parts)}

**The finding, checked on these results** (`experiments/zombie.py: findings`):

{_findings(zombie.findings(summary))}

**What to take from it.** A ZooKeeper-era consumer learns that the group gave
up on it only when it hears from ZooKeeper again; until then nothing stops its
fetchers (`legacy_zk/consumer.py`, session handling: SUSPENDED changes nothing),
so it processes partitions the group has given to someone else, and its
offsets go to ZooKeeper as plain writes that nobody checks
(`legacy_zk/offsets.py: commit_offset`): a woken zombie writes back the older
position it had reached, and the group's committed offset moves backwards (the
next owner after a rebalance re-processes what was already done). In the
coordinator era every OffsetCommit carries the member id and generation, and
the coordinator refuses a stale one with ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID (`modern_coord/coordinator/`), so the zombie's commits are
fenced and the committed offsets only move forward; the zombie then rejoins as
a new member. What fencing does not stop is the zombie *fetching*: a consumer
cut off from its coordinator keeps processing until its next request to the
coordinator fails, so duplicates remain in both eras (at-least-once); Kafka's
answer to those is idempotent processing and transactions, not the group
protocol.

**Reproduce:** `python -m experiments run zombie --profile {env.get('profile', 'quick')}` (or `reproduce`)."""


def _zombie_figure(ok: pd.DataFrame, path: Path) -> Path:
    trials = zombie.per_trial(ok)
    metrics = [("double_processed_partition_s", "double-processed partition-s"), ("duplicates", "duplicates"),
               ("zombie_commits_accepted", "zombie commits accepted"),
               ("offsets_moved_backwards", "offsets moved backwards"), ("commits_fenced", "commits fenced")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(15, 3.2), constrained_layout=True)
    variants = list(zombie.VARIANTS)
    for ax, (metric, title) in zip(axes.flat, metrics, strict=True):
        for k, (design, (color, label)) in enumerate(STYLE.items()):
            values = [trials[(trials.design == design) & (trials.variant == v)][metric].mean() for v in variants]
            ax.bar([i + (k - 0.5) * 0.38 for i in range(len(variants))], values, 0.38, color=color, label=label)
        ax.set_xticks(range(len(variants)), variants)
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def _timeline(timelines, panels: list[tuple[str, str]], path: Path, root: Path) -> str:
    if timelines is None or not panels:
        return ""
    stretches, marks = timelines
    timeline_figure.figure(panels, stretches, marks, path)
    return (f"![timeline: which consumer processed each partition, with the fault and the rebalances]"
            f"({path.relative_to(root).as_posix()})\n\n*Each bar is a stretch of processing by one consumer "
            "(one lane per consumer inside a partition's row: two bars at one time are two consumers processing "
            "one partition); red lines are the faults, grey dashed lines the scenario's changes, green dotted "
            "lines the moments the runner saw the group converged; ticks at the bottom are consumers' new "
            "assignments, red crosses expired sessions and fenced commits.*")
