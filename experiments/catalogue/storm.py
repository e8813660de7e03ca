"""The storm experiment: a rolling restart of the whole group, as an operator's deploy does it.

For each design: a stable group `c1..cN` (each consumer in its own process) on
a topic a producer keeps writing to; then N `restart` steps (`engine/steps.py`):
the k-th stops `c<k>` gracefully (its family's close), waits `restart_down_s`
(the deploy's time between stopping an instance and starting the new one) and
starts it again under the same name and config. A careful deploy takes the next
instance down only when the last one is ready: the runner waits for the group
to converge after each restart, then `settle_s` and `restart_gap_s`, so "a
configurable gap apart" is convergence plus that gap, not a fixed period.

Each restart is one change window; per restart and in total the metrics
(`experiments/metrics.py`) give the rebalance rounds (`generations`), the
members other than the restarted one that revoked anything
(`members_revoking`), unowned and double-processed partition-seconds,
duplicates, and the time until the group is stable after the last restart
(`convergence_ms` of the last window). What each design pays, per restart:

- ZooKeeper era: the stop closes the consumer's session, its registration
  goes, every member's watch fires and every member releases everything and
  rebalances (0.8's `syncedRebalance`: `legacy_zk/consumer.py`); the start
  registers it again, and all do it again: a group-wide stop, twice over;
- coordinator era, eager (`classic`): the stop sends LeaveGroup, the start
  JoinGroup; each makes the coordinator begin a rebalance in which every member
  revokes all it owns before rejoining (`modern_coord/consumer.py:
  _rebalance`): a group-wide stop per restart;
- static membership (`classic-static`, KIP-345): a static member sends no
  LeaveGroup, and comes back under its `group.instance.id` within
  `session.timeout.ms`; the coordinator hands it its old member's place,
  generation and partitions (`modern_coord/coordinator/`), and nobody else
  hears anything: no rebalance, no revocation. The price is the restarted
  member's own partitions, unowned while it is down. This is what Kafka's own
  system test asserts (`test_static_consumer_bounce`, in
  `tests/kafkatest/tests/client/consumer_test.py`: no rebalance while the
  static members bounce);
- cooperative (`classic-coop`, KIP-429): every member still rejoins, but keeps
  what it owns through the rebalance and revokes only what moves
  (`cooperative-sticky`), in a second round: more rounds, fewer stops;
- the consumer protocol (`consumer-848`, KIP-848): the stop leaves with epoch
  -1 and its partitions are free at once; the others are given them at their
  next heartbeat, revoking nothing. The start joins with epoch 0; the
  coordinator moves its share from the others, each of which revokes only the
  partitions it hands over, and the newcomer gets each one once its owner has
  acknowledged the release: no barrier, no round the whole group waits for
  (`modern_coord/coordinator/consumer_protocol.py`, `modern_coord/kip848_consumer.py`);
- RocketMQ: the brokers push NOTIFY_CONSUMER_IDS_CHANGED at the stop and at the
  start, and every member re-splits the queues itself
  (`rocketmq_client/rebalance.py`), dropping only the queues that move;
- TubeMQ's client balance: no membership, so nobody else acts at all; the
  restarted node's share waits for it. The runner cannot hear the group
  converge (the others say nothing new), so it watches each restart for
  `TUBEMQ_WATCH_S` (`converge_required=False`, as the first-message
  experiment does) and the analysis judges from the traces whether every
  partition had exactly one owner at the window's end (`converged`);
- TubeMQ's server balance: the master sees the node go and come back, and
  moves partitions at its next balance tick (30 s), one heartbeat (13 s) per step;
- the real Kafka clients (kafka-python, librdkafka; `kafka_clients/`) on the
  same coordinator as `classic`, with their own defaults and the range
  assignor: their `close()` sends LeaveGroup and their start JoinGroup, so
  they are checked for the eager protocol's group-wide stop as the lab's
  consumer is.
"""

from __future__ import annotations

import pandas as pd

from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES, REFERENCES, real_designs, with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "storm"
QUESTION = ("A rolling restart of the whole group, as an operator's deploy does it: what does each design pay per "
            "restart (rebalances, members that stop, partitions left idle or processed twice), and in total?")
PROFILES = {
    "standard": {"consumers": [4], "partitions": 12, "rate": 5.0, "seeds": 1},
    "full": {"consumers": [4, 8], "partitions": 24, "rate": 5.0, "seeds": 3},
}
#: the lab's designs, then the real systems beside them (`Family.counterpart`)
DESIGNS = with_references(("zookeeper", "classic", "classic-static", "classic-coop", "classic-static-coop",
                           "consumer-848", "rocketmq", "tubemq", "tubemq-server", "kafka-python", "librdkafka"))
