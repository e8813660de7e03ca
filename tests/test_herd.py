"""The herd experiment end to end: a small grid on Spark, real ZooKeeper, brokers and consumer processes.

`pytest -m herd` runs every design at N = 4, 8, 16 (one join, one leave
each) and asserts the finding (`docs/experiments.md`): ZooKeeper-era notifications per change
reach every consumer, and every consumer that rebalances reads every member's
registration (at least N² reads per change);
coordinator-era consumers get no notification and their control messages grow
at most linearly; RocketMQ's consumers are told of a change by every broker;
TubeMQ's nodes are told nothing, its newcomer is refused and a departed node's
share stays unowned.
Then: `report RUN_DIR` renders the same REPORT.md twice from the same stored
results; a trial whose traces were cut is reported as failed with the reason
(one whose consumers never converge: `test_trial_failures.py`, which runs by
default; this module's grid is `long`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_experiment, vocabulary_problems

from experiments.catalogue import VERSIONS, herd
from experiments.cli import main
from experiments.engine.families import REAL_CLIENTS
from experiments.engine.finding import by_id
from experiments.engine.harness import analyse
from lab_cluster.trace_reader import write_columnar

pytestmark = [pytest.mark.herd, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

NS = [4, 8, 16]


@pytest.fixture(scope="module")
def herd_run(spark, tmp_path_factory):
    return run_experiment(spark, tmp_path_factory.mktemp("herd-run"), herd.grid("standard", consumers=NS))


def test_every_trial_ran_converged_and_passed_the_cross_check(herd_run):
    _, specs, summary = herd_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert summary[summary.change != "depart"].converged.all()
    assert len(summary) == sum(len(s.steps) for s in specs)  # a join and a leave (TubeMQ: and a depart) per trial
    assert set(summary.design) == set(herd.DESIGNS)
    # every watcher the server triggered was heard, except the leaver's own watch on the ids node its close deletes,
    # which it says it will not hear (one per ZooKeeper-era leave; none in the coordinator era, which holds none)
    assert (summary.client_notifications + summary.client_unheard == summary.server_notifications).all()
    expected_unheard = ((summary.design == "zookeeper") & (summary.change == "leave")).astype(int)
    assert (summary.client_unheard == expected_unheard).all(), summary[["trial", "change", "client_unheard"]]
    assert (summary.gaps == 0).all()  # graceful changes lose nothing


def test_zookeeper_era_notifies_every_consumer_and_every_consumer_reads_every_registration(herd_run):
    summary = herd_run[2]
    legacy = summary[summary.design == "zookeeper"]
    for row in legacy.itertuples():
        # a join tells the N members already there; a leave tells the N that stay (the leaver's own close
        # triggers its watch too, which it does not hear: `zk_watch_unheard`, counted by the cross-check)
        assert row.notifications_per_change >= row.consumers, row
    checked = by_id(herd.findings(summary))
    for change in ("join", "leave"):
        told = herd.per_n(summary, "zookeeper", change, "notifications_per_change")
        assert told.is_monotonic_increasing and told.iloc[-1] > told.iloc[0]
    for row in legacy.itertuples():
        # each of the members after the change rebalances at least once and reads every member's registration
        assert row.membership_reads_per_change >= row.members_after ** 2, row
        assert row.membership_reads_per_change < row.zk_requests_per_change, row
    for change in ("join", "leave"):
        for fid in (f"zookeeper-{change}-notified", f"zookeeper-{change}-registration-reads-n2"):
            assert checked[fid].holds, checked[fid]


def test_coordinator_era_consumers_get_no_notification_and_linear_control_traffic(herd_run):
    summary = herd_run[2]
    modern = summary[summary.design == "classic"]
    assert (modern.notifications_per_change == 0).all()
    assert (modern.zk_requests_per_change == 0).all()
    assert (modern.broker_requests_per_change > 0).all()
    assert (modern.view_divergence == 1).all()  # one leader computes each generation's assignment
    for change in ("join", "leave"):
        control = herd.per_n(summary, "classic", change, "control_messages_per_change")
        assert herd.loglog_slope(control.index, control.values) <= herd.LINEAR_SLOPE_LIMIT, control.to_dict()
    checked = by_id(herd.findings(summary))
    for change in ("join", "leave"):
        for fid in (f"classic-{change}-no-zookeeper", f"classic-{change}-linear-control"):
            assert checked[fid].holds, checked[fid]


def test_the_real_kafka_clients_on_the_same_coordinator_get_no_notification_and_linear_control_traffic(herd_run):
    """kafka-python and librdkafka, unchanged, on the brokers' Kafka listeners: the era's finding holds for them,
    and every assignment they adopt is a generation of the coordinator's (one round per change or more)."""
    summary = herd_run[2]
    checked = by_id(herd.findings(summary))
    for design in REAL_CLIENTS:
        rows = summary[summary.design == design]
        assert len(rows) == 2 * len(NS)
        assert (rows.zk_requests_per_change == 0).all() and (rows.broker_requests_per_change > 0).all()
        assert (rows.generations >= 1).all(), rows[["consumers", "change", "generations"]]
        for change in ("join", "leave"):
            for fid in (f"{design}-{change}-no-zookeeper", f"{design}-{change}-linear-control",
                        f"{design}-{change}-stops-the-group-as-the-lab-consumer"):
                assert checked[fid].holds, checked[fid]


