"""The broker-churn experiment: one broker dies (SIGKILL) under a stable group and later comes back. Who rebalances?

For each design of the registry (`engine/families.py`; a design added there joins
by itself): a stable group `c1..cN`, each consumer in its own process, on a
topic whose P partitions are led round-robin by three brokers (replicas on all
three: `lab_cluster/broker/admin.py: create_topic`); a producer keeps writing.
Then two changes (`engine/steps.py`):

1. `broker_kill`: SIGKILL one broker, as Kafka's own system test
   `test_broker_failure` does with clean_shutdown=False. Its registration
   `/brokers/ids/<id>` stays until ZooKeeper expires its session (6 s); then the
   controller (`lab_cluster/broker/controller.py`, 0.8's `KafkaController`)
   gives each partition it led the next live replica as leader, and the
   runner waits for that before it watches the group. If the victim was the
   controller, another broker wins `/controller` first. The lab's partition
   logs are shared files, so the new leader serves everything written before;
2. `broker_restart`: the same broker id, on the same port, registers again.
   The lab has no preferred-leader election (Kafka's
   `auto.leader.rebalance.enable`, checked every 300 s): the returning
   broker leads nothing, so leadership, and the coordinator, stay where the
   failure put them.

After each change the runner waits for the group to be whole (it does not
wait for anyone to rebalance: in the coordinator era nobody should), then
watches it for `hold_s` (longer for the designs whose clients find out on a
period), and the metrics measure the window: rebalance rounds
(`generations`), members revoking and partitions revoked, unowned and
unprocessed partition-seconds, and `processing_resumed_ms`, the time until
every partition is processed again (`experiments/metrics.py`).

The victim (variant), per design:

- coordinator era (every design whose consumers find a coordinator:
  `Family.find_coordinator`): `coordinator` kills the broker that coordinates
  the group at that moment (FindCoordinator: the leader of its
  `__consumer_offsets` partition, `modern_coord/coordinator/service.py`);
  `other`, the highest-numbered broker that is not it. Kafka's
  `test_broker_failure` picks a node arbitrarily ("TODO: we need a way to
  target the coordinator") and asserts "Broker failure should not cause a
  rebalance". What the code says for the coordinator: the next leader of the
  offsets partition replays its log, group records included, and restores the
  group Stable with its members, generation and assignment
  (`coordinator.py: _restore_group`, Kafka's `GroupMetadataManager.loadGroup`);
  members that lose their coordinator look it up again and heartbeat the new
  one in the same generation (`modern_coord/consumer.py`), so no rebalance
  should begin; the members' sessions (45 s) outlast the 6 s failover. In the
  lab the group's coordinator happens to be broker 1, the first to start and
  so the controller: `coordinator` kills both (recorded in the `fault` event);
- ZooKeeper era (`zookeeper`): no coordinator; the victim is a broker leading a
  third of the partitions (`other`), run twice: `watch_broker_ids=always`
  (the lab's default: every consumer watches `/brokers/ids` and rebalances on
  any change) and `when_empty` (what 0.8.2.2's code does: it subscribes to
  `/brokers/ids` only when a rebalance found no broker, `legacy_zk/config.py`,
  `legacy_zk/consumer.py`; its fetchers find the new leader themselves,
  `legacy_zk/fetching.py`). The variant says which: `other-watch-always`;
- Kafka 0.8.2.2's own consumer and brokers (`real-kafka-0.8.2.2`, `real_systems/`): victim `other`;
  its code watches /brokers/ids only when a rebalance found no broker, as `when_empty` does. Its brokers
  replicate, and the producer waits for every in-sync replica, so every partition's writes wait until the
  controller drops the dead broker from the in-sync replicas (at its session's expiry): its unprocessed
  time counts partitions with nothing new to process;
- RocketMQ, TubeMQ (client and server balance): no coordinator; `other`, a
  broker that leads a third of the partitions. Each broker also holds
  RocketMQ's consumer table and offsets, and TubeMQ's registrations and a
  master: what dies with it is measured, not assumed. These designs learn of
  the new leaders on a period (RocketMQ's route every
  `pollNameServerInterval`, 30 s; TubeMQ's partition metadata every
  `partMetaInfoCheckPeriodMs`, 10 s; its server balance at the master's
  30 s tick), so their windows are watched longer (`HOLD_S`).

Rounds: the coordinator era's are generations; the ZooKeeper era's are
membership views (the ids node's cversion), which a broker change does not
change, so its broker-triggered rebalances show as `rebalance_attempts` and
members revoking, not as rounds (the findings count those).

Departures, stated: no replication and no ISR (every replica is "in sync", so
the first live one leads; nothing is lost or truncated); no preferred-leader
election after the restart; the broker comes back on the port it had. A
RocketMQ or TubeMQ broker's queues belong to it and vanish while it is down
(RocketMQ 4.x without slave-acting-master); the lab's move them to the new
leader under a new name (`broker-<id>`, `<brokerId>:t:<p>`), which their
clients find on their periods, with the offsets the dead broker last flushed
(its queues' offsets come back with it in RocketMQ and TubeMQ; the lab's
follow the leader, `lab_cluster/partition_offsets.py`). TubeMQ's node holding
a dead broker's key drops it at its next metadata query, the key being gone
from the master's map (`CONVERGE_NOT_REQUIRED`). The standard profile runs the coordinator
era's static and cooperative variants with the coordinator as victim only (a
non-coordinator broker's death reaches them through their fetchers alone, as
it does `classic`'s); the full profile runs every victim of every design.
TubeMQ's server balance makes the standard grid long: its recovery waits for the
master's 30 s tick and a 13 s heartbeat per step, over a minute.
"""

