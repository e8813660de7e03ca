"""The conformance experiment's judging, without a cluster: Kafka's checks on summary rows made up for the purpose.

The whole grid is `pytest -m conformance` (`test_conformance.py`); its smoke trial runs in
`test_each_experiment.py`.
"""

from __future__ import annotations

import pandas as pd

from experiments.catalogue import conformance


def _row(design: str, scenario: str, change: str, **figures) -> dict:
    return {"experiment": "conformance", "design": design, "variant": scenario, "status": "ok", "change": change,
            "seed": 0, "generations": 0, "members_revoking": 0, "duplicates": 0, "convergence_ms": 1000.0,
            "converged": True, "double_owned_partition_s": 0.0, **figures}


def _trial(design: str, *, restart=None, broker=None, crash=None, failure_broker=None, duplicates=0) -> list[dict]:
    bounce = [_row(design, "bounce", "restart", duplicates=duplicates, **(restart or {})) for _ in range(2)]
    bounce += [_row(design, "bounce", c, duplicates=duplicates, **(broker or {}))
               for c in ("broker_stop", "broker_restart")]
    failure = [_row(design, "failure", "crash", **(crash or {}))]
    failure += [_row(design, "failure", c, **(failure_broker or {})) for c in ("broker_kill", "broker_restart")]
    return bounce + failure


def _verdicts(rows: list[dict]) -> dict[tuple[str, str], object]:
    v = conformance.verdicts(pd.DataFrame(rows))
    return {(r.design, r.check): r.holds for r in v.itertuples()}


def test_a_design_that_keeps_every_promise_passes_every_check_that_applies():
    v = _verdicts(_trial("classic-static"))
    assert all(v[("classic-static", c)] is True for c, _, _ in conformance.CHECKS), v


def test_each_check_fails_on_the_figure_kafka_asserts_on():
    rows = (_trial("classic", broker={"generations": 1, "members_revoking": 2})
            + _trial("classic-coop", duplicates=3)
            + _trial("classic-static", restart={"members_revoking": 1})
            + _trial("classic-static-coop", crash={"convergence_ms": 26_000.0})  # bound: 2 x 10 s + 5 s
            + _trial("consumer-848", failure_broker={"generations": 1})
            + _trial("rocketmq", restart={"converged": False})
            + _trial("real-rocketmq-4.9", restart={"double_owned_partition_s": 0.4}))  # while settling: not judged
    v = _verdicts(rows)
    failed = {k for k, holds in v.items() if holds is False}
    assert failed == {("classic", "broker-bounce-no-rebalance"), ("classic-coop", "clean-bounce-no-duplicates"),
                      ("classic-static", "static-bounce-no-revocation"),
                      ("classic-static-coop", "failure-reassigned-in-time"),
                      ("consumer-848", "broker-failure-no-rebalance"), ("rocketmq", "valid-assignment")}


def test_a_check_that_does_not_apply_or_was_not_run_is_left_unjudged_and_says_why():
    rows = _trial("classic") + [r for r in _trial("kafka-python") if not r["change"].startswith("broker_")]
    v = conformance.verdicts(pd.DataFrame(rows)).set_index(["design", "check"])
    assert v.loc[("classic", "static-bounce-no-revocation")].holds is None
    assert v.loc[("classic", "static-bounce-no-revocation")].why == "not a static design"
    assert v.loc[("kafka-python", "broker-bounce-no-rebalance")].why == "its brokers are not taken down here"
    failed_trial = [dict(r, status="failed") for r in _trial("zookeeper")]
    w = conformance.verdicts(pd.DataFrame(rows + failed_trial)).set_index(["design", "check"])
    assert w.loc[("zookeeper", "valid-assignment")].why == "no successful trial"
    assert not [f for f in conformance.findings(pd.DataFrame(rows + failed_trial))
                if f.id == "all-checks-judged"][0].holds


def test_the_grid_runs_the_broker_steps_only_where_the_runner_can_take_brokers_down():
    specs = {s.trial_id: s for s in conformance.grid("standard")}
    assert "broker_stop" in specs["conformance-bounce-classic-n3-p6-s0-r0"].steps
    assert "broker_stop" not in specs["conformance-bounce-kafka-python-n3-p6-s0-r0"].steps
    assert specs["conformance-failure-zookeeper-n3-p6-s0-r0"].steps == ("crash", "broker_kill", "broker_restart")
    assert specs["conformance-bounce-classic-n3-p6-s0-r0"].steps[:2] == ("restart", "restart")  # c3 is kept
