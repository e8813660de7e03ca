"""Kafka 0.8.2.2 itself as a design (`real_systems/kafka08`): its own brokers and `ZookeeperConsumerConnector`,
from the jars `scripts/setup.sh` fetched, in one herd trial, measured from the traces its driver writes.

The smoke trial of the default run: a group of 2 on 4 partitions, one join, one leave. What it checks is what
the lab's `zookeeper` design claims of 0.8, now of 0.8's own code: every member is told of each change by a
watch on `/consumers/<g>/ids` (the server's own count agrees), every member that rebalances reads every
member's registration, the new group owns every partition once, and every record produced is processed.
"""

from __future__ import annotations

import pytest
from conftest import in_window, real_system_trial, trace_events, window

from experiments.engine.trial import GROUP
from lab_cluster.errors import LabError
from lab_cluster.leaks import find_leaks
from real_systems import jars

pytestmark = [pytest.mark.timeout(300)]

DESIGN = "real-kafka-0.8.2.2"


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return real_system_trial(tmp_path_factory, DESIGN, "kafka08")


def test_the_trial_runs_and_leaves_nothing_behind(trial):
    result, _, before = trial
    assert result.status == "ok", result.reason
    assert set(find_leaks()) - before == set()  # the trial left nothing of its own


def test_the_join_notifies_every_member_by_its_watch_and_the_server_agrees(trial):
    _, trial_dir, _ = trial
    join = window(trial_dir, 1)
    ids = f"/consumers/{GROUP}/ids"
    told = {a for a in ("c1", "c2") if any(e["path"] == ids for e in in_window(
        trace_events(trial_dir, a, "zk_watch_fired"), join))}
    assert told == {"c1", "c2"}
    counters = {(e["f"]["index"], e["f"]["at"]): e["f"]["counters"]
                for e in trace_events(trial_dir, "scenario", "zk_server_counters")}
    triggered = sum(counters[(1, "after")][k] - counters[(1, "before")][k] for k in counters[(1, "after")]
                    if k.startswith("zk_sum_node_") and k.endswith("_watch_count"))
    heard = sum(len(in_window(trace_events(trial_dir, a, "zk_watch_fired"), join)) for a in ("c1", "c2", "j1"))
    assert heard == triggered


def test_every_member_that_rebalances_reads_every_registration(trial):
    _, trial_dir, _ = trial
    join = window(trial_dir, 1)
    members = {f"{GROUP}_{a}" for a in ("c1", "c2", "j1")}
    for actor in ("c1", "c2", "j1"):
        read = {e["path"].rsplit("/", 1)[1] for e in in_window(trace_events(trial_dir, actor, "zk_read"), join)
                if e["f"]["op"] == "getData" and e["path"].startswith(f"/consumers/{GROUP}/ids/")}
        assert read == members, actor


def test_after_each_change_every_partition_has_one_owner_and_everything_produced_is_processed(trial):
    _, trial_dir, _ = trial
    for index, live in ((1, ("c1", "c2", "j1")), (2, ("c1", "c2"))):
        span = window(trial_dir, index)
        owners = {}
        for actor in live:
            assigned = [e for e in trace_events(trial_dir, actor, "assigned") if e["ts_ns"] < span[1]]
            for _, partition in assigned[-1]["f"]["partitions"]:
                owners.setdefault(partition, []).append(actor)
        assert sorted(owners) == [0, 1, 2, 3] and all(len(o) == 1 for o in owners.values()), owners
    # what was produced before the group converged on its last change: the group had a settle second after it
    converged = trace_events(trial_dir, "scenario", "converged")[-1]["ts_ns"]
    produced = {(e["partition"], e["offset"]) for e in trace_events(trial_dir, "producer", "produced")
                if e["ts_ns"] < converged}
    processed = {(e["partition"], e["offset"]) for a in ("c1", "c2", "j1")
                 for e in trace_events(trial_dir, a, "processed")}
    assert produced and produced <= processed


def test_without_the_build_a_trial_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "ROOT", tmp_path / "real_systems")
    with pytest.raises(LabError) as caught:
        jars.classpath("kafka08")
    assert "scripts/setup.sh" in str(caught.value) and "Maven" in str(caught.value)
