"""The growth experiment: a topic's partitions grow under a stable group. How long until the new ones are consumed?

The Kafka source text lists five things that start a rebalance; the fifth is a
subscribed topic whose partition count changes. It is what KIP-848's most quoted
figure is about: ten consumers, a topic grown from 100 to 1,000 partitions,
settled in 5 s with the new protocol and 103 s with the classic one. Each design
learns of new partitions in its own way, and this experiment measures that
apart from the rebalance that follows.

For each design: a stable group of N consumers on P partitions that a producer
keeps writing to; then one `grow` step (`engine/steps.py`) doubles the topic,
as Kafka's `kafka-topics.sh --alter --partitions` does in the ZooKeeper era
(the topic's znode rewritten with the whole assignment). The lab's producer
writes to the new partitions at once, so every delay is the design's own. From
the traces (`experiments/metrics.py: growth`), separately:

- `learnt_ms`: the growth until some actor of the design first knew the new
  count (`partitions_seen`);
- `first_new_owned_ms`: until a consumer first owned a new partition;
- `new_processing_ms`: until every new partition had been processed;
- and the rebalance that followed: its rounds (`generations`), the partitions
  revoked, the control messages, the new partitions' unowned partition-seconds.

How each design learns, and the setting that decides it:

- ZooKeeper era: every consumer watches `/brokers/topics/<topic>`; the rewrite
  fires every watch at once and every consumer rebalances (the herd, again);
- the classic protocol (the lab's `classic`, kafka-python, librdkafka): only the
  group's leader checks the partition counts it assigned against its metadata,
  which it refreshes every `metadata.max.age.ms` (librdkafka:
  `topic.metadata.refresh.interval.ms`), 5 minutes by default; then it rejoins,
  and the whole group goes through an eager round;
- the consumer protocol (`consumer-848`): the coordinator reads the count from
  its broker's metadata at the next heartbeat of a member, bumps the group
  epoch and hands out the new targets in heartbeat answers
  (`group.consumer.heartbeat.interval.ms`, 5 s); nobody need give anything up;
- RocketMQ: each consumer refreshes its route every `pollNameServerInterval`
  (30 s), which only updates the queue set; the new queues are allocated at the
  next periodic rebalance (every 20 s);
- TubeMQ: the master refreshes the group's topic metadata in its periodic pass;
  a client-balance node re-reads it every `partMetaInfoCheckPeriodMs` and
  connects its hash share; the server balance hands the new partitions out at
  the master's next balance pass, delivered on heartbeats.

The standard profile is small (N=4, 8 to 16 partitions) and runs the classic
protocol's clients with a metadata refresh of 30 s, a tenth of the default, so
that a trial fits the profile's budget; the full profile runs the source text's
scale (10 consumers, 100 to 1,000 partitions) with every default.

The findings, checked by `findings()` (and by `pytest -m growth`), are stated
with the run's medians; see its docstring.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue.beside import Measure, beside
from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES, REFERENCES, real_designs, settings_of, with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "growth"
QUESTION = ("When a topic's partitions grow under a stable group, how long until the new ones are consumed, and "
            "how much of that is learning of them?")
#: the classic protocol's clients and the setting that paces their metadata refresh (5 minutes by default)
REFRESH = {"classic": "metadata.max.age.ms", "kafka-python": "metadata.max.age.ms",
           "librdkafka": "topic.metadata.refresh.interval.ms"}
PROFILES = {
    # the classic clients' refresh at 30 s instead of 300 s: a trial of the default would wait up to 5 minutes
    "standard": {"consumers": [4], "partitions": 8, "grow_to": 16, "rate": 2.0, "seeds": 1, "refresh_ms": 30000,
                 "limit_s": 150.0},
    # the source text's scale, every default
    "full": {"consumers": [10], "partitions": 100, "grow_to": 1000, "rate": 0.5, "seeds": 3, "refresh_ms": None,
             "limit_s": 420.0},
}
#: the lab's designs, the real Kafka clients, and the real systems beside their counterparts (`real_systems/`)
DESIGNS = with_references(("zookeeper", "classic", "consumer-848", "rocketmq", "tubemq", "tubemq-server",
                           "kafka-python", "librdkafka"))
#: a real system beside its counterpart: until every new partition was processed, within a quarter or 5 s. The
#: same periods pace both, from each consumer's start; what they cannot share is the phase of a heartbeat: a
#: KIP-848 group waits for the first heartbeat after the growth, then each member's next, up to two intervals
#: of 5 s (a first run of both: 6.9 s real, 4.6 s lab)
BESIDE = Measure("new_processing_ms", "every new partition processed, ms", 0.25, absolute=5000)
#: how long after the group is whole again the trial holds, so that the window sees the new partitions processed
HOLD_S = 2.0


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    start = partitions or p["partitions"]
    grow_to = p["grow_to"] * start // p["partitions"]
    return [_spec(design, n, start, grow_to, p, seed)
            for design in designs for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]


def _spec(design: str, n: int, partitions: int, grow_to: int, p: dict, seed: int) -> TrialSpec:
    refresh = REFRESH.get(settings_of(design))
    overrides = (f"{refresh}={p['refresh_ms']}",) if refresh and p["refresh_ms"] else ()
    return TrialSpec(NAME, design, n, partitions, rate=p["rate"], seed=seed, steps=("grow",), overrides=overrides,
                     params={"grow_to": float(grow_to), "hold_s": HOLD_S}, converge_limit_s=p["limit_s"])


def per_design(summary: pd.DataFrame) -> pd.DataFrame:
    """design, trials, and the medians of the growth's figures over the ok trials: learnt_ms, first_new_owned_ms,
    new_processing_ms, after_learning_ms (new_processing_ms - learnt_ms: the rebalance once the design knew),
    rebalance_attempts, generations, partitions_revoked, control_messages_per_change and new_unowned_partition_s."""
    rows = _grows(summary).assign(after_learning_ms=lambda t: t.new_processing_ms - t.learnt_ms)
    columns = ["learnt_ms", "first_new_owned_ms", "new_processing_ms", "after_learning_ms", "rebalance_attempts",
               "generations", "partitions_revoked", "control_messages_per_change", "new_unowned_partition_s"]
    out = rows.groupby("design", as_index=False).agg(trials=("trial", "nunique"),
                                                     **{c: (c, "median") for c in columns})
    return out


def _grows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change == "grow")]


def findings(summary: pd.DataFrame) -> list[Finding]:
    """Every design consumes every new partition; the ZooKeeper era learns at once and every member rebalances
    (the herd); the consumer protocol hands the new partitions out without anyone revoking one; and where a
    member learns on a period (the classic protocol's metadata refresh, RocketMQ's route refresh, TubeMQ's
    metadata check), learning is most of the wait: the protocol's own round, once it knows, is the smaller part."""
    grows = _grows(summary)
    t = per_design(summary).set_index("design")
    out = []
    every = len(grows) > 0 and bool(grows.converged.all()) and bool(grows.new_processing_ms.notna().all())
    slowest = ", ".join(f"{d} {v / 1000:.1f} s" for d, v in t.new_processing_ms.dropna().items()) or "no trial"
    out.append(Finding("all-grow-new-partitions-consumed",
                       "Every design's group came to own every new partition once and processed each",
                       every and set(grows.design) == set(summary[summary.experiment == NAME].design),
                       f"medians until every new partition was processed: {slowest}"))
    soonest = t.first_new_owned_ms.dropna()
    for design in [d for d in ("zookeeper", *REFERENCES.get("zookeeper", ())) if d in t.index]:
        zk = grows[grows.design == design]
        herd = bool((zk.members_revoking == zk.consumers).all() and (zk.rebalance_attempts >= zk.consumers).all())
        others = soonest.drop(["zookeeper", *REFERENCES.get("zookeeper", ())], errors="ignore")
        first = others.empty or soonest.get(design, float("inf")) < others.min()
        out.append(Finding(f"{design}-grow-herd",
                           f"{FAMILIES[design].label}: every consumer's topic watch fires at once, so a new partition "
                           "is owned sooner than in any later design, and every member revokes everything and "
                           "rebalances", herd and first,
                           f"members revoking {_values(zk.members_revoking)} of N {_values(zk.consumers)}; "
                           f"rebalance attempts {_values(zk.rebalance_attempts)}; a new partition owned after "
                           f"{soonest.get(design, float('nan')):,.0f} ms (median; the soonest of the other designs: "
                           f"{others.min() if not others.empty else float('nan'):,.0f} ms)"))
    for design in [d for d in ("consumer-848", *REFERENCES.get("consumer-848", ())) if d in t.index]:
        kip = grows[grows.design == design]
        out.append(Finding(f"{design}-grow-nobody-revokes",
                           f"{FAMILIES[design].label}: the coordinator learns of the new partitions itself and hands "
                           "them out on heartbeats; no member revokes a partition",
                           bool((kip.partitions_revoked == 0).all() and kip.new_processing_ms.notna().all()),
                           f"partitions revoked {_values(kip.partitions_revoked)}; the coordinator learnt after "
                           f"{_values(kip.learnt_ms, ' ms')}, all processed after "
                           f"{_values(kip.new_processing_ms, ' ms')}"))
    periodic = [d for d in ("classic", "rocketmq", "tubemq") if d in t.index]
    for design in periodic:
        row = t.loc[design]
        holds = bool(row.learnt_ms > row.after_learning_ms)
        out.append(Finding(f"{design}-grow-learning-decides",
                           f"{design} learns of new partitions on a period, and learning is most of its wait: once "
                           "it knows, its rebalance takes less than the time it took to learn",
                           holds, f"learnt after {row.learnt_ms:,.0f} ms, then {row.after_learning_ms:,.0f} ms "
                                  "until every new partition was processed (medians)"))
    # each real system beside its lab counterpart: the same wait, whatever paces it (a period, a watch)
    for real in real_designs(tuple(t.index)):
        out.append(beside(summary, NAME, real, "grow", (BESIDE,), at_least=1))
    return of_designs_run(out, summary)


def _values(column: pd.Series, unit: str = "") -> str:
    return " ".join(f"{v:,.0f}{unit}" if pd.notna(v) else "-" for v in column) or "-"


#: 1: a topic grown under a stable group, every design
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.growth:growth_section", version=1,
                        full_section="experiments.report.growth:growth_full_section")
