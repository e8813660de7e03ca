"""The conformance experiment: Kafka's own acceptance checks for consumer groups, run on every design.

Kafka judges its consumers with a fixed set of system tests
(`tests/kafkatest/tests/client/consumer_test.py`, `OffsetValidationTest`):
three consumers (`VerifiableConsumer`, which logs every assignment,
revocation, consumed batch with its offsets, and commit) on a topic a
producer keeps writing to, while the test bounces brokers or consumers, and
then asserts on what the consumers logged. This experiment runs the same
scenarios on every design the lab has, and judges each of Kafka's
assertions from the traces (the lab's consumers log the same things:
`assigned`, `revoked`, `processed` with its offset, `commit`), through the
per-change metrics of `experiments/metrics.py`.

Two trials per design, a stable group of N (3 by default, each member in its
own process), every step a change window (`engine/steps.py`):

- `bounce`: a rolling bounce of every consumer but the last, `c1..c(N-1)`
  (`restart`: a clean shutdown, `restart_down_s` down, the same config
  again; Kafka's `rolling_bounce_consumers` with `keep_alive=1`), then a
  rolling bounce of the brokers, each in turn (`broker_stop`,
  `broker_restart`: Kafka's `rolling_bounce_brokers`, clean shutdowns; one
  of them is the group's coordinator, which moves);
- `failure`: the consumer `c1` is killed (`crash`, SIGKILL: no LeaveGroup, no
  closed session; Kafka's `test_consumer_failure` with
  `clean_shutdown=False`), then a broker other than the coordinator is
  killed and started again (`broker_kill`, `broker_restart`: Kafka's
  `test_broker_failure`).

The checks, each Kafka's (its test, and what it asserts):

- `broker-bounce-no-rebalance` (`test_broker_rolling_bounce`:
  `unexpected_rebalances == 0`): in the broker windows of `bounce`, no
  rebalance round (`generations`) and no member revoking;
- `clean-bounce-no-duplicates` (`test_consumer_bounce` and
  `test_broker_rolling_bounce` with clean shutdowns: `current_position ==
  total_consumed`): `bounce`'s `duplicates` (records processed more than once)
  is 0;
- `static-bounce-no-revocation` (`test_static_consumer_bounce`: the member
  kept alive revokes nothing): static designs only; in the consumer windows of
  `bounce`, no member but the restarted one revokes (the kept one included);
- `failure-reassigned-in-time` (`test_consumer_failure`: the killed member's
  partitions are owned again within `session_timeout * 2 + 5` s): the crash
  window converges within twice the design's session timeout plus 5 s;
- `broker-failure-no-rebalance` (`test_broker_failure`: `num_rebalances`
  unchanged): in the broker windows of `failure`, no round, no member revoking;
- `valid-assignment` (`test_valid_assignment`: after every rebalance each
  partition has exactly one owner, waited for up to 30 s): every window of
  both trials ended with each partition owned by exactly one live member
  (`converged`); the partition-seconds two members owned one while the group
  settled are shown, not judged, as Kafka's test does not judge them.

Kafka's tests give their consumers a 10 s session; so does this experiment
(`OVERRIDES`), where the session is the consumer's.

Where the lab departs: Kafka's tests bounce five times and run for
minutes; here each consumer and each broker is bounced once. Kafka's
`test_fencing_static_consumer` (a duplicate `group.instance.id`) and the
commit checks (`last_commit == current_position` after a clean shutdown)
are not run yet.

Which designs: every design of the lab but TubeMQ's two (no consumer group
in Kafka's sense: the client balance has no membership to converge, and the
server balance moves partitions on a 30 s tick, so one scenario would take
minutes), and the real systems. The broker steps run where the broker-churn
experiment can take a broker down (`broker_churn.DESIGNS`: not the real
Kafka clients, whose metadata refresh is not judged there, nor Kafka 4's or
RocketMQ's own brokers); elsewhere the `bounce` and `failure` trials have
the consumer steps only, and the broker checks are left unjudged.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import broker_churn
from experiments.engine.experiment import Experiment
from experiments.engine.families import FAMILIES, settings_of, with_references
from experiments.engine.finding import Finding, of_designs_run
from experiments.engine.trial import TrialSpec, params_for

NAME = "conformance"
QUESTION = ("Kafka judges a consumer group with a fixed set of system tests (broker and consumer bounces, "
            "failures, static members, valid assignments): which of Kafka's own checks does each design pass?")
PROFILES = {
    "standard": {"consumers": [3], "partitions": 6, "rate": 5.0, "seeds": 1},
    "full": {"consumers": [3], "partitions": 6, "rate": 5.0, "seeds": 3},
}
DESIGNS = with_references(("zookeeper", "classic", "classic-static", "classic-coop", "classic-static-coop",
                           "consumer-848", "rocketmq", "kafka-python", "librdkafka"))
STATIC = ("classic-static", "classic-static-coop")
#: the scenario's timing: a consumer down 1 s (within every session timeout, so a static member comes back as
#: itself), 1 s after the group is ready before the next; each broker's going and return watched 2 s more
PARAMS = {"restart_down_s": 1.0, "restart_gap_s": 1.0, "hold_s": 2.0, "return_hold_s": 2.0}
#: Kafka's tests give their consumers a 10 s session (`VerifiableConsumerTest`, `session_timeout_sec=10`): the
#: coordinator era's classic consumers, the lab's and the real clients, get it too; KIP-848's session is the
#: broker's (45 s, Kafka's default, as in its tests), the ZooKeeper era's and RocketMQ's their own
OVERRIDES = {d: ("session.timeout.ms=10000",) for d in ("classic", "classic-static", "classic-coop",
                                                        "classic-static-coop", "kafka-python", "librdkafka")}
BROKER_BOUNCE = ("broker_stop", "broker_restart") * 3
BROKER_FAILURE = ("broker_kill", "broker_restart")
#: the checks in the order the report's table shows them: (id, Kafka's test, what it asserts)
CHECKS: tuple[tuple[str, str, str], ...] = (
    ("broker-bounce-no-rebalance", "test_broker_rolling_bounce", "a broker rolling bounce causes no rebalance"),
    ("clean-bounce-no-duplicates", "test_consumer_bounce", "after clean bounces, nothing was consumed twice"),
    ("static-bounce-no-revocation", "test_static_consumer_bounce",
     "a static member's bounce revokes nothing from the others"),
    ("failure-reassigned-in-time", "test_consumer_failure",
     "a killed member's partitions move within 2 x session timeout + 5 s"),
    ("broker-failure-no-rebalance", "test_broker_failure", "a broker failure causes no rebalance"),
    ("valid-assignment", "test_valid_assignment",
     "after every rebalance (waited for up to 30 s) each partition has exactly one owner"),
)


def brokers_steppable(design: str) -> bool:
    """Whether the runner can take this design's brokers down (the broker-churn experiment's designs)."""
    return design in broker_churn.DESIGNS


def brokers_bounced(design: str) -> bool:
    """Whether the bounce trial bounces this design's brokers: where they can be taken down, but not Kafka
    0.8.2.2's own: a clean shutdown closes its producer's connections under sends that landed, and its
    producer (`real_systems/kafka_producer.py`, no retries, no idempotence in 0.8) cannot tell those from
    sends that did not; the analysis would count each such record as processed but never produced."""
    return brokers_steppable(design) and design not in NOT_BOUNCED


#: the designs whose brokers the bounce trial leaves alone (`brokers_bounced`)
NOT_BOUNCED = ("real-kafka-0.8.2.2",)


def grid(profile: str = "standard", designs: tuple[str, ...] = DESIGNS, consumers: list[int] | None = None,
         partitions: int | None = None, seeds: int | None = None) -> list[TrialSpec]:
    p = PROFILES[profile]
    return [_spec(design, scenario, n, partitions or p["partitions"], p["rate"], seed)
            for design in designs for scenario in ("bounce", "failure")
            for n in (consumers or p["consumers"]) for seed in range(seeds or p["seeds"])]


def _spec(design: str, scenario: str, n: int, partitions: int, rate: float, seed: int) -> TrialSpec:
    if scenario == "bounce":
        steps = ("restart",) * (n - 1) + (BROKER_BOUNCE if brokers_bounced(design) else ())
    else:
        steps = ("crash",) + (BROKER_FAILURE if brokers_steppable(design) else ())
    # a design that learns of new leaders on a period is watched longer after a broker goes
    params = params_for(steps, {**PARAMS, "hold_s": broker_churn.HOLD_S.get(design, PARAMS["hold_s"])})
    return TrialSpec(NAME, design, n, partitions, rate=rate, seed=seed, steps=steps, layout="spread",
                     variant=scenario, params=params, overrides=OVERRIDES.get(settings_of(design), ()),
                     converge_limit_s=120.0)


def session_timeout_ms(design: str) -> float:
    """The design's session timeout in this experiment's config (what bounds `failure-reassigned-in-time`)."""
    family = FAMILIES[design]
    given = dict(o.split("=", 1) for o in OVERRIDES.get(settings_of(design), ()))
    config = family.configure({"group.id": "g", family.address_config: "127.0.0.1:1", **given}, "c1")
    return float(family.session_timeout_ms(config))


def per_change(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per change window of an ok trial, with its scenario (the trial's variant)."""
    rows = summary[(summary.experiment == NAME) & (summary.status == "ok") & (summary.change != "")]
    return rows.rename(columns={"variant": "scenario"})


