"""The report's comparison across designs: one row per design, each figure taken from the experiment that
measures it, with the mechanism behind it.

Rendered from the run's stored summary only; a design or an experiment the run
did not include shows "–".
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import broker_churn, first_message, herd, split_brain, storm, zombie
from experiments.report.parts import STYLE, table

#: what makes each design's figures what they are, and where to read it
MECHANISM = {
    "zookeeper": "ZooKeeper watches tell every consumer; each rebalances alone from what its own server shows "
              "(`legacy_zk/view.py`) and claims owner znodes; offsets are plain ZooKeeper writes",
    "classic": "the coordinator tells members at their next heartbeat; one leader assigns for the generation; "
              "generation and member id fence commits (`modern_coord/coordinator/`)",
    "rocketmq": "every broker pushes to every consumer; each allocates alone from one broker's id list "
                "(`rocketmq_client/rebalance.py`); brokers accept offsets from anyone",
    "tubemq": "no membership: each node takes its hash share of a fixed sourceCount; nobody is told or takes "
              "over; the master refuses conflicting nodes and the broker serves and commits for the holder only "
              "(`tubemq_client/`)",
    "classic-static": "a static member's close sends no LeaveGroup and its return within the session timeout takes "
                     "its old place, generation and partitions: nobody else rebalances "
                     "(`modern_coord/coordinator/coordinator.py`, KIP-345)",
    "classic-coop": "members keep what they own through a rebalance; the leader withholds what changes owner, "
                   "revoked and handed out in one more round (`lab_cluster/assignment/cooperative_sticky.py`, "
                   "KIP-429)",
    "classic-static-coop": "both: a restart within the session timeout is no rebalance at all; any other change is "
                          "cooperative (`modern_coord/variants.py`)",
    "consumer-848": "no barrier: the coordinator computes every member's target (`uniform`), and each member "
                     "reconciles alone through its heartbeats, a partition handed over only once its owner has "
                     "released it; member epochs fence heartbeats and commits "
                     "(`modern_coord/coordinator/consumer_protocol.py`, KIP-848)",
    "kafka-python": "the real client kafka-python (`KafkaConsumer` 3.x), unchanged, on the brokers' Kafka listeners "
                    "and the lab's coordinator: the coordinator era's protocol as a library people run implements "
                    "it (`kafka_clients/`)",
    "librdkafka": "the real client librdkafka (confluent-kafka's `Consumer`), unchanged, on the brokers' Kafka "
                  "listeners and the lab's coordinator (`kafka_clients/`)",
    "tubemq-server": "the master plans at its balance tick and hands each consumer one event per heartbeat, every "
                     "release before any take; the broker fences as in client balance "
                     "(`tubemq_client/master/balancer.py`)",
}


def designs_compared(summary: pd.DataFrame) -> str:
    ok = summary[summary.status == "ok"]
    joins = ok[(ok.experiment == "herd") & (ok.change == "join")]
    largest = _largest_common_n(joins)
    rows = []
    for design, (_, label) in STYLE.items():
        if not (summary.design == design).any():
            continue
        h = joins[(joins.design == design) & (joins.consumers == largest)]
        sb = _split_at_largest_lag(ok, design)
        z = zombie.per_trial(ok[ok.design == design]) if (ok.experiment == "zombie").any() else pd.DataFrame()
        fm = first_message.per_design(ok[ok.design == design])
        st = storm.per_trial(ok[ok.design == design]) if (ok.experiment == "storm").any() else pd.DataFrame()
        bc = broker_churn.per_trial(ok[ok.design == design]) if (ok.experiment == "broker_churn").any() \
            else pd.DataFrame()
        bc = bc[bc.watch.isin(["", "always"])] if not bc.empty else bc  # the ZooKeeper era's default
        rows.append((label, _mean(h, "control_messages_per_change"), herd.settled_ms(h),
                     _mean(sb, "unowned_partition_s"), _mean(sb, "double_processed_partition_s"),
                     _sum(z, "duplicates"), _sum(z, "zombie_commits_accepted"), _sum(z, "commits_fenced"),
                     fm.median_ms.median() if not fm.empty else None,
                     *(_mean(st, c) for c in ("generations", "partitions_revoked", "unowned_partition_s")),
                     *(_mean(bc, c) for c in ("rebalances", "resumed_after_kill_ms")),
                     MECHANISM.get(design, "")))
    if not rows:
        return ""
    header = ["design", f"control messages per join (herd, N={largest if largest else '–'})", "convergence ms (same)",
              "unowned partition-s (split brain: largest lag, or TubeMQ's misconfigured node)",
              "double-processed partition-s (same)",
              "duplicates (zombie, both faults)", "zombie commits accepted (same)", "commits fenced (same)",
              "first message ms (median)", "rebalance rounds (storm: a rolling restart)",
              "partitions the others revoked (same)", "unowned partition-s (same)",
              "rebalances begun (broker churn: a broker killed and restarted, all consumers, every victim)",
              "ms until every partition is processed again after the kill (same)", "mechanism"]
    return f"""## The designs compared

One row per design; each figure comes from the experiment named in its
column (the sections above give every trial), so the workloads are those
experiments': the herd's join at the largest N every design ran, the split
brain's churn at the largest lag (a ZooKeeper follower's, or RocketMQ's
broker's; TubeMQ, which has no view to lag, its misconfigured newcomers), the
zombie's two faults summed, the first-message trials' median, and the storm's
rolling restart summed over its restarts (the coordinator era's static and
cooperative variants run there and in the broker churn only; the real Kafka
clients in the herd, the zombie's pause and the storm only), and the broker
churn's kill and restart summed, averaged over its victims (the ZooKeeper era
watching `/brokers/ids`, its default). TubeMQ's
join is refused: its row's join costs what its nodes send anyway, and has no
convergence time.

{table(header, rows)}"""


def _largest_common_n(herd: pd.DataFrame) -> int | None:
    ns = [set(herd[herd.design == d].consumers) for d in herd.design.unique()]
    common = set.intersection(*ns) if ns else set()
    return int(max(common)) if common else None


def _split_at_largest_lag(ok: pd.DataFrame, design: str) -> pd.DataFrame:
    """The split-brain churn at the design's largest lag; for a design with no lag (TubeMQ), its
    misconfigured newcomers' trials."""
    if design not in split_brain.LAG_PARAM:
        return ok[(ok.experiment == "split_brain") & (ok.design == design)
                  & ok.variant.isin(list(split_brain.MISCONFIGURED))]
    return split_brain.at_largest_lag(ok, design)


def _mean(rows: pd.DataFrame, column: str):
    return rows[column].mean() if not rows.empty and column in rows else None


def _sum(rows: pd.DataFrame, column: str):
    return rows[column].sum() if not rows.empty and column in rows else None
