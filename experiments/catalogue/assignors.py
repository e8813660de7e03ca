"""The assignors experiment: how many partitions does each assignment strategy move at a join or a leave?

Two parts, kept apart as the lab keeps experiments, results and figures apart:

- **Computed** (`assignors_replay.py`, no cluster): every strategy of the lab
  replayed over one fixed sequence of membership changes (3 members, then
  join, join, depart of the oldest, leave, join) on one topic of 12
  partitions and on three topics of 4: Kafka's leader-side assignors
  (`lab_cluster.assignment.ASSIGNORS`: range, round-robin, sticky,
  cooperative-sticky), Kafka 0.8's and RocketMQ's client-side shares, and
  TubeMQ's modulo and its master's balancer. Per change: partitions moved
  (and the fewest any balanced assignment moves), the spread of loads, what
  was revoked, what cooperative-sticky withheld, and rounds. `run` stores the
  tables in the run (`computed/assignors/`); the findings and the report read
  them there.
- **Real** (`grid`): one trial per leader-side assignor, the same sequence on the one-topic scenario (`classic` with
  `partition.assignment.strategy=<assignor>`, every consumer in its own
  process, since `depart` stops `c1` alone), measured from the traces
  (`metrics.py`: `partitions_moved`, `partitions_spread`), so that what the
  real group did is compared with what the replay says it must do.

The client picks its rebalance protocol from the assignor
(`modern_coord/consumer.py`: `rebalance_protocol`), so the `cooperative-sticky`
trial is cooperative: its members keep their partitions through the
rebalance, revoke what the first round withheld and rejoin.

The findings, checked by `findings()` (and `pytest -m assignors`), are
stated with the stored numbers; see its docstring.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import assignors_replay as replay
from experiments.engine.experiment import Experiment
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec
from lab_cluster.assignment import ASSIGNORS

NAME = "assignors"
QUESTION = ("How many partitions does each assignment strategy move at each join and leave, how even are the "
            "loads it leaves, and what does cooperative-sticky withhold?")
DESIGNS = ("classic",)
#: the leader-side assignors with a real trial: every built-in one (the client speaks the eager and cooperative
#: protocols) and every user's assignor the replay runs (`assignors_replay.PLUG_INS`: the weighted example)
REAL_ASSIGNORS = (*ASSIGNORS, *replay.PLUG_INS)
#: the computed scenario the real trials run (one topic `t`, as a trial's)
TRIAL_SCENARIO = "one-topic"
PROFILES = {
    "standard": {"consumers": [replay.START], "partitions": 12, "rate": 2.0, "seeds": 1},
    "full": {"consumers": [replay.START], "partitions": 12, "rate": 2.0, "seeds": 3},
}
#: the leader-side assignors the findings compare (Kafka's names)
EAGER_RESHUFFLERS = ("range", "roundrobin")
STICKY = ("sticky", "cooperative-sticky")
#: the assignors whose result is a function of the sorted member ids alone (in a trial as in the replay)
ORDER_DECIDED = ("range", "roundrobin", "weighted")
WEIGHTED = "weighted"


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None,
         assignors: tuple[str, ...] = REAL_ASSIGNORS, steps: tuple[str, ...] = replay.SEQUENCE) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [TrialSpec(NAME, design, n, partitions or p["partitions"], rate=p["rate"], seed=seed, steps=steps,
                      overrides=(f"partition.assignment.strategy={_strategy(assignor)}",),
                      member_overrides=_member_settings(assignor), variant=assignor, layout="spread")
            for design in designs for assignor in assignors for n in (consumers or p["consumers"])
            for seed in range(seeds or p["seeds"])]


def _strategy(assignor: str) -> str:
    """What a trial's consumers name in `partition.assignment.strategy`: a user's assignor by its class."""
    return replay.PLUG_INS[assignor][0] if assignor in replay.PLUG_INS else assignor


def _member_settings(assignor: str) -> tuple[str, ...]:
    """A user's assignor's own settings per member (`c2:weighted.assignor.weight=3`), as the replay gives them."""
    members = replay.PLUG_INS[assignor][1] if assignor in replay.PLUG_INS else {}
    return tuple(f"{m}:{k}={v}" for m, settings in members.items() for k, v in settings.items())


def compute(profile: str = "standard") -> dict[str, pd.DataFrame]:
    """The computed part, stored in the run: `changes` and `assignments` (`assignors_replay.replay`)."""
    return replay.replay(profile)


def totals(changes: pd.DataFrame) -> pd.DataFrame:
    """Per scenario and strategy, over the sequence: moved, fewest, handed over, revoked, withheld, the largest
    spread, the farthest a load was from its share and the most rounds (the start, step 0, left out: it moves
    nothing anyone held)."""
    rows = changes[changes.step > 0]
    if "off_share" not in rows:  # a run stored before the replay had it
        rows = rows.assign(off_share=float("nan"))
    return (rows.groupby(["scenario", "strategy"], sort=False, as_index=False)
            .agg(side=("side", "first"), protocol=("protocol", "first"), moved=("moved", "sum"),
                 fewest=("fewest", "sum"), handed_over=("handed_over", "sum"), revoked=("revoked", "sum"),
                 withheld=("withheld", "sum"), spread=("spread", "max"), off_share=("off_share", "max"),
                 rounds=("rounds", "max")))


def fewest_for(partitions: int, members_before: int, members_after: int, leaver_held: float | None) -> int | None:
    """The fewest partitions a change can move in a real group whose loads were as even as they can be before it
    (what every assignor here leaves on one topic): `partitions` over `members_before`, less the leaver's load
    (`member_partitions`) for a leave or a departure. None if the leaver's load cannot be one of those loads."""
    low, extra = divmod(partitions, members_before)
    loads = [low + 1] * extra + [low] * (members_before - extra)
    if members_after < members_before:
        if leaver_held is None or pd.isna(leaver_held) or int(leaver_held) not in loads:
            return None
        loads.remove(int(leaver_held))
    return replay.fewest_moves(loads + [0] * (members_after - len(loads)), partitions)


