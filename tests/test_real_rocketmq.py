"""RocketMQ 4.9.7 itself as a design (`real_systems/rocketmq49`): its own name server, brokers and
`DefaultMQPushConsumer`, from the jars `scripts/setup.sh` fetched, in one herd trial, measured from the traces its
driver writes.

The smoke trial of the default run: a group of 2 on 4 partitions (queues over three brokers), one join, one
leave. What it checks is what the lab's `rocketmq` design claims of RocketMQ's client, now of RocketMQ's own code:
every broker pushes NOTIFY_CONSUMER_IDS_CHANGED to every member on a change, each member allocates its own share
from the id list of one broker, the shares partition the topic with no overlap once settled (the queues laid out
as the lab's design lays them), every record produced is processed, and offsets are committed.
"""

from __future__ import annotations

import pytest
from conftest import in_window, real_system_trial, trace_events, window

from lab_cluster.errors import LabError
from lab_cluster.leaks import find_leaks
from real_systems import jars

pytestmark = [pytest.mark.timeout(300)]

DESIGN = "real-rocketmq-4.9"
BROKERS = ("broker-1", "broker-2", "broker-3")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return real_system_trial(tmp_path_factory, DESIGN, "rocketmq49")


def test_the_trial_runs_and_leaves_nothing_behind(trial):
    result, _, before = trial
    assert result.status == "ok", result.reason
    assert set(find_leaks()) - before == set()  # the trial left nothing of its own


def test_every_broker_tells_every_member_of_the_join(trial):
    _, trial_dir, _ = trial
    join = window(trial_dir, 1)
    for actor in ("c1", "c2", "j1"):
        told = {e["f"]["broker"] for e in in_window(trace_events(trial_dir, actor, "notified"), join)}
        assert told == set(BROKERS), actor


def test_each_member_allocates_from_one_brokers_id_list(trial):
    _, trial_dir, _ = trial
    for actor in ("c1", "c2", "j1"):
        for e in trace_events(trial_dir, actor, "assigned"):
            assert e["f"]["broker"] in BROKERS
            assert set(e["f"]["view"].split(",")) <= {"127.0.0.1@c1", "127.0.0.1@c2", "127.0.0.1@j1"}


def test_after_each_change_every_member_has_queues_and_they_partition_the_topic(trial):
    _, trial_dir, _ = trial
    for index, live in ((1, ("c1", "c2", "j1")), (2, ("c1", "c2"))):
        span = window(trial_dir, index)
        owners = {}
        for actor in live:
            assigned = [e for e in trace_events(trial_dir, actor, "assigned") if e["ts_ns"] < span[1]]
            mine = [p for _, p in assigned[-1]["f"]["partitions"]]
            assert mine, f"{actor} has no queue after change {index}"
            for partition in mine:
                owners.setdefault(partition, []).append(actor)
        assert sorted(owners) == [0, 1, 2, 3] and all(len(o) == 1 for o in owners.values()), owners
    # RocketMQ's AllocateMessageQueueAveragely on the lab's layout: the lab's design's shares (queues sorted by
    # broker name: broker-1 holds partitions 0 and 3, broker-2 1, broker-3 2)
    last = {a: [p for _, p in trace_events(trial_dir, a, "assigned")[-1]["f"]["partitions"]] for a in ("c1", "c2")}
    assert last == {"c1": [0, 3], "c2": [1, 2]}


def test_everything_produced_is_processed_and_offsets_are_committed(trial):
    _, trial_dir, _ = trial
    converged = trace_events(trial_dir, "scenario", "converged")[-1]["ts_ns"]
    produced = {(e["partition"], e["offset"]) for e in trace_events(trial_dir, "producer", "produced")
                if e["ts_ns"] < converged}
    processed = {(e["partition"], e["offset"]) for a in ("c1", "c2", "j1")
                 for e in trace_events(trial_dir, a, "processed")}
    assert produced and produced <= processed
    commits = [e for a in ("c1", "c2", "j1") for e in trace_events(trial_dir, a, "commit")]
    assert {e["partition"] for e in commits} == {0, 1, 2, 3}
    assert all(e["f"]["outcome"] == "accepted" for e in commits)


def test_without_the_build_a_trial_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "ROOT", tmp_path / "real_systems")
    with pytest.raises(LabError) as caught:
        jars.classpath("rocketmq49")
    assert "scripts/setup.sh" in str(caught.value) and "Maven" in str(caught.value)
