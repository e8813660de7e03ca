"""The first-message experiment: how long after a consumer starts does it process its first message?

For each design: a stable group of N consumers on a topic a producer keeps
writing to (every partition always has messages waiting), then one more
consumer, `j1`, starts in its own process. `first_message_ms` is the time from
its `consumer_start` to its first processed record
(`experiments/metrics.py: first_messages`), repeated over seeds. What a
newcomer waits for, per design:

- ZooKeeper era: its registration, then its own rebalance, in which it claims
  owner znodes the previous owners must first release in theirs (a refused
  claim backs off `rebalance.backoff.ms`, 2 s by default, and retries:
  `legacy_zk/ownership.py`), then a fetch;
- coordinator era: FindCoordinator, then JoinGroup, which the coordinator
  answers only when every member has rejoined, each learning of the
  rebalance at its next heartbeat (`heartbeat.interval.ms`, 3 s), then
  SyncGroup, OffsetFetch and a fetch;
- the consumer protocol (`consumer-848`, KIP-848): FindCoordinator, then a
  ConsumerGroupHeartbeat with epoch 0, answered at once; its target share is
  still owned, so it is given each partition only once the owner, told at its
  next heartbeat (`group.consumer.heartbeat.interval.ms`, 5 s), has revoked
  it and said so; the newcomer hears of it at its own next heartbeat;
- RocketMQ: its route, a heartbeat to every broker (whose pushes wake the
  others at once), one rebalance from one broker's id list, the start offset
  from the queue's broker, then a pull: it waits for nobody, so it may
  process a queue before its previous owner has let it go (the herd's
  double-owned partition-seconds);
- TubeMQ's client balance: a group of N does not take an (N+1)th node, so
  its newcomer is a replacement: `c1` (node 0) departs, and `j1` starts with
  its `nodeId` (every node in its own process). It registers with the master,
  reads the partition metadata, registers its share at the brokers (released
  by `c1`'s shutdown) and fetches: nobody else acts;
- TubeMQ's server balance (`tubemq-server`): `j1` registers with the master
  and heartbeats it; the master's next balance tick (every
  `consumerBalancePeriodMs`, 30 s) plans its share, and the heartbeat answers
  carry the steps, one heartbeat (13 s) apart: the holders' DISCONNECTs,
  their reports that they are done, then `j1`'s CONNECT. The runner waits for
  the master's fixpoint (the loads even), not for every member to report:
  the members a tick does not move hear nothing.

The finding, checked by `findings()` (and by `pytest -m first_message`), is
stated with the run's medians; see its docstring.
"""

from __future__ import annotations

import pandas as pd

from experiments.engine.experiment import Experiment
from experiments.engine.families import with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec

NAME = "first_message"
QUESTION = "How long after a consumer starts does it process its first message, in each design?"
PROFILES = {
    "standard": {"consumers": [4], "partitions": 12, "rate": 5.0, "seeds": 3},
    "full": {"consumers": [4, 16], "partitions": 32, "rate": 5.0, "seeds": 5},
}
#: the lab's designs, then the real systems beside their counterparts (`real_systems/`): Kafka 0.8.2.2's own
#: consumer beside `zookeeper`, Kafka 4's KIP-848 groups beside `consumer-848`
DESIGNS = with_references(("zookeeper", "classic", "consumer-848", "rocketmq", "tubemq", "tubemq-server"))
#: TubeMQ's scenario: node 0 departs (its share then waits: the runner watches `TUBEMQ_WATCH_S`), and a
#: replacement takes its nodeId
TUBEMQ_STEPS = ("depart", "join")
TUBEMQ_WATCH_S = 5.0
#: TubeMQ's server balance: the master's next tick (up to `consumerBalancePeriodMs`, 30 s), then a heartbeat
#: (13 s) per step: the holders' DISCONNECTs, their reports, the newcomer's CONNECT; this limit leaves room
SERVER_BALANCE_LIMIT_S = 150.0


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [_spec(design, n, partitions or p["partitions"], p["rate"], seed)
            for design in designs for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]


def _spec(design: str, n: int, partitions: int, rate: float, seed: int) -> TrialSpec:
    if design == "tubemq":
        return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=TUBEMQ_STEPS, layout="spread",
                         member_overrides=("j1:nodeId=0",), converge_required=False,
                         converge_limit_s=TUBEMQ_WATCH_S)
    if design == "tubemq-server":
        return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=("join",),
                         converge_limit_s=SERVER_BALANCE_LIMIT_S)
    return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=("join",))


def per_design(summary: pd.DataFrame) -> pd.DataFrame:
    """design, N, trials, and the median, min and max of `first_message_ms` over the ok trials."""
    rows = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change == "join")]
    return (rows.groupby(["design", "consumers"], as_index=False)
            .agg(trials=("trial", "nunique"), median_ms=("first_message_ms", "median"),
                 min_ms=("first_message_ms", "min"), max_ms=("first_message_ms", "max")))


def findings(summary: pd.DataFrame) -> list[Finding]:
    """Every newcomer of every design gets a message; and the newcomer's wait, compared: a coordinator-era
    newcomer's JoinGroup is answered only when every member has rejoined (each learning of the rebalance at its
    next heartbeat), where a RocketMQ newcomer allocates its own share from the first id list it reads and
    pulls at once, without waiting for the previous owners to let go; and TubeMQ's two designs, compared: a
    client-balance node takes its share itself, where a server-balance consumer waits for the master's plan."""
    t = per_design(summary)
    medians = t.groupby("design").median_ms.median()
    fed = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change == "join")]
    every = len(fed) > 0 and bool(fed.first_message_ms.notna().all())
    evidence = ", ".join(f"{d} {v:,.0f} ms" for d, v in medians.items()) or "no successful trial"
    out = [Finding("all-newcomers-fed", "Every newcomer of every design processed a message after it joined",
                   every and set(medians.index) == set(fed.design), f"medians: {evidence}")]
    faster = {"classic", "rocketmq"} <= set(medians.index) and medians["rocketmq"] < medians["classic"]
    out.append(Finding("rocketmq-before-classic",
                       "A RocketMQ newcomer processes its first message sooner than a coordinator-era one: it "
                       "takes its share at once, without waiting for the previous owners to let go (a JoinGroup "
                       "is answered only when every member has rejoined)", bool(faster), f"medians: {evidence}"))
    client = {"tubemq", "tubemq-server"} <= set(medians.index) and medians["tubemq"] < medians["tubemq-server"]
    out.append(Finding("tubemq-client-before-server",
                       "A TubeMQ client-balance node processes its first message sooner than a server-balance "
                       "consumer, which waits for the master's next balance tick and then a heartbeat per step "
                       "(the holders' DISCONNECTs, their reports, its CONNECT): the seed text's reason for "
                       "client balance", bool(client), f"medians: {evidence}"))
    return of_designs_run(out, summary)


#: 1: the joiner's wait in the ZooKeeper era, the coordinator era and RocketMQ; 2: TubeMQ's replacement node;
#: 3: TubeMQ's server balance; 4: KIP-848's consumer protocol
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.first_message:first_message_section", version=4)