def real_vs_computed(summary: pd.DataFrame, changes: pd.DataFrame) -> pd.DataFrame:
    """Per real change (ok trials, every seed): the trial's moved partitions and spread beside the replay's of the
    same assignor and change, on the trials of the computed scenario's group size and partitions, with the
    fewest the change could move from the real group's own loads (`fewest_for`)."""
    computed = changes[changes.scenario == TRIAL_SCENARIO]
    start = computed[computed.step == 0].members.iloc[0] if not computed.empty else None
    ok = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.consumers == start)
                 & (summary.partitions == 12)]
    real = ok[["variant", "seed", "change_index", "change", "partitions_moved", "partitions_spread"]].rename(
        columns={"variant": "strategy", "change_index": "step"})
    real["real_fewest"] = [fewest_for(int(r.partitions), int(r.members_before), int(r.members_after),
                                      r.member_partitions) if r.variant not in replay.PLUG_INS else None
                           for r in ok.itertuples()]  # (even loads: not a weighted assignor's)
    return real.merge(computed[["strategy", "step", "change", "moved", "spread"]].rename(
        columns={"change": "computed_change"}), on=["strategy", "step"], how="left")


def findings(summary: pd.DataFrame, computed: dict[str, pd.DataFrame]) -> list[Finding]:
    """On the stored replay: the sticky assignors move the fewest partitions any balanced assignment can, where
    range and round-robin move more; cooperative-sticky withholds exactly what one staying member hands another,
    gives it out in a second round and never gives a partition another member still holds; range (and RocketMQ's
    per-topic strategies) leave loads three apart with three topics, where round-robin and the sticky assignors
    keep them within one; every strategy in which members compute their own shares moves more than sticky. On
    the real trials: range and round-robin moved at each change what the replay says, sticky the fewest its own
    loads allowed, and each left the same spread."""
    changes = computed.get("changes")
    if changes is None or changes.empty:
        return [Finding("classic-sticky-moves-fewest", "The run stored the computed replay", False,
                        "no computed/assignors/changes.csv in the run")]
    steps = changes[changes.step > 0]
    t = totals(changes).set_index(["scenario", "strategy"])

    def total(strategy: str) -> str:
        return ", ".join(f"{s} {int(t.loc[(s, strategy), 'moved'])}" for s in replay.SCENARIOS
                         if (s, strategy) in t.index)

    sticky = steps[steps.strategy.isin(STICKY)]
    fewest = (not sticky.empty and set(STICKY) <= set(sticky.strategy)
              and bool((sticky.moved == sticky.fewest).all())
              and all(t.loc[(s, r), "moved"] > t.loc[(s, "sticky"), "moved"]
                      for s in replay.SCENARIOS for r in EAGER_RESHUFFLERS))
    out = [Finding("classic-sticky-moves-fewest",
                   "Over the sequence, sticky and cooperative-sticky move at every change exactly the fewest "
                   "partitions any assignment with loads at most one apart can move; range and round-robin move "
                   "more, since a member's range or turn shifts whenever one before it comes or goes",
                   fewest, "partitions moved in the 5 changes (one topic, three topics): fewest possible "
                   f"{', '.join(str(int(t.loc[(s, 'sticky'), 'fewest'])) for s in replay.SCENARIOS)}; "
                   + "; ".join(f"{r} {total(r)}" for r in (*STICKY, *EAGER_RESHUFFLERS)))]
    coop = steps[steps.protocol == "cooperative"]
    eager = steps[(steps.side == "leader") & (steps.protocol == "eager")]
    withholds = (not coop.empty and bool((coop.withheld == coop.handed_over).all())
                 and bool((coop.taken_while_owned == 0).all()) and bool((coop.revoked == coop.withheld).all())
                 and bool((coop.rounds == (coop.withheld > 0).map({True: 2, False: 1})).all())
                 and int(coop.withheld.sum()) > 0 and bool((eager.revoked > coop.revoked.max()).all()))
    out.append(Finding("classic-cooperative-withholds-handed-over",
                       "cooperative-sticky withholds in a change's first round exactly the partitions one staying "
                       "member hands another, gives them out in a second round, never gives a partition while "
                       "another member still holds it, and revokes only those; an eager assignor's members revoke "
                       "everything they hold at every change",
                       withholds, f"cooperative-sticky withheld {int(coop.withheld.sum())} partitions and revoked "
                       f"{int(coop.revoked.sum())} over {len(coop)} changes ({int((coop.rounds == 2).sum())} took "
                       f"two rounds), gave {int(coop.taken_while_owned.sum())} while held; the eager assignors' "
                       f"members revoked {int(eager.revoked.min()) if not eager.empty else 0} to "
                       f"{int(eager.revoked.max()) if not eager.empty else 0} per change"))
    spread = steps.groupby(["scenario", "strategy"]).spread.max()
    even = ("roundrobin", *STICKY)
    skew = (("three-topics", "range") in spread.index and spread[("three-topics", "range")] >= 2
            and spread[(TRIAL_SCENARIO, "range")] <= 1
            and all(spread[(s, r)] <= 1 for s in replay.SCENARIOS for r in even))
    out.append(Finding("classic-range-skews-topics",
                       "With three topics, range leaves one member several partitions more than another (each topic's "
                       "remainder goes to the same first members), where round-robin and the sticky assignors keep "
                       "every load within one of the others; with one topic, range is even too",
                       bool(skew), "largest spread over the sequence (three topics / one topic): "
                       + "; ".join(f"{r} {int(spread.get(('three-topics', r), -1))}/"
                                   f"{int(spread.get((TRIAL_SCENARIO, r), -1))}"
                                   for r in ("range", *even, "rocketmq-averagely", "rocketmq-averagely-by-circle")
                                   if ("three-topics", r) in spread.index)))
    clients = t[t.side != "leader"].reset_index()
    more = not clients.empty and all(row.moved > t.loc[(row.scenario, "sticky"), "moved"]
                                     for row in clients.itertuples())
    out.append(Finding("all-own-shares-move-more",
                       "Every strategy without a leader moves more partitions over the sequence than sticky: a member "
                       "computing its own share from the sorted membership (Kafka 0.8, RocketMQ) or its node id "
                       "(TubeMQ's modulo) cannot know what the others held, and TubeMQ's master hands a departed "
                       "member's partitions to members picked at random before it evens the loads",
                       bool(more), "; ".join(f"{r.strategy} {int(r.moved)}" for r in clients.itertuples()
                                             if r.scenario == TRIAL_SCENARIO)
                       + f" (one topic; sticky {int(t.loc[(TRIAL_SCENARIO, 'sticky'), 'moved'])})"))
    if WEIGHTED in set(steps.strategy):  # a run stored before the replay had the example judges nothing of it
        out.append(_weighted_finding(steps, computed.get("assignments")))
    both = real_vs_computed(summary, changes)
    ordered, sticky_real = both[both.strategy.isin(ORDER_DECIDED)], both[both.strategy.isin(STICKY)]
    same = (not both.empty and bool(both.moved.notna().all())
            and bool((both.computed_change.str.split().str[0] == both.change).all())
            and bool((ordered.partitions_moved == ordered.moved).all())
            and bool((sticky_real.partitions_moved == sticky_real.real_fewest).all())
            and bool((both.partitions_spread == both.spread).all()))
    per = both.groupby("strategy").agg(real=("partitions_moved", "sum"), computed=("moved", "sum"),
                                       fewest=("real_fewest", lambda f: f.sum(min_count=1)))  # none: a weighted one
    out.append(Finding("classic-real-moves-as-computed",
                       "In the real group, range"
                       + (", round-robin and the weighted example" if WEIGHTED in set(both.strategy)
                          else " and round-robin") + " moved at every change exactly the partitions the replay "
                       "computes (the members' `client.id-UUID` order decides them"
                       + (", and the weights crossed the wire in the members' user data"
                          if WEIGHTED in set(both.strategy) else "") + "), sticky moved the fewest "
                       "its members' own loads allowed (which members hold one more follows Java's hash order of "
                       "the ids, random UUIDs in a trial), and every change left the loads spread as the replay's did",
                       bool(same), "moved over the sequence, real/computed (fewest for the real loads): "
                       + ("; ".join(f"{s} {int(r.real)}/{int(r.computed)} "
                                    f"({int(r.fewest) if pd.notna(r.fewest) else '–'})"
                                    for s, r in per.iterrows()) or "no ok trial of the computed scenario")))
    return of_designs_run(out, summary)