def test_kip848_touches_only_the_members_whose_share_moves(herd_run):
    """KIP-848: no ZooKeeper, one target per group epoch, and no group-wide stop: the others revoke at most the
    partitions that move (on a leave, none), where the eager coordinator era revokes everything it owns."""
    summary = herd_run[2]
    kip848 = summary[summary.design == "consumer-848"]
    assert len(kip848) == 2 * len(NS)
    assert (kip848.notifications_per_change == 0).all() and (kip848.zk_requests_per_change == 0).all()
    assert (kip848.view_divergence.fillna(1) == 1).all()
    assert (kip848.partitions_revoked.fillna(0) <= kip848.partitions_moved.fillna(0)).all(), \
        kip848[["consumers", "change", "partitions_revoked", "partitions_moved"]]
    assert (kip848[kip848.change == "leave"].partitions_revoked.fillna(0) == 0).all()
    eager = summary[(summary.design == "classic") & (summary.change == "join")].set_index("consumers")
    for row in kip848[kip848.change == "join"].itertuples():
        assert (row.partitions_revoked or 0) < eager.loc[row.consumers, "partitions_revoked"], row
    checked = by_id(herd.findings(summary))
    for change in ("join", "leave"):
        for fid in (f"consumer-848-{change}-no-zookeeper", f"consumer-848-{change}-linear-control",
                    f"consumer-848-{change}-revokes-only-moving"):
            assert checked[fid].holds, checked[fid]


def test_rocketmq_consumers_are_told_by_every_broker_and_never_touch_zookeeper(herd_run):
    summary = herd_run[2]
    rocket = summary[summary.design == "rocketmq"]
    assert len(rocket) == 2 * len(NS)
    assert (rocket.zk_requests_per_change == 0).all()
    # each broker pushes NOTIFY_CONSUMER_IDS_CHANGED to every channel of the group once per change
    assert (rocket.notifications_per_change >= herd.BROKERS * rocket.members_after).all(), \
        rocket[["consumers", "change", "notifications_per_change"]]
    assert (rocket.broker_requests_per_change > 0).all()  # heartbeats, id lists, offsets
    assert (rocket.rebalance_attempts >= rocket.members_after).all()  # everyone rebalances on its own
    checked = by_id(herd.findings(summary))
    for change in ("join", "leave"):
        finding = checked[f"rocketmq-{change}-told-by-every-broker"]
        assert finding.holds, finding


