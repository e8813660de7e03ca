"""The assignors section of the report: partitions moved, loads and withheld partitions, per strategy and change.

Rendered from the run's stored results only: the computed replay the run
stored (`computed/assignors/changes.csv`, `StoredRun.computed`) and the real
trials' summary rows.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.catalogue import assignors  # noqa: E402
from experiments.engine.experiment import StoredRun  # noqa: E402
from experiments.report.parts import Section, findings_list, reproduce_line, table  # noqa: E402

TOTALS = [("strategy", "strategy"), ("side", "who computes"), ("protocol", "protocol"), ("moved", "moved"),
          ("fewest", "fewest possible"), ("handed_over", "from a staying member"), ("revoked", "revoked"),
          ("withheld", "withheld"), ("spread", "largest spread"), ("off_share", "farthest from a share"),
          ("rounds", "most rounds")]
#: where each strategy is implemented, for the explanation
CODE = {"range": "`lab_cluster/assignment/range.py`", "roundrobin": "`lab_cluster/assignment/roundrobin.py`",
        "sticky": "`lab_cluster/assignment/sticky.py`",
        "cooperative-sticky": "`lab_cluster/assignment/cooperative_sticky.py`",
        "legacy-range": "`legacy_zk/partition_assignor.py` (over `lab_cluster/assignment/shares.py`)",
        "legacy-roundrobin": "`legacy_zk/partition_assignor.py`",
        "rocketmq-averagely": "`lab_cluster/assignment/rocketmq.py`",
        "rocketmq-averagely-by-circle": "`lab_cluster/assignment/rocketmq.py`",
        "tubemq-modulo": "`lab_cluster/assignment/tubemq.py`",
        "tubemq-master": "`tubemq_client/master/balancer.py`", "weighted": "`examples/weighted_assignor.py`"}


NO_REAL_TRIAL = "No ok trial of the computed scenario's group."


def assignors_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    computed = run.computed.get(assignors.NAME, {})
    changes = computed.get("changes")
    checked = findings_list(assignors.findings(summary, computed))
    if changes is None or changes.empty:
        return Section("Assignors", assignors.QUESTION, checked, "",
                       "This run stored no computed replay (`computed/assignors/changes.csv`): it was made before "
                       "the experiment had one, or the file was removed. Nothing but the findings can be shown.",
                       "", reproduce_line("assignors", run.env), "Nothing stored.")
    steps = changes[changes.step > 0]
    labels = list(dict.fromkeys(steps.change))
    start = changes[changes.step == 0]
    scenarios = list(dict.fromkeys(changes.scenario))
    topics = dict(zip(changes.scenario, changes.topics, strict=False))
    setup = [("sequence", f"{int(start.members.iloc[0])} members (`c1`..`c{int(start.members.iloc[0])}`), then "
                          + ", ".join(f"`{c}`" for c in labels)
                          + f" ({' → '.join(str(int(n)) for n in changes.drop_duplicates('step').members)} members)"),
             ("topics", "; ".join(f"`{s}`: {topics[s]}" for s in scenarios)),
             ("member ids", "`<name>-<uuid5 of the name>`, sorted in join order as Kafka's `client.id-UUID` "
                            "are when client.id is the name (the lab's consumers' is); the client-side strategies "
                            "sort the same ids"),
             ("computed", f"{changes.strategy.nunique()} strategies, no cluster "
                          "(`experiments/catalogue/assignors_replay.py`); stored in `computed/assignors/`"),
             ("real trials", f"design `{run.spec(assignors.NAME, 'design')}`, "
                             f"N = {run.spec(assignors.NAME, 'consumers')}, "
                             f"P = {run.spec(assignors.NAME, 'partitions')} (topic `t`: the "
                             f"`{assignors.TRIAL_SCENARIO}` scenario), one per assignor "
                             f"({', '.join(sorted(summary.variant.unique()))}: "
                             "`partition.assignment.strategy`), every consumer in its own process; "
                             f"{summary.seed.nunique()} seed(s)")]
    per_change = _per_change(steps, assignors.TRIAL_SCENARIO, labels)
    totals = assignors.totals(changes)
    both = assignors.real_vs_computed(summary, changes)
    figure = _figure(changes, scenarios, run.figures / "assignors.png")
    appendix = f"""**Set-up.**

