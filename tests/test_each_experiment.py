"""Every experiment end to end in the default run: its cheapest trial through the Spark harness and the analysis.

An experiment's whole grid is a `long` test (`pytest -m long`, or `pytest -m <experiment>`), and the herd runs every
design of its own in `test_main_job.py` and `test_spark_cluster.py`. Here every other experiment runs one trial of
its standard grid, the cheapest that takes every step of its scenario (a lag and churn, a cut and heal, a rolling
restart, a broker killed and started again, a newcomer, a topic grown, an assignor's join and leave, a bounce of
consumers and brokers), three at a time as the main job runs them; together they also give the coordinator era's static,
cooperative and static-cooperative designs a real trial each. What a single trial cannot judge (a finding compares
designs or lags) is judged on the stored tour run (`test_stored_tour_run.py`) and the published report
(`test_main_job.py`).
"""

from __future__ import annotations

import pytest
from conftest import module_session, run_experiment, trace_events

from experiments.catalogue import EXPERIMENTS, soak

# the first test's set-up runs every trial below and their analysis: about 250 s here, more on a slower machine
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

#: experiment -> the trial of its standard grid that runs here
SMOKE = {
    "split_brain": "split_brain-delay-1000-classic-n4-p12-s0-r0",
    "zombie": "zombie-cut-classic-n2-p4-s0-r0",
    "storm": "storm-classic-static-coop-n4-p12-s0-r0",
    "broker_churn": "broker_churn-coordinator-classic-coop-n3-p6-s0-r0",
    "first_message": "first_message-zookeeper-n4-p12-s0-r0",
    # a topic grown under the group: every consumer's topic watch fires at once
    "growth": "growth-zookeeper-n4-p8-s0-r0",
    # the weighted example: a user's assignor, loaded by the plug-in point in every consumer of the trial
    "assignors": "assignors-weighted-classic-n3-p12-s0-r0",
    "conformance": "conformance-bounce-classic-static-n3-p6-s0-r0",
    # a short seeded soak (a join and a leave, then the ensemble's leader stopped and started): its invariants below
    "soak": soak.short("classic", seed=3, faults=2),
}


def _spec(experiment: str, trial):
    if not isinstance(trial, str):  # a spec of its own (the soak's short one)
        return trial
    return next(s for s in EXPERIMENTS[experiment].specs("standard") if s.trial_id == trial)


@pytest.fixture(scope="module")
def spark():
    """This module's Spark session: three task slots, so that three trials run at once, as the main job runs them
    (most of a trial's time is spent waiting for a group to converge or a fault to be held)."""
    yield from module_session("local[3]")


@pytest.fixture(scope="module")
def each_run(spark, tmp_path_factory):
    specs = [_spec(e, t) for e, t in SMOKE.items()]
    return run_experiment(spark, tmp_path_factory.mktemp("each-experiment"), specs, trials_per_machine=3)


def test_every_experiment_but_the_herd_has_a_trial_here():
    assert set(SMOKE) == set(EXPERIMENTS) - {"herd"}


@pytest.mark.parametrize("experiment", sorted(SMOKE))
def test_its_trial_takes_every_step_and_ends_ok(each_run, experiment):
    _, specs, summary = each_run
    spec = _spec(experiment, SMOKE[experiment])
    rows = summary[summary.trial == spec.trial_id].sort_values("change_index")
    assert set(rows.status) == {"ok"}, rows.reason.tolist()
    # a row per change the analysis found in its trace, each a step of the scenario
    assert len(rows) >= 1 and set(rows.change) <= set(spec.steps), (rows.change.tolist(), spec.steps)
    if spec.converge_required:
        assert rows.converged.all(), rows[["change", "converged"]].to_string()


def test_the_coordinator_eras_variants_each_ran_a_real_trial(each_run):
    _, _, summary = each_run
    ran = set(summary[summary.status == "ok"].design)
    assert {"classic-static", "classic-coop", "classic-static-coop"} <= ran, ran


def test_a_rolling_bounce_of_the_brokers_moves_the_coordinator_and_the_members_find_it(each_run):
    """The conformance trial's broker bounce (`broker_stop`, `broker_restart`, each broker in turn): one of the
    brokers stopped is the group's coordinator; once it is gone, the members heartbeat to another."""
    run_dir, _, _ = each_run
    trial_dir = run_dir / "trials" / SMOKE["conformance"]
    stops = [e["f"] for e in trace_events(trial_dir, "scenario", "fault") if e["f"]["action"] == "stop"]
    assert [f["broker"] for f in stops] == [1, 2, 3]
    moved = [i for i, f in enumerate(stops) if f["coordinator"]]  # the coordinator may move onto the next one too
    assert moved, stops
    at = [c for c in trace_events(trial_dir, "scenario", "change") if c["f"]["change"] == "broker_stop"][moved[0]]
    gone = f"broker-{stops[moved[0]]['broker']}"
    after = {b for b in ("broker-1", "broker-2", "broker-3") if b != gone
             for e in trace_events(trial_dir, b, "coordinator_request")
             if e["f"]["api"] == "Heartbeat" and e["ts_ns"] > at["ts_ns"]}
    assert after, "nobody heartbeated to a new coordinator"


def test_a_short_seeded_soak_keeps_its_invariants(each_run):
    """Two faults drawn from the seed (with their repairs) under a lagging ZooKeeper follower: no record lost, no
    offset moved backwards (the classic coordinator fences), converged after the last, every server alive."""
    _, _, summary = each_run
    spec = SMOKE["soak"]
    assert spec.steps == ("join", "leave", "zk_stop", "zk_start") == soak.nemesis(3, 2, "classic", 3)  # its seed's
    assert soak.violations(summary[summary.trial == spec.trial_id]) == []
    held = {f.id: f.holds for f in soak.findings(summary[summary.trial == spec.trial_id])}
    assert held == {"all-soak-trials-end-ok": True, "all-no-record-lost": True, "all-fencing-no-offset-backwards": True}
