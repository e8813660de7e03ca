"""The split-brain experiment: with a lagging ZooKeeper follower, do consumers compute from different views?

*Split brain* means one thing across the lab: at one moment, the members of one group act on assignments
computed from more than one view of the group (its membership; for TubeMQ, its size and node ids). It is
measured as `view_divergence` above 1 (`experiments/metrics.py: views_in_effect`); owner conflicts, failed
attempts and partitions with two owners are its consequences, counted apart. A zombie processing a partition
the group gave to another is not split brain: that is the zombie experiment's double processing.

For each design and each follower delay: a three-server ensemble, a group of
N consumers each in its own process, the k-th holding its ZooKeeper session on
server k mod 3 (so some sit on the lagging follower); once the group is stable
one follower's quorum link to the leader is delayed (none, small, large), and
membership churns: `j1` joins, `j2` joins, `j1` leaves, `churn_gap_s` apart.
The coordinator-era group runs the same churn; only its brokers hold sessions
on the same ensemble.

A ZooKeeper follower serves reads from its own copy of the tree, which lags the
leader by its quorum link's delay; its watches fire when it applies a change.
The finding, checked by `findings()` (and by `pytest -m split_brain`):

- ZooKeeper era: each consumer computes the range split from the membership
  its own server shows it (`legacy_zk/view.py: read_view`); with a lagging
  follower, consumers in one round work from different views at once (a
  `view_divergence` above 1), and they disagree on who owns what: claims are
  refused (`owner_conflicts`) and attempts fail, more so and for longer as the
  lag grows, because the consumers on the lagging follower release their
  owner znodes through writes that wait on the lag;
- coordinator era: only the group leader computes an assignment, from the
  member list the coordinator gives it for that generation
  (`modern_coord/coordinator/`), so every generation has exactly one view,
  whatever the ensemble under the brokers does;
- the consumer protocol (`consumer-848`, KIP-848): no member computes at all;
  the coordinator computes the target assignment once per group epoch from
  its own member list (the broker's `target_assignment`), so each epoch has
  one view, as each classic generation does;
- RocketMQ: no ZooKeeper in the consumers' path, but the same lag one level
  up: every consumer's link to one broker is delayed instead
  (`broker_delay_ms`), so that broker learns of each heartbeat and
  unregistration late, and a consumer woken by a prompt broker's push that
  asks the lagging one for the id list (it picks a broker at random,
  `rocketmq_client/instance.py`) allocates from a list the others have left
  behind: more than one id list in a round, queues with two owners or none,
  for longer as the lag grows (the group heals at the late broker's own push,
  or at the 20 s periodic rebalance of whoever read its list last);
- TubeMQ's client balance has no view to lag: a node's share depends on its
  own `sourceCount` and `nodeId` alone. What can split it is configuration,
  so its trials start a newcomer `j1` misconfigured on purpose, with a
  `nodeId` another node holds (`same-node-id`) or another `sourceCount`
  (`other-source-count`). The master refuses it (CLIENT_DUPLICATE_INDEXID,
  CLIENT_INCONSISTENT_SOURCECOUNT: `tubemq_client/master/groups.py`), so it
  never computes a share: one view in effect, no partition with two owners.
"""

from __future__ import annotations

import pandas as pd

from experiments.engine.experiment import Experiment
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "split_brain"
QUESTION = ("With a three-server ensemble and a lagging follower, do consumers compute their assignments from "
            "different views, and do claims conflict, attempts fail, partitions get two owners?")