def verdicts(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per design and check: `holds` (True, False, or None where the check was not run or does not
    apply), the measured `figure`, and `why` a check was not judged."""
    rows = per_change(summary)
    out = []
    for design in dict.fromkeys(summary[summary.experiment == NAME].design):
        d = rows[rows.design == design]
        bounce, failure = d[d.scenario == "bounce"], d[d.scenario == "failure"]
        for check, _, _ in CHECKS:
            out.append({"design": design, "check": check, **_judge(check, design, bounce, failure)})
    return pd.DataFrame(out, columns=["design", "check", "holds", "figure", "why"])


def _judge(check: str, design: str, bounce: pd.DataFrame, failure: pd.DataFrame) -> dict:
    def none(why: str) -> dict:
        return {"holds": None, "figure": "", "why": why}

    if check in ("broker-bounce-no-rebalance", "broker-failure-no-rebalance"):
        trial = bounce if check.startswith("broker-bounce") else failure
        windows = trial[trial.change.str.startswith("broker_")]
        if not (brokers_bounced(design) if trial is bounce else brokers_steppable(design)):
            return none("its brokers are not taken down here")
        if windows.empty:
            return none("no successful trial")
        rounds, revoking = int(windows.generations.sum()), int(windows.members_revoking.sum())
        return {"holds": rounds == 0 and revoking == 0, "figure": f"{rounds} rounds, {revoking} revoking", "why": ""}
    if check == "clean-bounce-no-duplicates":
        if bounce.empty:
            return none("no successful trial")
        dups = int(bounce.duplicates.iloc[0])
        return {"holds": dups == 0, "figure": f"{dups} duplicates", "why": ""}
    if check == "static-bounce-no-revocation":
        windows = bounce[bounce.change == "restart"]
        if windows.empty:
            return none("no successful trial")
        revoking = int(windows.members_revoking.sum())
        if design not in STATIC:
            return {"holds": None, "figure": f"{revoking} revoking", "why": "not a static design"}
        return {"holds": revoking == 0, "figure": f"{revoking} revoking", "why": ""}
    if check == "failure-reassigned-in-time":
        crash = failure[failure.change == "crash"]
        if crash.empty:
            return none("no successful trial")
        bound = 2 * session_timeout_ms(design) + 5000
        took = float(crash.convergence_ms.iloc[0])
        ok = bool(crash.converged.iloc[0]) and took <= bound
        return {"holds": ok, "figure": f"{took / 1000:,.1f} s (bound {bound / 1000:,.0f} s)", "why": ""}
    # valid-assignment: Kafka waits (up to 30 s) for each rebalance's assignment to be valid, so a moment of two
    # owners while it settles is not judged; it is shown
    both = pd.concat([bounce, failure])
    if both.empty:
        return none("no successful trial")
    unconverged = int((~both.converged.astype(bool)).sum())
    double = float(both.double_owned_partition_s.sum())
    return {"holds": unconverged == 0,
            "figure": f"{unconverged} of {len(both)} windows invalid at their end ({double:.3g} double-owned p-s "
                      "while settling)", "why": ""}


def findings(summary: pd.DataFrame) -> list[Finding]:
    v = verdicts(summary)
    out = [Finding(
        "all-checks-judged",
        "Every design run has a verdict on each of Kafka's checks that applies to it (its trials ran to the end)",
        len(v) > 0 and not v[(v.holds.isna()) & (v.why == "no successful trial")].shape[0],
        "; ".join(f"{r.design} {r.check}" for r in v[v.why == "no successful trial"].itertuples())
        or f"{v.holds.notna().sum()} verdicts")]
    for design in STATIC:
        s = v[(v.design == design) & (v.check == "static-bounce-no-revocation")]
        out.append(Finding(
            f"{design}-passes-static-bounce",
            f"{FAMILIES[design].label}: passes Kafka's test_static_consumer_bounce (the members that stayed "
            "revoke nothing while the others bounce within their session timeout)",
            len(s) == 1 and s.holds.iloc[0] is True, _evidence(s)))
    coordinated = [d for d in dict.fromkeys(v.design) if FAMILIES[d].find_coordinator is not None
                   and brokers_steppable(d)]
    b = v[v.design.isin(coordinated) & (v.check == "broker-bounce-no-rebalance")]
    out.append(Finding(
        "all-coordinator-era-pass-broker-bounce",
        "Every coordinator-era design passes Kafka's test_broker_rolling_bounce: brokers, the coordinator's "
        "among them, restart one by one and no member rebalances (the coordinator moves with its offsets "
        "partition, and the members find it again)",
        len(b) > 0 and bool((b.holds == True).all()), _evidence(b)))  # noqa: E712 - holds is an object column
    return of_designs_run(out, summary)


def _evidence(rows: pd.DataFrame) -> str:
    if rows.empty:
        return "no successful trial"
    return "; ".join(f"{r.design}: {r.figure or r.why}" for r in rows.itertuples())


#: 1: two trials per design (bounce, failure), six of Kafka's checks
EXPERIMENT = Experiment(NAME, QUESTION, DESIGNS, PROFILES, grid, findings,
                        section="experiments.report.conformance:conformance_section", version=1, with_real=True)