def _weighted_finding(steps: pd.DataFrame, assignments: pd.DataFrame | None) -> Finding:
    own = steps[steps.strategy == WEIGHTED]
    one = own[own.scenario == TRIAL_SCENARIO]
    heavy = (assignments[(assignments.strategy == WEIGHTED) & (assignments.weight > 1)]
             if assignments is not None and "weight" in assignments else pd.DataFrame())
    holds = (not own.empty and set(own.scenario) == set(replay.SCENARIOS) and bool((own.off_share < 1).all())
             and int(own.moved.sum()) > int(own.fewest.sum()) and not heavy.empty)
    loads = (" ".join(str(len(p.split())) for p in heavy[heavy.scenario == TRIAL_SCENARIO].partitions)
             if not heavy.empty else "none")
    return Finding("classic-weighted-keeps-shares",
                   "The weighted example, a user's assignor that reads each member's weight from its user data, "
                   "keeps every member within one partition of its weighted share at every change, with one topic "
                   "and with three; remembering nothing of who held what, it moves more partitions than the fewest "
                   "those shares allow, as range does for even shares",
                   bool(holds), (f"largest distance from a share {own.off_share.max():.2f} partitions; moved "
                                 f"{int(one.moved.sum())} over the sequence ({TRIAL_SCENARIO}) where "
                                 f"{int(one.fewest.sum())} would do; the member of weight "
                                 f"{', '.join(map(str, sorted(set(replay.WEIGHTS.values()))))} held {loads} of 12 "
                                 "after each step") if not own.empty else "no weighted replay in the run")


#: 1: the replay of every strategy, and a real trial per leader-side assignor
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.assignors:assignors_section", compute=compute)