#: the lagging follower's quorum-link delay, each way (syncLimit x tickTime = 4 s bounds the round trip)
DELAYS_MS = {"none": 0, "small": 250, "large": 1000}
PROFILES = {
    "standard": {"consumers": [4], "partitions": 12, "rate": 2.0, "seeds": 1},
    # the standard grid's trials of these designs take 28-39 s each (`benchmarks/trial_time.json`)
    "tour": {"consumers": [4], "partitions": 12, "rate": 2.0, "seeds": 1, "delays": (DELAYS_MS["none"],
             DELAYS_MS["large"]), "designs": ("zookeeper", "classic"),
             "why": "split brain: with a lagging follower the ZooKeeper era's consumers compute from different "
                    "views and their claims conflict, while the coordinator computes each generation from one; no "
                    "lag and the largest lag are the two ends its delay finding compares"},
    "full": {"consumers": [4, 8], "partitions": 24, "rate": 2.0, "seeds": 3},
}
DESIGNS = ("zookeeper", "classic", "consumer-848", "rocketmq", "tubemq")
#: what lags, per design: a ZooKeeper follower under the consumers (`zookeeper`) or under the brokers (`classic`), or
#: one broker that keeps RocketMQ's membership (every consumer's link to it delayed)
LAG_PARAM = {"zookeeper": "follower_delay_ms", "classic": "follower_delay_ms", "consumer-848": "follower_delay_ms",
             "rocketmq": "broker_delay_ms"}
#: TubeMQ's trials instead: a newcomer j1 misconfigured against a group of n, by variant
MISCONFIGURED = {
    "same-node-id": lambda n: ("j1:nodeId=0",),  # c1's
    "other-source-count": lambda n: (f"j1:sourceCount={n + 1}", f"j1:nodeId={n}"),  # a free id under its count
}


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None, delays: tuple[int, ...] | None = None
         ) -> list[TrialSpec]:
    p = PROFILES[profile]
    lagging = [TrialSpec(NAME, design, n, partitions or p["partitions"], rate=p["rate"], seed=seed,
                         variant=f"delay-{delay}", zk_servers=3, layout="spread", params={LAG_PARAM[design]: delay},
                         steps=("churn",), converge_required=False, converge_limit_s=45.0)
               for delay in (delays or p.get("delays") or DELAYS_MS.values())
               for design in designs if design in LAG_PARAM
               for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]
    # the newcomer is refused at once (it gives up), so its join is judged without waiting
    misconfigured = [TrialSpec(NAME, design, n, partitions or p["partitions"], rate=p["rate"], seed=seed,
                               variant=variant, steps=("join",), member_overrides=overrides(n),
                               converge_required=False, converge_limit_s=45.0)
                     for variant, overrides in MISCONFIGURED.items() for design in designs if design == "tubemq"
                     for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]
    return lagging + misconfigured


def per_delay(summary: pd.DataFrame, design: str, metric: str, how: str = "max") -> pd.Series:
    """`metric` per delay of what lags in this design (`LAG_PARAM`)."""
    rows = summary[(summary.experiment == NAME) & (summary.design == design) & (summary.status == "ok")
                   & (summary.change == "churn")]
    lag = LAG_PARAM.get(design)
    if lag is None or lag not in rows:  # a design this experiment does not run, or a run from before its lag
        return pd.Series(dtype=float)
    return rows.groupby(lag)[metric].agg(how).sort_index()


def at_largest_lag(summary: pd.DataFrame, design: str) -> pd.DataFrame:
    """The design's ok `churn` rows at the largest lag the run has for it (`LAG_PARAM`); none for a design with
    no lag (TubeMQ) or a run from before its lag. What the report's tables, headline and timelines show."""
    rows = summary[(summary.experiment == NAME) & (summary.design == design) & (summary.status == "ok")
                   & (summary.change == "churn")]
    lag = LAG_PARAM.get(design)
    if lag is None or lag not in rows or rows.empty:
        return rows.iloc[0:0]
    return rows[rows[lag] == rows[lag].max()]