from __future__ import annotations

import pandas as pd

from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES, REAL_CLIENTS, with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "broker_churn"
QUESTION = ("A broker dies (SIGKILL) under a stable group and later comes back: who rebalances, and what does it "
            "cost (partitions left idle, duplicates, the time until every partition is processed again)?")
PROFILES = {
    "standard": {"consumers": [3], "partitions": 6, "rate": 5.0, "seeds": 1, "every_victim": ("classic",)},
    "full": {"consumers": [3, 6], "partitions": 12, "rate": 5.0, "seeds": 3, "every_victim": None},
}
#: every design of the registry, in its order (a design added to the registry joins), but the real Kafka clients
#: (`kafka_clients/`): they are run in herd, zombie and storm; in this experiment the lab's consumers are watched
#: learning of new leaders through the lab's metadata, which a real client's metadata refresh would need its own
#: findings for (not built)
LAB_DESIGNS = tuple(name for name in FAMILIES if name not in REAL_CLIENTS and not FAMILIES[name].counterpart)
#: ... then the real systems (`real_systems/`) the runner can churn as it does the lab's brokers: the victim and
#: its partitions' new leaders are read from ZooKeeper, so the real brokers must keep their topic there
#: (`RealBrokers.create_topic` None: not Kafka 4's KRaft, not RocketMQ) and the counterpart must have no
#: coordinator to find (the runner's FindCoordinator is the lab's). That is Kafka 0.8.2.2, beside `zookeeper`:
#: its producer asks for every replica's acknowledgement (`real_systems/kafka_producer.py`), so the kill loses
#: no acknowledged send
CHURNED_REAL = tuple(d for d in with_references(LAB_DESIGNS) if FAMILIES[d].counterpart
                     and FAMILIES[d].brokers.create_topic is None
                     and FAMILIES[FAMILIES[d].counterpart].find_coordinator is None)
DESIGNS = (*LAB_DESIGNS, *CHURNED_REAL)
#: the ZooKeeper era's two ways of watching /brokers/ids (`legacy_zk/config.py`)
LEGACY_WATCH = ("always", "when_empty")
#: how long the runner watches the kill's window once the group is whole, by design (default `HOLD_S[None]`):
#: the designs that learn of new leaders on a period are given that period and more; the restart's window
#: (the returning broker leads nothing) is watched `RETURN_HOLD_S`
HOLD_S = {None: 4.0, "rocketmq": 40.0, "tubemq": 14.0, "tubemq-server": 75.0}
RETURN_HOLD_S = 4.0
#: where the runner does not require the group to converge: TubeMQ names a partition by its broker
#: (`brokerId:topic:partitionId`), so a partition whose leader moved is a new key to its hash's node, while the
#: node that held the old key holds it until its next metadata query drops it (the master's map lists live
#: leaders' keys only; TubeMQ's clearUnSubscribablePartitions): until then, by partition number, it may have two
#: holders, one of which cannot fetch. Measured, not failed
CONVERGE_NOT_REQUIRED = ("tubemq", "tubemq-server")
STEPS = ("broker_kill", "broker_restart")


def has_coordinator(design: str) -> bool:
    return FAMILIES[design].find_coordinator is not None


