"""The conformance section of the report: Kafka's own acceptance checks, designs by checks, a figure per cell.

Rendered from the run's stored results only (`experiment.StoredRun`); the
real systems' rows are shown beside the lab's (`Experiment.with_real`).
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import conformance
from experiments.engine.experiment import StoredRun
from experiments.engine.families import FAMILIES
from experiments.report.parts import Section, findings_list, reproduce_line, table

#: the table's column for each check
SHORT = {"broker-bounce-no-rebalance": "broker bounce: no rebalance",
         "clean-bounce-no-duplicates": "clean bounce: no duplicates",
         "static-bounce-no-revocation": "static bounce: nothing revoked",
         "failure-reassigned-in-time": "consumer failure: moved in time",
         "broker-failure-no-rebalance": "broker failure: no rebalance",
         "valid-assignment": "valid assignment"}
#: why a design fails a check, where the failure is the design's: what its code does, and where. A failure
#: without an entry here is reported as not yet traced, never explained away
_WATCHES_BROKERS = (
    "the lab's ZooKeeper-era consumer watches `/brokers/ids` by default (`watch_broker_ids=always`, the "
    "lineage's description of the era: `legacy_zk/config.py`), so every broker's going and return fires every "
    "member's watch, and each releases everything it owns and rebalances (`legacy_zk/consumer.py`); Kafka "
    "0.8.2.2's own code subscribes to `/brokers/ids` only when a rebalance found no broker at all, so its "
    "consumers do not rebalance when a broker goes (the broker-churn experiment runs both settings).")
_QUEUES_ARE_BROKERS = (
    "a RocketMQ queue belongs to a broker, and the lab names each queue after its partition's leader "
    "(`rocketmq_client/instance.py`), so when a broker goes or leadership moves, the topic's route lists other "
    "queues, and every member's next rebalance re-splits them (`RebalanceImpl.rebalanceByTopic`, "
    "`rocketmq_client/rebalance.py`), dropping what moves; in RocketMQ itself, too, a dead broker's queues leave "
    "the route until it returns.")
_NO_BARRIER_DUPLICATES = (
    "no barrier: when a queue moves (a member's bounce, a broker's), its new owner pulls from the offset the "
    "broker holds, which the old owner last committed at its periodic persist or pull, while the old owner may "
    "still be processing what it had pulled: records processed twice. Kafka's clean-shutdown guarantee rests on "
    "the eager barrier (every member commits and revokes before anyone is assigned), which RocketMQ has not.")
_COOPERATIVE_AUTOCOMMIT = (
    "cooperative rebalancing with auto-commit: a member commits before it rejoins (Kafka's `onJoinPrepare`), keeps "
    "processing while the round is in flight, and then revokes what moves without committing it (Kafka's "
    "`onJoinComplete` under COOPERATIVE invokes `onPartitionsRevoked` and nothing more: `modern_coord/consumer.py: "
    "_on_join_complete`); the new owner starts from the last commit, so what was processed in between is processed "
    "again. Kafka's own test runs the eager `RangeAssignor` and commits after every batch (`enable_autocommit=False`); "
    "an application that commits in `onPartitionsRevoked` avoids it.")
WHY: dict[tuple[str, str], str] = {
    ("classic-coop", "clean-bounce-no-duplicates"): _COOPERATIVE_AUTOCOMMIT,
    ("classic-static-coop", "clean-bounce-no-duplicates"): _COOPERATIVE_AUTOCOMMIT,
    ("real-rocketmq-4.9", "clean-bounce-no-duplicates"): _NO_BARRIER_DUPLICATES,
    ("rocketmq", "broker-bounce-no-rebalance"): _QUEUES_ARE_BROKERS,
    ("rocketmq", "broker-failure-no-rebalance"): _QUEUES_ARE_BROKERS,
    ("rocketmq", "clean-bounce-no-duplicates"): _NO_BARRIER_DUPLICATES,
    ("zookeeper", "broker-bounce-no-rebalance"): _WATCHES_BROKERS,
    ("zookeeper", "broker-failure-no-rebalance"): _WATCHES_BROKERS,
}


def verdict_cell(holds, figure: str, why: str) -> str:
    if holds is None or (isinstance(holds, float) and pd.isna(holds)):
        return f"– ({why})" + (f": {figure}" if figure else "")
    return f"{'✅' if holds else '❌'} {figure}"


def _failure_lines(failures: pd.DataFrame) -> list[str]:
    """A line per design and cause: the checks it fails for that cause, with their figures, then the cause."""
    causes: dict[tuple[str, str], list[str]] = {}
    for r in failures.itertuples():
        why = WHY.get((r.design, r.check), "not yet traced to its cause in the design's code.")
        causes.setdefault((r.design, why), []).append(f"{SHORT[r.check]} ({r.figure})")
    return [f"- **{FAMILIES[design].label}**, {'; '.join(checks)}: {why}" for (design, why), checks in causes.items()]


def conformance_section(summary: pd.DataFrame, run: StoredRun) -> Section:
    v = conformance.verdicts(summary)
    designs = list(dict.fromkeys(v.design))
    rows = []
    for design in designs:
        d = v[v.design == design].set_index("check")
        rows.append([f"`{design}`",
                     *(verdict_cell(d.loc[c].holds, d.loc[c].figure, d.loc[c].why) for c, _, _ in conformance.CHECKS)])
    failures = v[v.holds == False]  # noqa: E712 - holds is an object column (True, False, None)
    lines = _failure_lines(failures)
    checks = table(["check", "Kafka's test", "what it asserts"],
                   [(f"`{c}`", f"`{t}`", what) for c, t, what in conformance.CHECKS])
    setup = [("designs", ", ".join(designs)),
             ("group", f"N = {run.spec(conformance.NAME, 'consumers')}, each in its own process; "
                       f"P = {run.spec(conformance.NAME, 'partitions')}; a producer writes "
                       f"{run.spec(conformance.NAME, 'rate')} records/s per partition"),
             ("`bounce`", "each consumer but the last restarts in turn (a clean shutdown, "
                          f"{run.spec(conformance.NAME, 'restart_down_s')} s down), then, where the runner can take "
                          "the design's brokers down, each broker shuts down cleanly and starts again in turn (one "
                          "of them the group's coordinator)"),
             ("`failure`", "`c1` is killed (SIGKILL) and stays dead; then, where the runner can, a broker other "
                           "than the coordinator is killed and started again"),
             ("configs", "Kafka's tests' 10 s session for the classic consumers (`session.timeout.ms=10000`), "
                         "each family's defaults otherwise"),
             ("seeds", f"{summary.seed.nunique()} per design")]
    short = f"""**Kafka's checks, designs by checks** (✅ passes, ❌ fails, – not judged; the measured figure in each
cell):

{table(["design", *(SHORT[c] for c, _, _ in conformance.CHECKS)], rows)}"""
    takeaway = ("Each failure, and why it is the design's:\n\n" + "\n".join(lines)) if lines else \
        "Every design passes every check that applies to it."
    appendix = f"""**The checks.**

{checks}

**Set-up.**

{table(["", ""], setup)}

What the lab does not run of Kafka's suite yet: `test_fencing_static_consumer` (a duplicate
`group.instance.id`) and the commit checks after a clean shutdown (`last_commit == current_position`);
each consumer and broker is bounced once, where Kafka's tests bounce five times."""
    return Section("Conformance", conformance.QUESTION, findings_list(conformance.findings(summary)), "",
                   short, takeaway, reproduce_line(conformance.NAME, run.env), appendix,
                   "experiments/catalogue/conformance.py: findings")
