"""The soak experiment: a stable group under a seeded random mix of every fault the lab has, and invariants.

The other experiments script one fault at a time. Here a nemesis draws a
sequence of faults from every step the lab has (`engine/steps.py`), seeded, so
that a trial is replayed exactly from its seed (`nemesis(seed, length,
design)`); the runner takes them one after another under a steady producer,
each once the group has converged after the one before, as in every trial.
Each fault comes with its repair, and every repair is drawn too:

- `pause` (`pause`, `resume`): a GC pause of `c1` past its session timeout;
- `cut` (`cut`, `heal`): `c1` cut off from ZooKeeper or the brokers (not
  where its link is to the coordinator: a coordinator that moves would leave
  the cut link behind);
- `restart` (`restart`): the next of `c1..cN` bounced cleanly (at most N);
- `churn` (`join`, `leave`): a newcomer joins, then leaves;
- `broker` (`broker_kill`, `broker_restart`): a broker crashes and comes back;
  on even seeds the group's coordinator (`kill_coordinator`): a coordinator
  failover;
- `bounce` (`broker_stop`, `broker_restart`): the next broker shuts down
  cleanly and comes back;
- `zookeeper` (`zk_stop`, `zk_start`): a ZooKeeper server stops and starts
  again: the ensemble's leader on odd seeds, a follower on even ones.

The trial runs on a three-server ensemble whose follower lags its leader
(`follower_delay_ms`) throughout: ZooKeeper follower lag is the standing
fault under the drawn ones.

Invariants, checked over the whole trial from its metrics
(`experiments/metrics.py`):

- `no-record-lost`: every record produced at or below the highest offset
  processed was processed at least once (`gaps` is 0);
- `converges-after-last-fault`: the group converged after the last step;
- `no-offset-backwards`: where the design fences stale members' commits (the
  coordinator era), no accepted commit moved an offset backwards;
- the lab's own servers survive: a broker or ZooKeeper server that died
  other than by the nemesis cuts its trace short, which fails the trial
  (`lab_cluster/trace_reader.py`), so every trial must end ok.

Double ownership is measured (partition-seconds two members believed they
owned at once) and reported, not asserted: every design here allows it for a
while (a paused or cut member believes it owns until it hears otherwise).
Each violation is reported with the fault sequence that led to it.

A departure: the faults come one at a time, each after the group converged,
as the runner takes every step; a nemesis that strikes while a rebalance is
under way is not built.
"""

from __future__ import annotations

import random

import pandas as pd

from experiments.catalogue import broker_churn
from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES
from experiments.engine.finding import Finding
from experiments.engine.trial import TrialSpec, params_for

NAME = "soak"
QUESTION = ("Under a long random mix of every fault the lab has (pauses, cuts, restarts, churn, broker crashes "
            "and bounces, coordinator failovers, ZooKeeper servers stopping, a lagging follower), does each design "
            "keep its invariants: no record lost, no offset moved backwards where it fences, a group that "
            "converges after the last fault?")
PROFILES = {
    "standard": {"consumers": [3], "partitions": 6, "rate": 5.0, "seeds": 1, "faults": 8},
    "full": {"consumers": [3], "partitions": 6, "rate": 5.0, "seeds": 4, "faults": 30},
}
#: RocketMQ is not among them yet: its members notice a silent one only when a broker drops its channel (120 s)
#: and new leaders at their 20 s rebalance, so each of its faults takes minutes
DESIGNS = ("zookeeper", "classic", "consumer-848")
#: the designs whose coordinator fences a stale member's commits (ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH)
FENCES = ("classic", "consumer-848")
FAULTS: dict[str, tuple[str, ...]] = {
    "pause": ("pause", "resume"),
    "cut": ("cut", "heal"),
    "restart": ("restart",),
    "churn": ("join", "leave"),
    "broker": ("broker_kill", "broker_restart"),
    "bounce": ("broker_stop", "broker_restart"),
    "zookeeper": ("zk_stop", "zk_start"),
}
#: the zombie experiment's settings (a 6 s session where the consumer has it, commits every second) so that a
#: pause is past the session timeout, and every design evicts after the same silence
OVERRIDES = {
    "zookeeper": ("auto.commit.interval.ms=1000",),
    "classic": ("auto.commit.interval.ms=1000", "session.timeout.ms=6000", "heartbeat.interval.ms=2000",
                "request.timeout.ms=10000"),
    "consumer-848": ("auto.commit.interval.ms=1000", "request.timeout.ms=10000"),
}
BROKER_OVERRIDES = {
    "consumer-848": ("group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=6000",
                     "group.consumer.heartbeat.interval.ms=2000", "group.consumer.min.heartbeat.interval.ms=2000"),
}
#: how long a paused or cut member is held away once the group converged without it, and a broker's or a
#: ZooKeeper server's absence watched
PARAMS = {"hold_s": 3.0, "return_hold_s": 2.0, "zk_down_s": 3.0, "restart_down_s": 1.0, "restart_gap_s": 1.0,
          "follower_delay_ms": 200.0}


def menu(design: str) -> tuple[str, ...]:
    """The faults the nemesis may draw for `design`."""
    out = ["pause", "restart", "churn", "zookeeper"]
    if FAMILIES[design].victim_link in ("zk", "brokers"):
        out.append("cut")
    if design in broker_churn.DESIGNS:
        out += ["broker", "bounce"]
    return tuple(out)


