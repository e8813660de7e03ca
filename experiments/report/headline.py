"""The headline figures: one row per design, the few numbers that answer the lab's question.

Read from a run's summary alone (its stored `summary.csv`), so the tour's
closing table and a report show the same numbers for the same run:

- the herd, one join at the largest group size N the run has for that design:
  ZooKeeper requests and notifications the change cost, control messages (every
  request to ZooKeeper or a broker's coordinator), and how many members stopped
  (revoked what they held);
- the same join's partitions revoked (what the stopped members gave up) and
  its time to a stable group (`convergence_ms`; none where the join was
  refused or a rebalance failed: the group never got there);
- split brain, at the largest lag the run has: owner conflicts and failed
  rebalance attempts of the churn;
- the zombie, summed over its faults (pause, cut; each the mean of its seeds): the zombie's commits the
  group accepted (`zombie_commits_accepted`, per change window) and those the
  coordinator fenced (`commits_fenced`, per trial).

A design an experiment did not run shows an empty cell ("–"), never a zero; a
design none of the three ran (the storm's, say) has no row.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import herd, split_brain, zombie
from experiments.engine.families import FAMILIES

#: (column, what it says), in the order the table shows them
COLUMNS = (
    ("herd_n", "herd: the largest group size N"),
    ("zk_requests", "herd: ZooKeeper requests for one join at N"),
    ("notifications", "herd: notifications for one join at N"),
    ("control_messages", "herd: control messages (notifications, ZooKeeper and group requests) for one join at N"),
    ("members_stopped", "herd: members that stopped (revoked) for one join at N"),
    ("partitions_revoked", "herd: partitions revoked for one join at N"),
    ("stable_s", "herd: seconds to a stable group after one join at N"),
    ("split_brain_trouble", "split brain at the largest lag: owner conflicts + failed attempts"),
    ("zombie_accepted", "zombie: its commits accepted (pause and cut)"),
    ("zombie_fenced", "zombie: its commits fenced (pause and cut)"),
)


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per design the run has, in the registry's order, with `COLUMNS` (NaN where not run).

    >>> s = pd.DataFrame({"experiment": ["herd", "herd", "zombie"], "design": ["zookeeper", "zookeeper", "zookeeper"],
    ...     "variant": ["", "", "pause"],
    ...     "status": "ok", "change": ["join", "join", "heal"], "consumers": [2, 8, 2], "trial": ["h2", "h8", "z"],
    ...     "zk_requests_per_change": [40.0, 300.0, 0], "notifications_per_change": [3.0, 9.0, 0],
    ...     "control_messages_per_change": [40.0, 300.0, 0], "members_revoking": [2.0, 8.0, 0],
    ...     "partitions_revoked": [4.0, 8.0, 0], "convergence_ms": [900.0, 2000.0, 0], "rebalance_failures": 0,
    ...     "zombie_commits_accepted": [0, 0, 3.0], "commits_fenced": [0, 0, 0.0]})
    >>> headline(s)[["design", "herd_n", "zk_requests", "zombie_accepted", "split_brain_trouble"]].to_dict("records")
    [{'design': 'zookeeper', 'herd_n': 8.0, 'zk_requests': 300.0, 'zombie_accepted': 3.0, 'split_brain_trouble': nan}]
    """
    ok = summary[summary.status == "ok"]
    designs = [d for d in FAMILIES if d in set(ok.design)]
    rows = [{"design": d, **_herd(ok, d), **_split_brain(ok, d), **_zombie(ok, d)} for d in designs]
    table = pd.DataFrame(rows, columns=["design", *(c for c, _ in COLUMNS)])
    return table.dropna(how="all", subset=[c for c, _ in COLUMNS]).reset_index(drop=True)


def _herd(ok: pd.DataFrame, design: str) -> dict:
    joins = ok[(ok.experiment == herd.NAME) & (ok.design == design) & (ok.change == "join")]
    if joins.empty:
        return {}
    largest = joins[joins.consumers == joins.consumers.max()]
    return {"herd_n": float(largest.consumers.iloc[0]),
            "zk_requests": largest.zk_requests_per_change.mean(),
            "notifications": largest.notifications_per_change.mean(),
            "control_messages": largest.control_messages_per_change.mean(),
            "members_stopped": largest.members_revoking.mean(),
            "partitions_revoked": largest.partitions_revoked.mean(),
            "stable_s": herd.settled_ms(largest) / 1000}


def _split_brain(ok: pd.DataFrame, design: str) -> dict:
    largest = split_brain.at_largest_lag(ok, design)
    if largest.empty:
        return {}
    # the mean over the trials at that lag (seeds), as the split-brain section shows it
    return {"split_brain_trouble": (largest.owner_conflicts + largest.rebalance_failures).mean()}


def _zombie(ok: pd.DataFrame, design: str) -> dict:
    rows = ok[(ok.experiment == zombie.NAME) & (ok.design == design)]
    if rows.empty:
        return {}
    # accepted commits are counted per change window, fenced ones per trial (each change row repeats them); each
    # fault's trials are averaged over their seeds, then the faults summed
    trials = rows.groupby(["variant", "trial"]).agg(accepted=("zombie_commits_accepted", "sum"),
                                                    fenced=("commits_fenced", "first"))
    per_fault = trials.groupby("variant").mean()
    return {"zombie_accepted": per_fault.accepted.sum(), "zombie_fenced": per_fault.fenced.sum()}
