"""Kafka's own group coordinator as a design (`real_systems/kafka3`): kafka-python on real Kafka 3.9.2 brokers in
ZooKeeper mode, fetched by `scripts/setup.sh`, in one herd trial: the default run's smoke trial of it.

What it checks is what the lab's coordinator claims of Kafka's, now of Kafka's own: its members hold no
ZooKeeper session (no request, no notification: the brokers keep the group), a join stops every member that
owns a partition (the classic protocol's eager rebalance: each revokes, then is assigned anew), each change
ends with every partition owned once, and every record produced is processed.
"""

from __future__ import annotations

import pytest
from conftest import real_system_trial, trace_events

from lab_cluster.leaks import find_leaks

pytestmark = [pytest.mark.timeout(300)]

MEMBERS = ("c1", "c2", "j1")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return real_system_trial(tmp_path_factory, "real-kafka-3.9", "kafka3")


def marks(trial_dir) -> list[int]:
    """The `change` marks (the join's, the leave's) and the `end`."""
    return ([e["ts_ns"] for e in trace_events(trial_dir, "scenario", "change")]
            + [trace_events(trial_dir, "scenario", "end")[0]["ts_ns"]])


def test_the_trial_runs_on_kafkas_brokers_and_leaves_nothing_behind(trial):
    result, trial_dir, before = trial
    assert result.status == "ok", result.reason
    assert (trial_dir / "kafka3" / "broker-1" / "server.properties").is_file()  # Kafka's brokers, not the lab's
    assert set(find_leaks()) - before == set()  # the trial left nothing of its own


def test_its_members_never_touch_zookeeper(trial):
    _, trial_dir, _ = trial
    for actor in MEMBERS:
        assert [e["kind"] for kind in ("zk_read", "zk_write", "zk_watch_fired")
                for e in trace_events(trial_dir, actor, kind)] == []


def test_a_join_stops_every_member_and_each_change_ends_with_one_owner_per_partition(trial):
    _, trial_dir, _ = trial
    join, leave, end = marks(trial_dir)
    for actor in ("c1", "c2"):  # the eager protocol: both revoke what they own when the newcomer joins
        assert any(join <= e["ts_ns"] < leave and e["f"]["partitions"]
                   for e in trace_events(trial_dir, actor, "revoked")), actor
    for until, live in ((leave, MEMBERS), (end, ("c1", "c2"))):
        owners = {}
        for actor in live:
            assigned = [e for e in trace_events(trial_dir, actor, "assigned") if e["ts_ns"] < until]
            for _, partition in assigned[-1]["f"]["partitions"]:
                owners.setdefault(partition, []).append(actor)
        assert sorted(owners) == [0, 1, 2, 3] and all(len(o) == 1 for o in owners.values()), owners


def test_everything_produced_before_the_last_change_settled_is_processed(trial):
    _, trial_dir, _ = trial
    converged = trace_events(trial_dir, "scenario", "converged")[-1]["ts_ns"]
    produced = {(e["partition"], e["offset"]) for e in trace_events(trial_dir, "producer", "produced")
                if e["ts_ns"] < converged}
    processed = {(e["partition"], e["offset"]) for a in MEMBERS for e in trace_events(trial_dir, a, "processed")}
    assert produced and produced <= processed