{table(["", ""], setup)}

**Partitions moved at each change** (`{assignors.TRIAL_SCENARIO}`; a partition moves when its owner after the
change did not own it before; a leaver's partitions must move):

{table(["strategy", *[f"`{c}`" for c in labels], "total"], per_change)}

**The real group beside the replay** (`partitions_moved`, `partitions_spread` from the traces,
`experiments/metrics.py`; the fewest for the real loads: from an even split before the change, less what the
leaver held, `member_partitions`):

{table(["assignor", "seed", "change", "moved (real)", "moved (computed)", "fewest for the real loads",
        "spread (real)", "spread (computed)"],
       both[["strategy", "seed", "computed_change", "partitions_moved", "moved", "real_fewest", "partitions_spread",
             "spread"]].itertuples(index=False)) if not both.empty else NO_REAL_TRIAL}"""
    shares = ("; farthest from a share: the most a load was off its member's share, even, or weighted for "
              "`weighted`" if changes.get("off_share") is not None else "")
    short = f"""**Over the sequence**, per scenario (spread: the most minus the fewest partitions a member holds after a
change{shares}; revoked: partitions members stopped consuming; withheld: left out of a first round):

{_totals_tables(totals, scenarios[:1])}"""
    if len(scenarios) > 1:
        appendix += ("\n\n**Over the sequence, the other scenarios:**\n\n" + _totals_tables(totals, scenarios[1:]))
    takeaway = f"""Range ({CODE['range']}) and round-robin
({CODE['roundrobin']}) are functions of the sorted member list alone: a
member's range, or its turn in the deal, depends on how many members come
before it, so a join or a departure at the front shifts nearly everyone's
share, and under the eager protocol every member first stops consuming all it
holds (`modern_coord/consumer.py`: revoke, then JoinGroup). Range splits each
topic on its own (`lab_cluster/assignment/shares.py: range_split`), so the
remainder of every topic falls to the same first members: loads even with
one topic are several partitions apart with several topics. Sticky ({CODE['sticky']}) reads
what each member reports it held (`_subscription_metadata`), keeps every
member's partitions up to its quota and deals out only the rest: it moves the
fewest partitions a balanced assignment can. Cooperative-sticky
({CODE['cooperative-sticky']}) computes the same assignment, but its members
keep consuming through the rebalance, so it must not give a partition to its
new owner while the old one still consumes it: the first round withholds
exactly the partitions one staying member hands another, their owners revoke
those alone and rejoin, and the second round gives them out. A departure's
partitions have no owner left and are given at once, in one round."""
    weighted = assignors.WEIGHTED in set(changes.strategy)
    if weighted:
        takeaway += f""" A user's
assignor runs in the same groups: the weighted example ({CODE['weighted']}),
named in `partition.assignment.strategy` by its class, reads each member's
weight from the user data of its JoinGroup (`c2` weighs
{assignors.replay.WEIGHTS['c2']}) and keeps every load within one partition of
its weighted share."""
    appendix += f"""\n\n**The other strategies in detail.** The
client-side strategies have no leader and nothing to remember: Kafka 0.8's
range and round-robin ({CODE['legacy-range']}) are the same arithmetic over
thread ids as today's, and RocketMQ's ({CODE['rocketmq-averagely']}) split each
topic over the sorted client ids as range does (averagely) or as each
topic's round-robin (by circle), so they move as range and round-robin do.
TubeMQ's client balance ({CODE['tubemq-modulo']}) has no membership to
change: the replay restarts every node with the new `sourceCount`, and the
hash of each partition key decides anew. Its older server balance
({CODE['tubemq-master']}) keeps what members hold but gives a departed
member's partitions to members picked at random, then evens the loads at the
next tick: a move more than sticky. The real trials run the eager assignors on
the coordinator-era design and measure the moves from who owned what before
and after each change: range and round-robin move exactly what the replay
computes, since the members' ids (`client.id-UUID`, the client.id being the
consumer's name) sort as the replay's do; sticky walks the members in Java's
`HashMap` order of those ids (`lab_cluster/java_hash.py`), which the random
UUIDs decide, so which member holds one partition more, and so how many a
departure frees, can differ from the replay's: it still moves the fewest its
own group's loads allow."""
    if weighted:
        appendix += """

**A user's assignor.** The weighted example is loaded by the plug-in point
(`lab_cluster/assignment/plugins.py`), in the replay as in the real trial's
consumers: each member's instance is configured with its own
`weighted.assignor.weight`, and sends it as four bytes of user data in its
JoinGroup; the leader reads everyone's and deals each member a run of
partitions in proportion (floors, then the largest remainders). It remembers
nothing of who held what, so a change moves more than the fewest its shares
allow (the fewest column counts, for it, loads within one of each weighted
share); keeping a weighted share and moving few at once is what a sticky
weighted assignor would add. Its real trial moved what the replay computes:
the member order decides it, as range's, and the weight crossed the wire."""
    return Section("Assignors", assignors.QUESTION, checked,
                   f"![partitions moved and spread per change]({figure.relative_to(run.root).as_posix()})",
                   short, takeaway, reproduce_line("assignors", run.env), appendix,
                   "experiments/catalogue/assignors.py: findings")


def _per_change(steps: pd.DataFrame, scenario: str, labels: list[str]) -> list[tuple]:
    rows = steps[steps.scenario == scenario]
    out = []
    for strategy, own in rows.groupby("strategy", sort=False):
        moved = dict(zip(own.change, own.moved, strict=True))
        out.append((strategy, *[int(moved[c]) for c in labels], int(own.moved.sum())))
    fewest = rows.drop_duplicates("step").set_index("change").fewest
    out.append(("*fewest possible*", *[int(fewest[c]) for c in labels], int(fewest.sum())))
    return out


def _totals_tables(totals: pd.DataFrame, scenarios: list[str]) -> str:
    parts = []
    # a run stored before the replay measured `off_share` has no such column to show
    columns = [(c, label) for c, label in TOTALS if c != "off_share" or totals.off_share.notna().any()]
    for scenario in scenarios:
        rows = totals[totals.scenario == scenario][[c for c, _ in columns]]
        parts.append(f"`{scenario}`:\n\n" + table([label for _, label in columns], rows.itertuples(index=False)))
    return "\n\n".join(parts)


def _figure(changes: pd.DataFrame, scenarios: list[str], path: Path) -> Path:
    steps = changes[changes.step > 0]
    strategies = list(dict.fromkeys(steps.strategy))
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(2, len(scenarios), figsize=(5 * len(scenarios), 6), sharex=True, squeeze=False,
                             constrained_layout=True)
    for column, scenario in enumerate(scenarios):
        rows = steps[steps.scenario == scenario]
        labels = list(dict.fromkeys(rows.change))
        for i, strategy in enumerate(strategies):
            own = rows[rows.strategy == strategy]
            offset = (i - len(strategies) / 2) * 0.03  # lines that coincide stay visible side by side
            style = {"color": colours(i % 10), "marker": "o", "markersize": 3, "linewidth": 1,
                     "linestyle": "-" if own.side.iloc[0] == "leader" else "--"}
            axes[0][column].plot([x + offset for x in range(len(own))], own.moved, label=strategy, **style)
            axes[1][column].plot([x + offset for x in range(len(own))], own.spread, **style)
        fewest = rows.drop_duplicates("step").fewest
        axes[0][column].plot(range(len(fewest)), fewest, color="black", linestyle=":", linewidth=2,
                             label="fewest possible")
        axes[0][column].set_title(f"{scenario} ({rows.topics.iloc[0]})", fontsize=9)
        axes[1][column].set_xticks(range(len(labels)), labels, fontsize=8)
        axes[0][column].set_ylabel("partitions moved")
        axes[1][column].set_ylabel("spread (max - min per member)")
        for ax in (axes[0][column], axes[1][column]):
            ax.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path