def test_tubemq_tells_nobody_refuses_the_newcomer_and_leaves_a_departed_share_unowned(herd_run):
    summary = herd_run[2]
    tube = summary[summary.design == "tubemq"]
    assert list(tube.change.unique()) == list(herd.TUBEMQ_STEPS) and len(tube) == 3 * len(NS)
    assert (tube.notifications_per_change == 0).all() and (tube.zk_requests_per_change == 0).all()
    join, leave, depart = (tube[tube.change == change] for change in herd.TUBEMQ_STEPS)
    assert (join.rebalance_failures == 1).all()  # the newcomer's start, refused (its nodeId is past sourceCount)
    # the group is as it was, its shares complete, after the refused join and after the refused newcomer's leave
    for change in (join, leave):
        assert change.converged.all() and (change.unowned_at_end == 0).all(), change
        assert (change.double_owned_partition_s == 0).all() and (change.unowned_partition_s == 0).all(), change
    assert not depart.converged.any()  # nobody takes the departed node's share: that is the finding
    # node 0's partitions, whatever their number at each N, are all still unowned at the window's end
    assert (depart.unowned_at_end == depart.member_partitions).all(), depart[["consumers", "member_partitions"]]
    assert (depart.member_partitions > 0).any()
    assert (depart[depart.member_partitions > 0].unowned_partition_s > 0).all()
    checked = by_id(herd.findings(summary))
    for fid in ("tubemq-join-refused", "tubemq-departed-share-unowned"):
        assert checked[fid].holds, checked[fid]


def test_report_renders_the_same_from_the_same_stored_results(herd_run, tmp_path, spark):
    run_dir = herd_run[0]
    from experiments.engine.environment import environment

    env = environment(spark, herd_run[2], "test", "pytest", experiment_versions=VERSIONS)
    (run_dir / "environment.json").write_text(json.dumps(env))
    first, second = tmp_path / "a" / "REPORT.md", tmp_path / "b" / "REPORT.md"
    first.parent.mkdir()
    second.parent.mkdir()
    assert main(["report", str(run_dir), "--out", str(first)]) == 0
    assert main(["report", str(run_dir), "--out", str(second)]) == 0
    text = first.read_text()
    assert text == second.read_text()
    assert "## Herd" in text and "❌" not in text
    # the comparison across designs takes the herd's columns from this run, and says "–" for what it lacks
    compared = text.split("## The designs compared")[1].split("## Failed")[0]
    assert all(f"| {herd_label} |" in compared for herd_label in _labels(herd.DESIGNS))
    assert f"control messages per join (herd, N={max(NS)})" in compared
    assert (first.parent / "report" / "figures" / "herd.png").stat().st_size > 10_000
    # every N of the run appears in the results tables
    for n in NS:
        assert f"| {n} |" in text
    # the run is tied to the code that made it (a checkout without git says so)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
    assert f"| lab commit | `{head.stdout.strip() if head.returncode == 0 else 'unknown'}" in text
    assert f"| experiment versions | herd {herd.EXPERIMENT.version} |" in text  # what the run ran, recorded


def _labels(designs):
    from experiments.engine.families import FAMILIES

    return [FAMILIES[d].label for d in designs]


def test_a_trace_cut_short_fails_its_trial_with_the_reason(herd_run, spark, tmp_path):
    run_dir, specs, _ = herd_run
    spec = specs[0]
    copy = tmp_path / "run"
    shutil.copytree(run_dir / "trials" / spec.trial_id, copy / "trials" / spec.trial_id)
    trace = copy / "trials" / spec.trial_id / "traces" / "c1.jsonl"
    trace.write_text("".join(trace.read_text().splitlines(keepends=True)[:-1]))  # drop its trace_close
    write_columnar(copy / "trials" / spec.trial_id)  # as the trial's task would have stored it
    results = pd.DataFrame([{"trial": spec.trial_id, "status": "ok", "reason": "", "trial_dir": "", "wall_s": 0.0,
                             "environment": "{}"}])
    summary = analyse(spark, str(copy), [spec], results)
    assert set(summary.status) == {"failed"}
    assert "the trace of c1 was never closed" in summary.reason.iloc[0]


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(herd_run):
    run_dir = herd_run[0]
    assert any(run_dir.glob("trials/*/traces/*.jsonl"))
    assert vocabulary_problems(run_dir) == {}
