"""The broker-churn experiment end to end: a broker killed (SIGKILL) and restarted under a stable group of three.

`pytest -m broker_churn` runs, on real brokers and a real ZooKeeper through the
Spark harness, the designs whose contrast is the finding: the ZooKeeper era
watching `/brokers/ids` always and only when empty, and the coordinator era
with the group's coordinator as the victim and with another broker. It
asserts the findings: in the coordinator era neither death causes a
rebalance (Kafka's `test_broker_failure`), the coordinator's included (the
group is loaded Stable on the next leader of its offsets partition); in the
ZooKeeper era watching always, every consumer rebalances at the death and at
the return; watching only when empty, nobody does; every partition is
processed again; and nothing the trials started outlives them.
"""

from __future__ import annotations

import os

import pytest
from conftest import descends_from_me, run_experiment, trace_events, vocabulary_problems

from experiments.catalogue import broker_churn
from experiments.engine.finding import by_id
from lab_cluster.leaks import lab_processes

pytestmark = [pytest.mark.broker_churn, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

DESIGNS = ("zookeeper", "classic")


@pytest.fixture(scope="module")
def churn_run(spark, tmp_path_factory):
    specs = broker_churn.grid("standard", designs=DESIGNS)
    return run_experiment(spark, tmp_path_factory.mktemp("broker-churn-run"), specs)


def test_every_case_ran_and_the_victim_is_the_one_asked_for(churn_run):
    run_dir, specs, summary = churn_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert set(summary.variant) == {
        "other-watch-always", "other-watch-when_empty", "coordinator", "other"}
    for spec in specs:
        kills = [e["f"] for e in trace_events(run_dir / "trials" / spec.trial_id, "scenario", "fault")
                 if e["f"]["action"] == "kill"]
        assert len(kills) == 1 and kills[0]["leads"], kills  # one broker, leading some of the topic's partitions
        assert kills[0]["coordinator"] is (spec.variant == "coordinator"), (spec.trial_id, kills)


def test_who_rebalances_when_a_broker_dies_and_comes_back(churn_run):
    _, _, summary = churn_run
    checked = by_id(broker_churn.findings(summary))
    for finding in ("classic-other-broker-no-rebalance", "classic-coordinator-moves-group-stays-stable",
                    "zookeeper-watch-always-broker-change", "zookeeper-watch-when-empty-broker-change",
                    "all-processing-resumes"):
        assert checked[finding].holds, checked[finding]
    # the findings speak of the designs run only: none about a design this run left out holds by default
    assert not any(f.startswith(("rocketmq", "tubemq", "classic-static", "classic-coop")) for f in checked)


def test_the_dead_brokers_partitions_pause_and_the_kill_window_shows_it(churn_run):
    _, _, summary = churn_run
    kills = broker_churn.per_change(summary)
    kills = kills[kills.change == "broker_kill"]
    # its partitions wait for the session to expire and new leaders: some partition-seconds nobody processed
    assert (kills.unprocessed_partition_s > 0).all(), kills[["trial", "unprocessed_partition_s"]]
    assert (kills.processing_resumed_ms > 0).all(), kills[["trial", "processing_resumed_ms"]]


def test_every_event_is_in_the_vocabulary_and_nothing_outlives_the_trials(churn_run):
    assert vocabulary_problems(churn_run[0]) == {}
    # every broker (the restarted one too), ZooKeeper, consumer and producer the trials started is gone: no lab
    # process is owned by a process of this test's own (the Spark workers that ran the trials)
    assert [pid for pid, owner in lab_processes().items() if owner != os.getpid() and descends_from_me(owner)] == []
