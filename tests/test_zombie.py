"""The zombie experiment end to end: a consumer paused past its session timeout, or cut off, wakes up.

`pytest -m zombie` runs both faults (SIGSTOP then SIGCONT; blackholed ZooKeeper,
coordinator or broker links then healed) in every design, and asserts the finding
(`docs/experiments.md`): the ZooKeeper-era zombie processes partitions another consumer
owns and nothing refuses its commits; cut off, the commit it was making lands on
its new session and a committed offset moves backwards; the
coordinator-era zombie's commits are fenced with ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID, none is accepted, and no committed offset moves backwards;
RocketMQ's zombie's commits are accepted, none refused; TubeMQ's broker
serves and commits for the holder only, and nobody takes the zombie's share.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import run_experiment, trace_events, vocabulary_problems

from experiments.catalogue import zombie
from experiments.engine.families import REAL_CLIENTS
from experiments.engine.finding import by_id
from experiments.report.faults import ZOMBIE_TRIAL_TABLE
from experiments.report.parts import cell

pytestmark = [pytest.mark.zombie, pytest.mark.long, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def zombie_run(spark, tmp_path_factory):
    return run_experiment(spark, tmp_path_factory.mktemp("zombie-run"), zombie.grid("standard"))


def test_every_trial_ran_to_the_end_and_converged_after_each_fault(zombie_run):
    _, specs, summary = zombie_run
    failed = summary[summary.status != "ok"]
    assert failed.empty, failed[["trial", "reason"]].to_string()
    assert len(summary) == 2 * len(specs)  # the fault and its heal
    waits = summary.design.isin(zombie.WAITS_FOR_VICTIM)
    assert summary[~waits].converged.all()
    # a TubeMQ group cannot converge without its node (nobody takes its share), and converges once it is back
    assert not summary[waits & summary.change.isin(["pause", "cut"])].converged.astype(bool).any()
    assert summary[waits & summary.change.isin(["resume", "heal"])].converged.all()
    assert sorted(summary.change.unique()) == ["cut", "heal", "pause", "resume"]


def test_the_zookeeper_era_zombie_processes_what_another_owns_and_its_blocked_commit_lands(zombie_run):
    trials = zombie.per_trial(zombie_run[2])
    legacy = trials[trials.design == "zookeeper"]
    assert len(legacy) == 2
    # it works through what it had fetched, partitions another consumer took meanwhile
    assert (legacy.processed_after_loss > 0).all(), legacy.to_dict("records")
    assert (legacy.commits_fenced == 0).all()  # nothing in ZooKeeper can refuse a commit
    cut = legacy[legacy.variant == "cut"]
    assert (cut.zombie_commits_accepted > 0).all(), cut.to_dict("records")  # retryUntilConnected, then written
    assert (legacy.offsets_moved_backwards > 0).any(), legacy.to_dict("records")
    checked = by_id(zombie.findings(zombie_run[2]))
    for fid in ("zookeeper-pause-unrefused", "zookeeper-cut-unrefused", "zookeeper-cut-blocked-commit-lands",
                "zookeeper-offset-backwards"):
        assert checked[fid].holds, checked[fid]


def test_the_coordinator_era_zombie_is_fenced_and_no_committed_offset_moves_backwards(zombie_run):
    run_dir, _, summary = zombie_run
    trials = zombie.per_trial(summary)
    modern = trials[trials.design == "classic"]
    assert len(modern) == 2
    assert (modern.zombie_commits_accepted == 0).all() and (modern.offsets_moved_backwards == 0).all()
    assert (modern.commits_fenced > 0).all(), modern.to_dict("records")
    marks = pd.read_csv(run_dir / "marks.csv")
    fenced = marks[(marks.kind == "commit_fenced") & marks.trial.str.contains("classic")]
    assert set(fenced.label.str.split().str[0]) <= {"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"}
    checked = by_id(zombie.findings(summary))
    assert checked["classic-pause-fenced"].holds and checked["classic-cut-fenced"].holds, checked
    # fencing refuses its commits, not its processing: cut off, it went on processing what c2 owned
    assert checked["classic-cut-processing-goes-on"].holds, checked["classic-cut-processing-goes-on"]


def test_the_kip848_zombie_is_fenced_by_its_member_epoch(zombie_run):
    """KIP-848: its commit is refused (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or its heartbeat tells it it is no
    member (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH); nothing it commits lands, no offset moves backwards."""
    run_dir, _, summary = zombie_run
    trials = zombie.per_trial(summary)
    kip848 = trials[trials.design == "consumer-848"]
    assert len(kip848) == 2
    assert (kip848.zombie_commits_accepted == 0).all() and (kip848.offsets_moved_backwards == 0).all()
    assert ((kip848.commits_fenced + kip848.members_fenced) > 0).all(), kip848.to_dict("records")
    marks = pd.read_csv(run_dir / "marks.csv")
    fenced = marks[(marks.kind == "commit_fenced") & marks.trial.str.contains("kip848")]
    assert set(fenced.label.str.split().str[0]) <= {"STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"}
    checked = by_id(zombie.findings(summary))
    assert checked["consumer-848-pause-fenced"].holds and checked["consumer-848-cut-fenced"].holds, checked
    assert checked["consumer-848-cut-processing-goes-on"].holds, checked["consumer-848-cut-processing-goes-on"]


def test_the_real_kafka_clients_paused_are_fenced_as_the_labs_consumer_is(zombie_run):
    """kafka-python and librdkafka are paused only (no proxy can be put in their way); the coordinator answers the
    woken zombie with a fencing error, none of its commits is accepted, no committed offset moves backwards."""
    trials = zombie.per_trial(zombie_run[2])
    checked = by_id(zombie.findings(zombie_run[2]))
    for design in REAL_CLIENTS:
        real = trials[trials.design == design]
        assert list(real.variant) == ["pause"]
        assert (real.requests_fenced > 0).all() and (real.zombie_commits_accepted == 0).all(), real.to_dict("records")
        assert checked[f"{design}-pause-fenced"].holds, checked[f"{design}-pause-fenced"]


def test_rocketmq_fences_nothing_the_zombies_commits_are_accepted(zombie_run):
    run_dir, _, summary = zombie_run
    trials = zombie.per_trial(summary)
    rocket = trials[trials.design == "rocketmq"]
    assert len(rocket) == 2
    assert (rocket.commits_fenced == 0).all()  # no broker can refuse an offset
    assert (rocket.zombie_commits_accepted > 0).all(), rocket.to_dict("records")
    # the group converged without the victim only after a broker's scan dropped its channel (120 s without a
    # heartbeat) and the survivor's next periodic rebalance: minutes, where a session or member expires in 6 s
    faults = summary[(summary.design == "rocketmq") & summary.change.isin(["pause", "cut"])]
    assert (faults.convergence_ms > 60_000).all(), faults[["change", "convergence_ms"]]
    checked = by_id(zombie.findings(summary))
    assert checked["rocketmq-pause-accepted"].holds and checked["rocketmq-cut-accepted"].holds, checked


def test_tubemq_fences_the_zombie_and_its_share_waits_for_it(zombie_run):
    run_dir, _, summary = zombie_run
    trials = zombie.per_trial(summary)
    tube = trials[trials.design == "tubemq"]
    assert len(tube) == 2
    assert (tube.zombie_commits_accepted == 0).all() and (tube.double_processed_partition_s == 0).all()
    assert (tube.double_owned_partition_s == 0).all(), tube.to_dict("records")  # nobody claimed its share
    # its broker released the silent holder's registrations (30 s without a heartbeat or a fetch)
    for variant in zombie.VARIANTS:
        trial_dir = next(run_dir.glob(f"trials/zombie-{variant}-tubemq-*"))
        released = [e for trace in trial_dir.glob("traces/broker-*.jsonl")
                    for e in trace_events(trial_dir, trace.stem, "tubemq_released")]
        assert released, variant
    checked = by_id(zombie.findings(summary))
    assert checked["tubemq-pause-fenced-share-idle"].holds and checked["tubemq-cut-fenced-share-idle"].holds, \
        checked


def test_the_report_draws_a_timeline_per_fault(zombie_run, tmp_path):
    from experiments.report.render import render

    run_dir = zombie_run[0]
    (run_dir / "environment.json").write_text('{"profile": "quick", "command": "pytest"}')
    out = render(run_dir, tmp_path / "REPORT.md")
    text = out.read_text()
    for variant in zombie.VARIANTS:
        assert (tmp_path / "report" / "figures" / f"timeline-zombie-{variant}.png").stat().st_size > 10_000
        assert f"timeline-zombie-{variant}.png" in text
    assert "## Zombie" in text and "❌" not in text.split("## Zombie")[1].split("## Failed")[0]
    # the per-trial table sums each trial's changes (a cut zombie's accepted commits land in its heal window)
    columns = [c for c, _ in ZOMBIE_TRIAL_TABLE]
    for row in zombie.per_trial(zombie_run[2])[columns].itertuples(index=False):
        assert "| " + " | ".join(cell(v) for v in row) + " |" in text, row


def test_every_event_the_trials_wrote_is_in_the_vocabulary_with_its_fields(zombie_run):
    run_dir = zombie_run[0]
    assert any(run_dir.glob("trials/*/traces/*.jsonl"))
    assert vocabulary_problems(run_dir) == {}