def nemesis(seed: int, length: int, design: str, consumers: int) -> tuple[str, ...]:
    """The steps of `length` faults drawn for `design` from `seed` (each fault followed by its repair); a
    restart is drawn at most `consumers` times (each of c1..cN once)."""
    rng = random.Random(f"soak-{seed}-{design}")
    steps: list[str] = []
    restarts = 0
    for _ in range(length):
        choices = [f for f in menu(design) if f != "restart" or restarts < consumers]
        fault = rng.choice(choices)
        restarts += fault == "restart"
        steps += FAULTS[fault]
    return tuple(steps)


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [_spec(design, n, partitions or p["partitions"], p["rate"], seed, p["faults"])
            for design in designs for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]


def _spec(design: str, n: int, partitions: int, rate: float, seed: int, length: int) -> TrialSpec:
    steps = nemesis(seed, length, design, n)
    params = params_for(steps, {**PARAMS, "hold_s": broker_churn.HOLD_S.get(design, PARAMS["hold_s"]),
                                "zk_stop_leader": float(seed % 2),
                                "kill_coordinator": float(seed % 2 == 0
                                                          and FAMILIES[design].find_coordinator is not None)})
    return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=steps, layout="spread",
                     variant=f"{length}-faults", zk_servers=3, params=params, overrides=OVERRIDES.get(design, ()),
                     broker_overrides=BROKER_OVERRIDES.get(design, ()),
                     converge_limit_s=90.0)


def short(design: str, seed: int, faults: int) -> TrialSpec:
    """A short soak of `faults` faults on a group of 3 (the test suite's: its invariants checked on a real trial)."""
    p = PROFILES["standard"]
    return _spec(design, 3, p["partitions"], p["rate"], seed, faults)


def per_trial(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per trial: its status, the steps it took, and each invariant's figure."""
    rows = summary[summary.experiment == NAME]
    out = []
    for trial, t in rows.groupby("trial", sort=False):
        t = t.sort_values("change_index")
        last = t.iloc[-1]
        out.append({"design": last.design, "trial": trial, "seed": int(last.seed), "status": last.status,
                    "reason": last.reason, "changes": " ".join(t.change.astype(str)),
                    "gaps": int(last.gaps), "duplicates": int(last.duplicates),
                    "offsets_moved_backwards": int(t.offsets_moved_backwards.sum()),
                    "double_owned_partition_s": float(t.double_owned_partition_s.sum()),
                    "converged_last": bool(last.converged),
                    "windows_unconverged": int((~t.converged.astype(bool)).sum())})
    return pd.DataFrame(out)


def violations(summary: pd.DataFrame) -> list[str]:
    """Every invariant a trial broke, with the fault sequence that led to it (up to the window it broke in)."""
    rows = summary[summary.experiment == NAME]
    out = []
    for trial, t in rows.groupby("trial", sort=False):
        t = t.sort_values("change_index")
        design = t.design.iloc[0]
        if (t.status != "ok").any():
            out.append(f"{trial}: the trial failed ({t.reason.iloc[0]})")
            continue
        if int(t.gaps.iloc[-1]):
            out.append(f"{trial}: {int(t.gaps.iloc[-1])} records lost, after {' '.join(t.change)}")
        if not bool(t.converged.iloc[-1]):
            out.append(f"{trial}: not converged after the last fault, after {' '.join(t.change)}")
        if design in FENCES:
            back = t[t.offsets_moved_backwards > 0]
            for row in back.itertuples():
                led = " ".join(t[t.change_index <= row.change_index].change)
                out.append(f"{trial}: {row.offsets_moved_backwards} offsets moved backwards in `{row.change}`, "
                           f"after {led}")
    return out


def findings(summary: pd.DataFrame) -> list[Finding]:
    """One finding per invariant, over every design the run soaked (a design's failure names it in the evidence)."""
    t = per_trial(summary)
    ok = t[t.status == "ok"]
    fencing = ok[ok.design.isin(FENCES)]
    return [
        Finding("all-soak-trials-end-ok", "Every design's soak trials end ok: no lab server died but by the nemesis, "
                "and the group converged after every fault, the last included", len(t) > 0 and len(ok) == len(t),
                _evidence(t, ["status"])),
        Finding("all-no-record-lost", "Under the soak's faults no design loses a record: every record produced is "
                "processed at least once", len(ok) > 0 and bool((ok.gaps == 0).all()),
                _evidence(ok, ["gaps", "duplicates"])),
        Finding("all-fencing-no-offset-backwards", "Where the coordinator fences stale members (the classic and "
                "KIP-848 protocols), no accepted commit moves an offset backwards under the soak's faults",
                len(fencing) > 0 and bool((fencing.offsets_moved_backwards == 0).all()),
                _evidence(fencing, ["offsets_moved_backwards"])),
    ]


def _evidence(rows: pd.DataFrame, columns: list[str]) -> str:
    if rows.empty:
        return "no successful trial"
    return "; ".join(f"{r.trial}: " + ", ".join(f"{c} {getattr(r, c)}" for c in columns) for r in rows.itertuples())


#: 1: a seeded random mix of every fault, one at a time, with invariants
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.soak:soak_section", version=1)