#: every member stops for every rebalance: the ZooKeeper era, and the coordinator era's eager protocol, the lab's
#: consumer and the real clients (kafka-python, librdkafka: range, their default here) on the same coordinator
EAGER = with_references(("zookeeper", "classic", "kafka-python", "librdkafka"))
STATIC = ("classic-static", "classic-static-coop")
COOPERATIVE = ("classic-coop", "classic-static-coop")
#: the deploy: each instance down 4 s between its stop and its start (its new process's start takes seconds), and
#: 2 s after the group is ready again before the next. 4 s is more than a heartbeat interval (3 s): the coordinator
#: era's members have all heard of the leave and rebalanced without the member before it comes back, so a restart
#: is two rebalances there, as in the ZooKeeper era. (Down 1 s, its JoinGroup usually arrives within the rebalance
#: its LeaveGroup began, and the two merge into one: the eager protocol pays one group-wide stop per restart, and
#: the cooperative one hands the returning member its own orphaned partitions, nobody revoking anything.)
PARAMS = {"restart_down_s": 4.0, "restart_gap_s": 2.0}
#: TubeMQ's client balance: nobody but the restarted node acts, so the runner watches each restart this long
#: (the node registers with the master, reads the metadata and registers its share in well under a second)
TUBEMQ_WATCH_S = 6.0
#: TubeMQ's server balance: the master's next tick (up to 30 s), then a heartbeat (13 s) per step
SERVER_BALANCE_LIMIT_S = 150.0


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [_spec(design, n, partitions or p["partitions"], p["rate"], seed)
            for design in designs for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]


def _spec(design: str, n: int, partitions: int, rate: float, seed: int) -> TrialSpec:
    steps = ("restart",) * n
    if design == "tubemq":
        return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=steps, layout="spread",
                         params=PARAMS, converge_required=False, converge_limit_s=TUBEMQ_WATCH_S)
    limit = SERVER_BALANCE_LIMIT_S if design == "tubemq-server" else 90.0
    return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=steps, layout="spread", params=PARAMS,
                     converge_limit_s=limit)


