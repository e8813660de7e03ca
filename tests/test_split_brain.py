"""The split-brain experiment end to end: a 3-server ensemble, a lagging follower, membership churn.

`pytest -m split_brain` runs every design with what it lags on (a follower's
quorum link; RocketMQ: every consumer's link to one broker) delayed by the
profile's largest delay, and asserts the finding (`docs/experiments.md`): the ZooKeeper-era
group computes from more than one view in at least one round, and owner
conflicts or failed attempts follow; the coordinator-era group computes from
exactly one view per generation; RocketMQ's consumers allocate from more than
one id list in a round; TubeMQ's master refuses a newcomer with a taken
`nodeId` or another `sourceCount`, so no partition gets two owners.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import split_brain
from experiments.engine.finding import by_id

pytestmark = [pytest.mark.split_brain, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

LARGE = split_brain.DELAYS_MS["large"]


@pytest.fixture(scope="module")
def split_run(spark, tmp_path_factory):
    return run_experiment(spark, tmp_path_factory.mktemp("split-brain-run"),
                          split_brain.grid("standard", delays=(LARGE,)))


def test_every_trial_ran_and_the_membership_changes_passed_the_cross_check(split_run):
    _, specs, summary = split_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert len(summary) == len(specs)
    # the churn's leaver does not hear its own watch, which its close triggers; it says so
    assert (summary.client_notifications + summary.client_unheard == summary.server_notifications).all()
    lagging = summary[summary.design.isin(list(split_brain.LAG_PARAM))]
    assert set(lagging.change) == {"churn"} and set(lagging.design) == set(split_brain.LAG_PARAM)
    lag = lagging.design.map(split_brain.LAG_PARAM)
    assert all(row[lag[i]] == LARGE for i, row in lagging.iterrows())
    misconfigured = summary[~summary.design.isin(list(split_brain.LAG_PARAM))]
    assert set(misconfigured.variant) == set(split_brain.MISCONFIGURED) and set(misconfigured.change) == {"join"}


def test_with_a_lagging_follower_zookeeper_era_consumers_compute_from_different_views(split_run):
    summary = split_run[2]
    legacy = summary[summary.design == "zookeeper"].iloc[0]
    # assignments computed from different memberships are in effect at once (stale *reads* are counted
    # apart, `stale_views`; this scenario need not produce them: see REPORT.md)
    assert legacy.view_divergence > 1, legacy.to_dict()
    assert legacy.owner_conflicts + legacy.rebalance_failures > 0, legacy.to_dict()
    assert by_id(split_brain.findings(summary))["zookeeper-lagging-views-diverge"].holds


def test_the_coordinator_era_computes_from_one_view_per_generation(split_run):
    run_dir, _, summary = split_run
    modern = summary[summary.design == "classic"].iloc[0]
    assert modern.view_divergence == 1 and modern.stale_views == 0 and modern.notifications_per_change == 0
    # every generation's leader assignment, read back from the traces: one member list per generation
    members_by_generation: dict[int, set[str]] = {}
    for path in (run_dir / "trials").glob("*classic*/traces/c*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["kind"] == "leader_assignment":
                generation = event.get("generation", json.loads(event["fields"]).get("generation"))
                members = ",".join(sorted(json.loads(event["fields"])["assignment"]))
                members_by_generation.setdefault(generation, set()).add(members)
    assert len(members_by_generation) >= 2  # the initial group's generation and the churn's
    assert all(len(views) == 1 for views in members_by_generation.values()), members_by_generation


def test_kip848_coordinator_computes_one_target_per_group_epoch(split_run):
    run_dir, _, summary = split_run
    kip848 = summary[summary.design == "consumer-848"].iloc[0]
    assert kip848.view_divergence == 1 and kip848.notifications_per_change == 0, kip848.to_dict()
    # every target assignment the coordinator computed, read back from the brokers' traces
    members_by_epoch: dict[int, set[str]] = {}
    for path in (run_dir / "trials").glob("*consumer-848*/traces/broker-*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["kind"] == "target_assignment":
                members = ",".join(sorted(json.loads(event["fields"])["target"]))
                members_by_epoch.setdefault(event["generation"], set()).add(members)
    assert len(members_by_epoch) >= 2, members_by_epoch  # the group's formation and the churn's
    assert all(len(views) == 1 for views in members_by_epoch.values()), members_by_epoch
    assert by_id(split_brain.findings(summary))["consumer-848-one-view"].holds


def test_with_a_lagging_broker_rocketmq_consumers_allocate_from_different_id_lists(split_run):
    summary = split_run[2]
    rocket = summary[summary.design == "rocketmq"].iloc[0]
    assert rocket.zk_requests_per_change == 0 and rocket.notifications_per_change > 0
    assert rocket.view_divergence > 1, rocket.to_dict()
    assert by_id(split_brain.findings(summary))["rocketmq-lagging-broker-views-diverge"].holds
    assert rocket.double_owned_partition_s + rocket.unowned_partition_s > 0, rocket.to_dict()


def test_tubemq_refuses_a_misconfigured_node_so_no_partition_has_two_owners(split_run):
    from conftest import trace_events

    run_dir, _, summary = split_run
    tube = summary[summary.design == "tubemq"].set_index("variant")
    # nobody computed a new share in the window (no view at all), and the newcomer's start failed
    assert (tube.rebalance_failures == 1).all() and (tube.view_divergence.fillna(0) <= 1).all(), tube.to_dict("index")
    assert (tube.double_owned_partition_s == 0).all() and (tube.unowned_at_end == 0).all()
    # the master's refusal, in the newcomer's own trace: the code names the misconfiguration
    expected = {"same-node-id": "CLIENT_DUPLICATE_INDEXID", "other-source-count": "CLIENT_INCONSISTENT_SOURCECOUNT"}
    for variant, code in expected.items():
        trial_dir = run_dir / "trials" / tube.loc[variant, "trial"]
        answers = {e["f"]["code"] for e in trace_events(trial_dir, "j1", "tubemq_master_register")}
        assert answers == {code}, (variant, answers)
    assert by_id(split_brain.findings(summary))["tubemq-misconfigured-node-refused"].holds


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(split_run):
    run_dir = split_run[0]
    assert any(run_dir.glob("trials/*/traces/*.jsonl"))
    assert vocabulary_problems(run_dir) == {}