def findings(summary: pd.DataFrame) -> list[Finding]:
    out = []
    divergence = per_delay(summary, "zookeeper", "view_divergence")
    trouble = per_delay(summary, "zookeeper", "owner_conflicts") + per_delay(summary, "zookeeper", "rebalance_failures")
    lagging = [d for d in divergence.index if d > 0]
    out.append(Finding(
        "zookeeper-lagging-views-diverge",
        "ZooKeeper era, lagging follower: consumers compute from more than one view in a round, and conflicts or "
        "failed attempts follow", bool(lagging) and all(divergence[d] > 1 and trouble[d] > 0 for d in lagging),
        f"view divergence {_series(divergence)}; conflicts + failures {_series(trouble)}"))
    # a change that never converged (the runner gave up at its limit) is slower than any that did
    converge = per_delay(summary, "zookeeper", "convergence_ms").fillna(float("inf"))
    worse = (len(trouble) >= 2 and trouble.index[0] == 0 and trouble.iloc[-1] > trouble.iloc[0]
             and converge.iloc[-1] > converge.iloc[0])
    out.append(Finding(
        "zookeeper-delay-worsens",
        "ZooKeeper era: the largest follower delay gives more owner conflicts and failed attempts, and a slower "
        "convergence, than no delay", bool(worse),
        f"conflicts + failures {_series(trouble)}; convergence ms {_series(converge)}"))
    modern = per_delay(summary, "classic", "view_divergence")
    out.append(Finding(
        "classic-one-view",
        "Coordinator era: every generation's assignment is computed from exactly one view, at every delay",
        len(modern) > 0 and bool((modern == 1).all()), f"view divergence {_series(modern)}"))
    kip848 = per_delay(summary, "consumer-848", "view_divergence")
    out.append(Finding(
        "consumer-848-one-view",
        "Consumer protocol (KIP-848): the coordinator computes each group epoch's target assignment from one member "
        "list, at every delay", len(kip848) > 0 and bool((kip848 == 1).all()), f"view divergence {_series(kip848)}"))
    rocket = per_delay(summary, "rocketmq", "view_divergence")
    lagging = [d for d in rocket.index if d > 0]
    out.append(Finding(
        "rocketmq-lagging-broker-views-diverge",
        "RocketMQ, lagging broker: consumers allocate from more than one id list in a round",
        bool(lagging) and all(rocket[d] > 1 for d in lagging),
        f"id lists in a round {_series(rocket)}"))
    # partition-seconds with two owners or none, until the churn converged (or its window ended)
    astray = (per_delay(summary, "rocketmq", "double_owned_partition_s")
              + per_delay(summary, "rocketmq", "unowned_partition_s"))
    slow = per_delay(summary, "rocketmq", "convergence_ms").fillna(float("inf"))
    worse = (len(astray) >= 2 and astray.index[0] == 0 and astray.iloc[-1] > astray.iloc[0]
             and slow.iloc[-1] > slow.iloc[0])
    out.append(Finding(
        "rocketmq-delay-worsens",
        "RocketMQ: the largest broker delay leaves queues with two owners or none for longer, and converges "
        "later, than no delay", bool(worse),
        f"double-owned + unowned partition-s {_series_s(astray)}; convergence ms {_series(slow)}"))
    tube = summary[(summary.experiment == NAME) & (summary.design == "tubemq") & (summary.status == "ok")
                   & (summary.change == "join")]
    # no assignment at all in the window leaves view_divergence empty: no view was computed, so none diverged
    views = tube.view_divergence.fillna(0)
    refused = (set(tube.variant) == set(MISCONFIGURED)
               and bool(((tube.rebalance_failures >= 1) & (views <= 1) & (tube.double_owned_partition_s == 0)).all()))
    out.append(Finding(
        "tubemq-misconfigured-node-refused",
        "TubeMQ: a node with a nodeId another holds, or another sourceCount, is refused by the master: one view in "
        "effect, no partition with two owners", refused,
        "; ".join(f"{r.variant}: newcomer failures {r.rebalance_failures:.0f}, views computed {v:.0f}, "
                  f"double-owned {r.double_owned_partition_s:.1f} partition-s"
                  for r, v in zip(tube.itertuples(), views, strict=True)) or "no successful trial"))
    return of_designs_run(out, summary)


def _series_s(s: pd.Series) -> str:
    return ", ".join(f"{d} ms: {v:,.1f}" for d, v in s.items()) or "no successful trial"


def _series(s: pd.Series) -> str:
    return ", ".join(f"{d} ms: {v:,.0f}" for d, v in s.items()) or "no successful trial"


#: 2: RocketMQ's family, with a lagging broker; 3: TubeMQ's, with a misconfigured node; 4: KIP-848's protocol
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.faults:split_brain_section", keeps_timelines=True, version=4)
