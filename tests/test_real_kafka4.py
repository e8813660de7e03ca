"""Kafka 4's own KIP-848 coordinator as a design (`real_systems/kafka4`): librdkafka with `group.protocol=consumer`
on three real Kafka 4.1.1 nodes in KRaft mode, in one herd trial: the default run's smoke trial of it.

What it checks is what the lab's `consumer-848` claims of KIP-848, now of Kafka's own: no member stops the group
(on a join the old members revoke only the partitions that move to the newcomer, never all they own), each
change ends with every partition owned once, every record produced is processed, and nobody touches ZooKeeper
(a KRaft cluster has none; the trial's runs unused).
"""

from __future__ import annotations

import pytest
from conftest import real_system_trial, trace_events

from lab_cluster.leaks import find_leaks

pytestmark = [pytest.mark.timeout(300)]

MEMBERS = ("c1", "c2", "j1")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return real_system_trial(tmp_path_factory, "real-kafka-4", "kafka4")


def owned_before(trial_dir, actor: str, until: int) -> set[int]:
    assigned = [e for e in trace_events(trial_dir, actor, "assigned") if e["ts_ns"] < until]
    return {p for _, p in assigned[-1]["f"]["partitions"]} if assigned else set()


def test_the_trial_runs_on_a_kraft_cluster_and_leaves_nothing_behind(trial):
    result, trial_dir, before = trial
    assert result.status == "ok", result.reason
    assert (trial_dir / "kafka4" / "quorum.json").is_file()
    assert set(find_leaks()) - before == set()  # the trial left nothing of its own


def test_on_a_join_the_old_members_revoke_only_what_moves(trial):
    _, trial_dir, _ = trial
    join, leave = [e["ts_ns"] for e in trace_events(trial_dir, "scenario", "change")]
    for actor in ("c1", "c2"):
        had = owned_before(trial_dir, actor, join)
        revoked = {p for e in trace_events(trial_dir, actor, "revoked") if join <= e["ts_ns"] < leave
                   for _, p in e["f"]["partitions"]}
        kept = owned_before(trial_dir, actor, leave)
        assert revoked == had - kept and kept, (actor, had, revoked, kept)  # it kept some, gave up only the rest


def test_each_change_ends_with_one_owner_per_partition_and_everything_is_processed(trial):
    _, trial_dir, _ = trial
    marks = ([e["ts_ns"] for e in trace_events(trial_dir, "scenario", "change")]
             + [trace_events(trial_dir, "scenario", "end")[0]["ts_ns"]])
    for until, live in ((marks[1], MEMBERS), (marks[2], ("c1", "c2"))):
        owners = {}
        for actor in live:
            for partition in owned_before(trial_dir, actor, until):
                owners.setdefault(partition, []).append(actor)
        assert sorted(owners) == [0, 1, 2, 3] and all(len(o) == 1 for o in owners.values()), owners
    converged = trace_events(trial_dir, "scenario", "converged")[-1]["ts_ns"]
    produced = {(e["partition"], e["offset"]) for e in trace_events(trial_dir, "producer", "produced")
                if e["ts_ns"] < converged}
    processed = {(e["partition"], e["offset"]) for a in MEMBERS for e in trace_events(trial_dir, a, "processed")}
    assert produced and produced <= processed
    assert not [e for a in MEMBERS for k in ("zk_read", "zk_write") for e in trace_events(trial_dir, a, k)]


def test_a_cluster_id_never_reads_as_an_option_to_the_storage_tool(monkeypatch):
    """Kafka's `Uuid.randomUuid()` never returns an id whose text starts with "-": `kafka-storage format -t -x..`
    would take it for an option. One id in 64 does; the lab draws again, as Kafka does."""
    import uuid

    from real_systems.kafka4 import broker

    drawn = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(int=1), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(drawn))
    assert broker._random_uuid() == "EBAQEBAQEBAQEBAQEBAQEA"  # the first starts with "-", the second is reserved


def test_making_the_topic_retries_a_node_that_drops_its_connection_mid_start(monkeypatch):
    """CI saw a node drop the admin client's connection as the cluster came up ("socket disconnected"): a
    retriable error, retried with a new client; an error that is not retriable is raised at once."""
    from kafka.errors import KafkaConnectionError, TopicAuthorizationFailedError

    from real_systems.kafka4 import broker

    admins = []

    class FakeAdmin:
        def __init__(self, **_):
            self.closed = False
            admins.append(self)

        def create_topics(self, topics):
            if len(admins) == 1:
                raise KafkaConnectionError("socket disconnected")
            if failure:
                raise failure

        def describe_topics(self, names):
            return [{"partitions": [{"leader_id": 1}] * 4}]

        def close(self):
            self.closed = True

    monkeypatch.setattr(broker, "KafkaAdminClient", FakeAdmin)
    monkeypatch.setattr(broker.time, "sleep", lambda _: None)
    failure = None
    broker.create_topic("127.0.0.1:1", "t", 4)
    assert len(admins) == 2 and all(a.closed for a in admins)
    admins.clear()
    failure = TopicAuthorizationFailedError("no")
    with pytest.raises(TopicAuthorizationFailedError):
        broker.create_topic("127.0.0.1:1", "t", 4)
    assert len(admins) == 2 and all(a.closed for a in admins)