def victims(design: str) -> tuple[str, ...]:
    return ("coordinator", "other") if has_coordinator(design) else ("other",)


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    every = p["every_victim"]
    out = []
    for design in designs:
        cases = victims(design)
        if every is not None and design not in every and len(cases) > 1:
            cases = ("coordinator",)  # standard: the variants' differing case only
        for victim in cases:
            for watch in (LEGACY_WATCH if design == "zookeeper" else (None,)):
                for n in consumers or p["consumers"]:
                    for seed in range(seeds or p["seeds"]):
                        out.append(_spec(design, victim, watch, n, partitions or p["partitions"], p["rate"], seed))
    return out


def _spec(design: str, victim: str, watch: str | None, n: int, partitions: int, rate: float, seed: int
          ) -> TrialSpec:
    return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=STEPS, layout="spread",
                     variant=f"{victim}-watch-{watch}" if watch else victim,
                     overrides=(f"watch_broker_ids={watch}",) if watch else (),
                     params={"kill_coordinator": float(victim == "coordinator"),
                             "hold_s": HOLD_S.get(design, HOLD_S[None]), "return_hold_s": RETURN_HOLD_S},
                     converge_required=design not in CONVERGE_NOT_REQUIRED, converge_limit_s=90.0)


def per_change(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per change (the kill, the restart) of an ok trial, with its case: victim and, for the ZooKeeper
    era, how it watches /brokers/ids."""
    rows = summary[(summary.experiment == NAME) & (summary.status == "ok") & summary.change.isin(STEPS)]
    rows = rows.assign(victim=rows.variant.str.split("-").str[0],
                       watch=rows.variant.str.extract(r"watch-(\w+)$", expand=False).fillna(""))
    return rows[["design", "victim", "watch", "consumers", "trial", "change_index", "change", "generations",
                 "members_revoking", "partitions_revoked", "rebalance_attempts", "unowned_partition_s",
                 "unprocessed_partition_s", "processing_resumed_ms", "duplicates", "converged"]
                ].sort_values(["design", "victim", "watch", "trial", "change_index"])


def per_trial(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per ok trial: the kill's and the restart's rebalance rounds, members revoking, unowned and
    unprocessed partition-seconds summed, the time until processed again after each, and the duplicates."""
    rows = per_change(summary)
    if rows.empty:
        return rows.assign(**{c: [] for c in ("generations", "rebalances", "kill_generations", "restart_generations",
                                              "kill_revoking", "restart_revoking", "kill_rebalances",
                                              "restart_rebalances", "resumed_after_kill_ms",
                                              "resumed_after_restart_ms", "unprocessed_partition_s")})
    t = rows.groupby(["design", "victim", "watch", "consumers", "trial"], as_index=False).agg(
        generations=("generations", "sum"), rebalances=("rebalance_attempts", "sum"),
        members_revoking=("members_revoking", "max"),
        partitions_revoked=("partitions_revoked", "sum"), unowned_partition_s=("unowned_partition_s", "sum"),
        unprocessed_partition_s=("unprocessed_partition_s", "sum"), duplicates=("duplicates", "first"),
        all_converged=("converged", "all"))
    for change, prefix in (("broker_kill", "kill"), ("broker_restart", "restart")):
        one = rows[rows.change == change].set_index("trial")
        t[f"{prefix}_generations"] = t.trial.map(one.generations)
        t[f"{prefix}_revoking"] = t.trial.map(one.members_revoking)
        t[f"{prefix}_rebalances"] = t.trial.map(one.rebalance_attempts)
        t[f"resumed_after_{prefix}_ms"] = t.trial.map(one.processing_resumed_ms)
    return t


def findings(summary: pd.DataFrame) -> list[Finding]:
    """The findings about the cases (design, victim, watch) the run has trials of, ok or failed: a case left
    out of the run (the standard profile runs the variants with the coordinator as victim only) states nothing,
    and a case that ran and failed does not hold."""
    t = per_trial(summary)
    ran = set(summary[summary.experiment == NAME].variant + "/" + summary[summary.experiment == NAME].design)
    out = []
    for design in (d for d in FAMILIES if has_coordinator(d)):
        other = t[(t.design == design) & (t.victim == "other")]
        out.append(Finding(
            f"{design}-other-broker-no-rebalance",
            f"{_label(design)}: a broker that is not the group's coordinator dies and comes back, and no rebalance "
            "round begins and no member revokes anything (Kafka's test_broker_failure: \"Broker failure should "
            "not cause a rebalance\")",
            len(other) > 0 and bool(((other.generations == 0) & (other.members_revoking == 0)).all()),
            _evidence(other, ["generations", "members_revoking", "resumed_after_kill_ms"])))
        coord = t[(t.design == design) & (t.victim == "coordinator")]
        out.append(Finding(
            f"{design}-coordinator-moves-group-stays-stable",
            f"{_label(design)}: the group's coordinator dies; the next leader of its offsets partition loads the "
            "group Stable from the log, the members find it and heartbeat on in their generation: no rebalance "
            "round, no member revokes anything",
            len(coord) > 0 and bool(((coord.generations == 0) & (coord.members_revoking == 0)).all()),
            _evidence(coord, ["generations", "members_revoking", "resumed_after_kill_ms"])))
    for watch, every in (("always", True), ("when_empty", False)):
        legacy = t[(t.design == "zookeeper") & (t.watch == watch)]
        if every:  # its rounds are membership views, which a broker change does not change: count who rebalanced
            holds = bool(((legacy.kill_revoking == legacy.consumers) & (legacy.restart_revoking == legacy.consumers)
                          & (legacy.kill_rebalances >= legacy.consumers)
                          & (legacy.restart_rebalances >= legacy.consumers)).all())
            claim = ("ZooKeeper era, watching /brokers/ids always: the broker's death and its return each make "
                     "every consumer revoke everything and rebalance (a group-wide stop per broker change)")
        else:
            holds = bool(((legacy.generations == 0) & (legacy.members_revoking == 0)).all())
            claim = ("ZooKeeper era, watching /brokers/ids only when no broker is left (0.8.2.2's code): nobody "
                     "rebalances; the fetchers find the partitions' new leaders themselves")
        out.append(Finding(f"zookeeper-watch-{watch.replace('_', '-')}-broker-change", claim,
                           len(legacy) > 0 and holds,
                           _evidence(legacy, ["kill_revoking", "restart_revoking", "kill_rebalances",
                                              "resumed_after_kill_ms"])))
    for real in (d for d in CHURNED_REAL if FAMILIES[d].counterpart == "zookeeper"):
        rows = t[t.design == real]
        out.append(Finding(
            f"{real}-broker-change", f"{_label(real)}: a broker dies and comes back, and nobody rebalances (it "
            "watches /brokers/ids only when no broker is left); its fetchers find the partitions' new leaders "
            "themselves, as the lab's `zookeeper` design does watching `when_empty`",
            len(rows) > 0 and bool(((rows.kill_rebalances == 0) & (rows.restart_rebalances == 0)
                                    & (rows.members_revoking == 0)).all()),
            _evidence(rows, ["kill_revoking", "restart_revoking", "kill_rebalances", "resumed_after_kill_ms"])))
    out.append(Finding(
        "all-processing-resumes",
        "In every design every partition is processed again after the broker's death (its partitions' new "
        "leaders serve what the shared log holds), within the window the runner watched",
        len(t) > 0 and bool(t.resumed_after_kill_ms.notna().all() & t.resumed_after_restart_ms.notna().all()),
        "; ".join(f"{r.design} {r.victim}{'-' + r.watch if r.watch else ''}: {r.resumed_after_kill_ms:,.0f} ms"
                  for r in t.itertuples()) or "no successful trial"))
    return [f for f in of_designs_run(out, summary) if _case_of(f.id) is None or _case_of(f.id) in ran]


def _case_of(finding_id: str) -> str | None:
    """`variant/design` of the case a finding is about (None: about every case run)."""
    for victim in ("other", "coordinator"):
        for design in FAMILIES:
            stem = "other-broker-no-rebalance" if victim == "other" else "coordinator-moves-group-stays-stable"
            if finding_id == f"{design}-{stem}":
                return f"{victim}/{design}"
    if finding_id.removesuffix("-broker-change") in CHURNED_REAL:
        return f"other/{finding_id.removesuffix('-broker-change')}"
    if finding_id.startswith("zookeeper-watch-"):
        watch = finding_id.removeprefix("zookeeper-watch-").removesuffix("-broker-change").replace("-", "_")
        return f"other-watch-{watch}/zookeeper"
    return None


def _label(design: str) -> str:
    return FAMILIES[design].label


def _evidence(rows: pd.DataFrame, columns: list[str]) -> str:
    if rows.empty:
        return "no successful trial"
    return "; ".join(f"{r.trial}: " + ", ".join(f"{c} {getattr(r, c):,.0f}" for c in columns)
                     for r in rows.itertuples())


#: 1: a broker killed and restarted under a stable group, every design of the registry, both victims
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.broker_churn:broker_churn_section", keeps_timelines=True)