def per_restart(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per restart of an ok trial: the design, which consumer, and what that restart cost."""
    rows = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change == "restart")]
    rows = rows.assign(restarted=rows.change_index.map(lambda k: f"c{int(k)}"))
    return rows[["design", "consumers", "trial", "change_index", "restarted", "generations", "members_revoking",
                 "partitions_revoked", "rebalance_attempts", "unowned_partition_s", "double_processed_partition_s",
                 "converged", "convergence_ms"]].sort_values(["design", "trial", "change_index"])


def per_trial(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per ok trial: the rolling restart's totals, the most members one restart stopped, and the time
    until stable after the last restart (the last window's convergence)."""
    rows = per_restart(summary)
    last = rows.sort_values("change_index").groupby("trial").tail(1).set_index("trial")
    t = rows.groupby(["design", "consumers", "trial"], as_index=False).agg(
        restarts=("change_index", "count"), generations=("generations", "sum"),
        members_revoking=("members_revoking", "sum"), most_revoking=("members_revoking", "max"),
        partitions_revoked=("partitions_revoked", "sum"),
        unowned_partition_s=("unowned_partition_s", "sum"),
        double_processed_partition_s=("double_processed_partition_s", "sum"),
        all_converged=("converged", "all"))
    t["stable_after_last_ms"] = t.trial.map(last.convergence_ms)
    dups = summary.drop_duplicates("trial").set_index("trial").duplicates
    t["duplicates"] = t.trial.map(dups)
    return t


def findings(summary: pd.DataFrame) -> list[Finding]:
    t = per_trial(summary)
    r = per_restart(summary)
    out = []
    for design in STATIC:
        s = r[r.design == design]
        out.append(Finding(
            f"{design}-bounce-no-rebalance",
            f"{_label(design)}: while each member restarts within its session timeout, no live member revokes "
            "anything and no rebalance round begins (Kafka's test_static_consumer_bounce)",
            len(s) > 0 and bool(((s.members_revoking == 0) & (s.generations == 0)).all()),
            _evidence(s, ["members_revoking", "generations"])))
    for design in EAGER:
        e = r[r.design == design]
        out.append(Finding(
            f"{design}-restart-stops-everyone",
            f"{_label(design)}: every restart makes every other member revoke its partitions (a group-wide stop "
            "per restart)", len(e) > 0 and bool((e.members_revoking == e.consumers - 1).all()),
            _evidence(e, ["members_revoking", "generations"])))
    static = t[t.design.isin(STATIC)]
    # rounds are membership views where members compute (`metrics.rebalance_rounds`): Kafka 0.8.2.2's own
    # consumer reads the membership without its version (no cversion in its log), so its rounds are not measured
    for design in (d for d in EAGER if FAMILIES[d].counterpart != "zookeeper"):
        e = t[t.design == design]
        out.append(Finding(
            f"{design}-more-rounds-than-static",
            f"{_label(design)} goes through more rebalance rounds in the rolling restart than static membership",
            len(e) > 0 and len(static) > 0 and e.generations.min() > static.generations.max(),
            _evidence(pd.concat([e, static]), ["generations"])))
    coop, eager = t[t.design == "classic-coop"], t[t.design == "classic"]
    both = len(coop) > 0 and len(eager) > 0
    out.append(Finding(
        "classic-coop-revokes-only-moving",
        "Cooperative: the live members revoke only the partitions that move, far fewer than the eager coordinator "
        "era's, which revokes everything at every rebalance; what they keep is processed throughout",
        both and coop.partitions_revoked.max() * 2 < eager.partitions_revoked.min(),
        _evidence(pd.concat([coop, eager]), ["partitions_revoked", "members_revoking"])))
    out.append(Finding(
        "classic-coop-more-rounds",
        "Cooperative pays in rounds: the partitions withheld from their new owner go out in one more rebalance, "
        "so the rolling restart takes more rounds than the eager protocol's",
        both and coop.generations.min() > eager.generations.max(),
        _evidence(pd.concat([coop, eager]), ["generations"])))
    for design in ("consumer-848", *REFERENCES.get("consumer-848", ())):
        kip848 = t[t.design == design]
        both = len(kip848) > 0 and len(eager) > 0
        out.append(Finding(
            f"{design}-revokes-only-moving",
            f"{_label(design) if design != 'consumer-848' else 'Consumer protocol (KIP-848)'}: the live members "
            "revoke only the partitions they hand over, far fewer than the eager coordinator era's, and no member "
            "waits for a group-wide round",
            both and kip848.partitions_revoked.max() * 2 < eager.partitions_revoked.min(),
            _evidence(pd.concat([kip848, eager]), ["partitions_revoked", "members_revoking"])))
    # the real systems are judged on their counterpart's finding, not ranked among the lab's designs
    lab_others = t[(t.design != "rocketmq") & ~t.design.isin(real_designs(DESIGNS))]
    for design in ("rocketmq", *REFERENCES.get("rocketmq", ())):
        rocket = t[t.design == design]
        out.append(Finding(
            f"{design}-fewest-unowned",
            f"{'RocketMQ' if design == 'rocketmq' else _label(design)}: nobody waits for a coordinator (every member "
            "re-splits the queues as soon as a broker pushes the change), so its rolling restart leaves fewer "
            "partition-seconds unowned than any other design's of the lab's",
            len(rocket) > 0 and len(lab_others) > 0
            and rocket.unowned_partition_s.max() < lab_others.unowned_partition_s.min(),
            _evidence(pd.concat([rocket, lab_others]), ["unowned_partition_s", "duplicates"])))
    server, rest = r[r.design == "tubemq-server"], r[r.design != "tubemq-server"]
    out.append(Finding(
        "tubemq-server-slowest",
        "TubeMQ's server balance: every restart waits for the master's balance ticks (30 s apart) and a heartbeat "
        "(13 s) per step, so each takes longer to converge than any restart of any other design",
        len(server) > 0 and len(rest) > 0 and server.convergence_ms.min() > rest.convergence_ms.max(),
        _evidence(server, ["convergence_ms", "generations"])))
    tube = r[r.design == "tubemq"]
    out.append(Finding(
        "tubemq-restart-alone",
        "TubeMQ's client balance: nobody but the restarted node acts (no other node revokes, no round), and "
        "each restart ends with every partition held once",
        len(tube) > 0 and bool(((tube.members_revoking == 0) & (tube.generations == 0) & tube.converged).all()),
        _evidence(tube, ["members_revoking", "generations", "converged"])))
    out.append(Finding(
        "all-stable-after-storm", "Every design's group is stable again after the last restart (every partition "
                                  "held once among the members)",
        len(t) > 0 and bool(t.all_converged.all()),
        "; ".join(f"{row.design}: {row.stable_after_last_ms:,.0f} ms" for row in t.itertuples())
        or "no successful trial"))
    return of_designs_run(out, summary)


def _label(design: str) -> str:
    return FAMILIES[design].label


def _evidence(rows: pd.DataFrame, columns: list[str]) -> str:
    if rows.empty:
        return "no successful trial"
    if "change_index" in rows:
        return "; ".join(f"{design}: " + ", ".join(f"{c} {rows[rows.design == design][c].tolist()}"
                                                   for c in columns) for design in dict.fromkeys(rows.design))
    return "; ".join(f"{r.trial}: " + ", ".join(f"{c} {getattr(r, c):,.3g}" for c in columns)
                     for r in rows.itertuples())


#: 1: a rolling restart of N, every design of the registry (its static and cooperative variants among them);
#: 2: KIP-848's consumer protocol among them
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.storm:storm_section", keeps_timelines=True, version=2)
