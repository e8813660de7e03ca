"""The metrics of `docs/metrics.md`, computed in Spark on small synthetic traces whose answers are known by
construction.

Each trial below is written as trace files exactly as `TraceRecorder` writes
them (one JSON line per event, `trace_open` ... `trace_close`), with
timestamps in whole tenths of a second so the expected figures can be worked
out by hand next to the events.
"""

from __future__ import annotations

import json

import pytest

from experiments import metrics
from experiments.digest import Digest
from lab_cluster.trace_reader import incomplete_trials, load_traces

pytestmark = pytest.mark.spark

S = 1_000_000_000  # ns per second


def _write(trial_dir, trial: str, actor: str, events: list[tuple], design="zookeeper", close=True):
    """events: (seconds, kind, {column or field: value})."""
    path = trial_dir / "traces" / f"{actor}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    rows = [(0.0, "trace_open", {})] + events + ([(99.0, "trace_close", {})] if close else [])
    for seconds, kind, values in rows:
        top = {k: v for k, v in values.items() if k in ("topic", "partition", "offset", "path", "generation",
                                                         "member", "error")}
        extra = {k: v for k, v in values.items() if k not in top}
        event = {"ts_ns": int(round(seconds * S)), "wall_ms": 0, "trial": trial, "design": design, "actor": actor,
                 "kind": kind, **top}
        if extra:
            event["fields"] = json.dumps(extra)
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n")


def _counters(children: int, packets: int) -> dict:
    return {"counters": {"zk_packets_received": packets, "zk_sum_node_children_watch_count": children,
                         "zk_sum_node_created_watch_count": 0, "zk_sum_node_deleted_watch_count": 0,
                         "zk_sum_node_changed_watch_count": 0}}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    # -- trial "join": c1 owns both partitions; c2 joins at 10 s; handover ends at 12 s --------------
    a = root / "join"
    _write(a, "join", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (9.9, "zk_server_counters", {"index": 1, "at": "before", **_counters(10, 100)}),
        (10.0, "change", {"index": 1, "change": "join", "members_before": 1, "members_after": 2}),
        (14.0, "zk_server_counters", {"index": 1, "at": "after", **_counters(11, 120)}),
        (15.0, "end", {})])
    _write(a, "join", "c1", [
        (0.6, "consumer_start", {"config": {"group.id": "g"}}),
        (1.0, "assigned", {"partitions": [["t", 0], ["t", 1]], "view": 4}),
        (10.1, "zk_watch_fired", {"path": "/consumers/g/ids"}),
        (10.3, "zk_read", {"op": "getChildren", "path": "/consumers/g/ids"}),
        (10.3, "zk_read", {"op": "getData", "path": "/consumers/g/ids/c2"}),  # a member's registration
        (10.4, "view", {"members": ["a", "b"], "cversion": 5}),
        (10.5, "revoked", {"partitions": [["t", 0], ["t", 1]]}),
        (10.5, "rebalance_begin", {"attempt": 1}),
        (10.7, "view", {"members": ["a"], "cversion": 4}),  # a stale read: older than one already read
        (11.0, "assigned", {"partitions": [["t", 0]], "view": 4}),  # computed from the stale view
        (13.0, "zk_read", {"op": "getData", "path": "/consumers/g/ids/c1"})])  # after convergence: not counted
    _write(a, "join", "c2", [
        (10.05, "consumer_start", {"config": {"group.id": "g"}}),
        (10.2, "zk_read", {"op": "getData", "path": "/brokers/topics/t"}),  # a read, not of a registration
        (10.2, "zk_write", {"op": "create", "path": "/consumers/g/ids/c2"}),  # a write, not a read
        (10.2, "zk_read", {"op": "getData", "path": "/consumers/g/ids/c1"}),
        (10.25, "zk_watch_fired", {"event_type": "NONE", "zk_state": "CONNECTING"}),  # session news: not counted
        (10.3, "rebalance_begin", {"attempt": 1}),
        (10.4, "view", {"members": ["a", "b"], "cversion": 5}),
        (10.6, "owner_conflict", {"topic": "t", "partition": 1}),
        (10.6, "rebalance_begin", {"attempt": 2}),
        (12.0, "assigned", {"partitions": [["t", 1]], "view": 5})])
    _write(a, "join", "producer", [(1.0 + i / 10, "produced", {"topic": "t", "partition": 0, "offset": i})
                                   for i in range(3)], design="cluster")
    _write(a, "join", "c1b", [], design="cluster")  # not a consumer (no consumer_start): ignored
    # -- trial "zombie": c1 never lets go of partition 0; c2 takes it at 6 s -------------------------
    b = root / "zombie"
    _write(b, "zombie", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 1}),
        (4.9, "zk_server_counters", {"index": 1, "at": "before", **_counters(0, 50)}),
        (5.0, "change", {"index": 1, "change": "leave", "members_before": 2, "members_after": 1}),
        (19.0, "zk_server_counters", {"index": 1, "at": "after", **_counters(3, 60)}),
        (20.0, "end", {})])
    _write(b, "zombie", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0]]}),
        (8.0, "commit", {"topic": "t", "partition": 0, "offset": 6, "outcome": "accepted"}),  # a zombie's commit
        (8.5, "commit", {"topic": "t", "partition": 0, "offset": 6, "outcome": "fenced"}),   # refused: not counted
        (9.5, "commit", {"topic": "t", "partition": 0, "offset": 7, "outcome": "accepted"}),  # below c2's 8: backwards
        *[(1.0 + i / 10, "processed", {"topic": "t", "partition": 0, "offset": i}) for i in range(6)],
        (7.1, "processed", {"topic": "t", "partition": 0, "offset": 6}),  # 5.6 s after offset 5: a new stretch,
        (7.3, "processed", {"topic": "t", "partition": 0, "offset": 7})],  # 7.1-7.3, beside c2's 7.0-7.4
        design="classic")
    _write(b, "zombie", "c2", [
        (0.6, "consumer_start", {"config": {}}),
        (6.0, "assigned", {"partitions": [["t", 0]]}),
        (9.0, "commit", {"topic": "t", "partition": 0, "offset": 8, "outcome": "accepted"}),
        *[(7.0 + i / 10, "processed", {"topic": "t", "partition": 0, "offset": o})
          for i, o in enumerate([4, 5, 6, 7, 9])]], design="classic")
    _write(b, "zombie", "producer", [(0.7, "produced", {"topic": "t", "partition": 0, "offset": i})
                                     for i in range(12)], design="cluster")
    # -- trial "rocket": RocketMQ's j1 joins at 2 s; every broker pushes to both members ------------
    r = root / "rocket"
    _write(r, "rocket", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (2.0, "change", {"index": 1, "change": "join", "member": "j1", "members_before": 1, "members_after": 2}),
        (9.0, "end", {})], design="rocketmq")
    _write(r, "rocket", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0], ["t", 1]], "view": "c1"}),
        (1.1, "processed", {"topic": "t", "partition": 1, "offset": 0}),
        (2.3, "notified", {"broker": "broker-1"}),
        (2.4, "notified", {"broker": "broker-2"}),
        (2.5, "revoked", {"partitions": [["t", 1]]}),
        (2.5, "assigned", {"partitions": [["t", 0]], "view": "c1,j1"})], design="rocketmq")
    _write(r, "rocket", "j1", [
        (2.1, "consumer_start", {"config": {}}),
        (2.3, "notified", {"broker": "broker-1"}),
        (2.6, "assigned", {"partitions": [["t", 1]], "view": "c1,j1"}),
        (2.9, "processed", {"topic": "t", "partition": 1, "offset": 1})], design="rocketmq")
    _write(r, "rocket", "broker-1", [(2.2, "rocketmq_request", {"api": "HEART_BEAT", "code": "SUCCESS"}),
                                     (2.55, "rocketmq_request", {"api": "GET_CONSUMER_LIST_BY_GROUP",
                                                                 "code": "SUCCESS"}),
                                     (5.0, "rocketmq_request", {"api": "HEART_BEAT", "code": "SUCCESS"})],
           design="cluster")
    _write(r, "rocket", "producer", [(0.7 + i, "produced", {"topic": "t", "partition": 1, "offset": i})
                                     for i in range(2)], design="cluster")
    # -- trial "tube": TubeMQ's node 0 (c1) departs at 5 s and nobody takes its partition ----------
    tm = root / "tube"
    _write(tm, "tube", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (5.0, "change", {"index": 1, "change": "depart", "member": "c1", "members_before": 2, "members_after": 1,
                         "members": ["c2"]}),
        (30.0, "end", {})], design="tubemq")
    _write(tm, "tube", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0]], "view": "sourceCount=2"}),
        (5.1, "revoked", {"partitions": [["t", 0]]})], design="tubemq")
    _write(tm, "tube", "c2", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 1]], "view": "sourceCount=2"}),
        (15.0, "rebalance_begin", {}),  # its metadata check: nothing new of its own
        (29.0, "processed", {"topic": "t", "partition": 1, "offset": 0})], design="tubemq")
    _write(tm, "tube", "broker-1", [
        (5.1, "tubemq_request", {"api": "consumerRegisterC2B", "code": "SUCCESS"}),  # c1's unregister
        (6.0, "tubemq_request", {"api": "getMessagesC2B", "code": "SUCCESS"}),  # the data path: not counted
        (6.1, "tubemq_request", {"api": "consumerCommitC2B", "code": "SUCCESS"}),  # nor its confirm
        (14.0, "tubemq_request", {"api": "consumerHeartbeatC2B", "code": "SUCCESS"}),
        (15.0, "tubemq_request", {"api": "consumerGetPartMetaInfoC2M", "code": "SUCCESS"})], design="cluster")
    _write(tm, "tube", "producer", [(0.7, "produced", {"topic": "t", "partition": 1, "offset": 0})],
           design="cluster")
    # -- trial "handback": c2 held c1's partition 3-5 s and let go; c1, which never let go, commits at 5.5 s --
    hb = root / "handback"
    _write(hb, "handback", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 1}),
        (2.0, "change", {"index": 1, "change": "resume", "member": "c1", "members_before": 1, "members_after": 2}),
        (9.0, "end", {})], design="rocketmq")
    _write(hb, "handback", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0]]}),
        (5.4, "processed", {"topic": "t", "partition": 0, "offset": 2}),  # a record of its stale batch: after loss
        (5.5, "commit", {"topic": "t", "partition": 0, "offset": 3, "outcome": "accepted"}),  # stale: a zombie's
        (5.6, "revoked", {"partitions": [["t", 0]]})], design="rocketmq")
    _write(hb, "handback", "c2", [
        (0.6, "consumer_start", {"config": {}}),
        (3.0, "assigned", {"partitions": [["t", 0]]}),
        (4.0, "commit", {"topic": "t", "partition": 0, "offset": 9, "outcome": "accepted"}),  # the owner's: not
        (5.0, "revoked", {"partitions": [["t", 0]]})], design="rocketmq")
    _write(hb, "handback", "producer", [(0.7, "produced", {"topic": "t", "partition": 0, "offset": i})
                                        for i in range(4)], design="cluster")
    # -- trial "storm": c1 (static) restarts at 2 s into its generation; c2 (dynamic) restarts at 10 s --------
    st = root / "storm"
    _write(st, "storm", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (2.0, "change", {"index": 1, "change": "restart", "member": "c1", "members_before": 2, "members_after": 2,
                         "members": ["c1", "c2"]}),
        (10.0, "change", {"index": 2, "change": "restart", "member": "c2", "members_before": 2, "members_after": 2,
                          "members": ["c1", "c2"]}),
        (20.0, "end", {})], design="classic")
    _write(st, "storm", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0]], "generation": 1}),
        (2.1, "revoked", {"partitions": [["t", 0]], "generation": 1}),  # its own close: not another's revocation
        (2.2, "trace_close", {"events": 4}),
        (3.0, "trace_open", {"pid": 2}),  # its second life, appended to the same trace
        (3.0, "consumer_start", {"config": {}}),
        (3.5, "assigned", {"partitions": [["t", 0]], "generation": 1}),  # back into its generation: no new round
        (10.5, "revoked", {"partitions": [["t", 0]], "generation": 1}),  # c2's restart stops c1 (eager)
        (11.0, "assigned", {"partitions": [["t", 0], ["t", 1]], "generation": 2}),
        (11.5, "revoked", {"partitions": [], "generation": 2}),  # names no partition: not a revocation
        (12.5, "revoked", {"partitions": [["t", 1]], "generation": 2}),
        (13.0, "assigned", {"partitions": [["t", 0]], "generation": 3})], design="classic")
    _write(st, "storm", "c2", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 1]], "generation": 1}),
        (10.2, "trace_close", {"events": 3}),  # stopped without a `revoked` (as a ZooKeeper-era consumer does)
        (11.0, "trace_open", {"pid": 3}),
        (11.0, "consumer_start", {"config": {}}),
        (13.0, "assigned", {"partitions": [["t", 1]], "generation": 3})], design="classic")
    # -- trial "rounds": ZooKeeper-era views and TubeMQ's master's rebalance ids as rebalance rounds -----
    ro = root / "rounds"
    _write(ro, "rounds", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (2.0, "change", {"index": 1, "change": "join", "member": "c9", "members_before": 2, "members_after": 2}),
        (9.0, "end", {})], design="zookeeper")
    _write(ro, "rounds", "c1", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 0]], "view": 4}),
        (3.0, "assigned", {"partitions": [["t", 0]], "view": 5}),
        (3.5, "assigned", {"partitions": [["t", 0]], "view": 5}),  # a retry from the same view: the same round
        (4.0, "assigned", {"partitions": [["t", 0]], "view": 6})], design="zookeeper")
    _write(ro, "rounds", "c2", [
        (0.6, "consumer_start", {"config": {}}),
        (1.0, "assigned", {"partitions": [["t", 1]], "view": "master"}),
        (3.2, "tubemq_event", {"event": "disconnect", "partitions": [], "rebalance_id": 7}),
        (3.3, "tubemq_event", {"event": "connect", "partitions": [], "rebalance_id": 7}),  # one master round
        (3.4, "assigned", {"partitions": [["t", 1]], "view": "master"})], design="tubemq-server")
    # -- trial "grow": the topic grows from 2 to 4 partitions at 10.1 s under c1 alone ---------------------
    g = root / "grow"
    _write(g, "grow", "scenario", [
        (0.5, "setup", {"topic": "t", "partitions": 2}),
        (10.0, "change", {"index": 1, "change": "grow", "members_before": 1, "members_after": 1,
                          "members": ["c1"], "member": "partitions-4"}),
        (10.1, "topic_grown", {"topic": "t", "before": 2, "partitions": 4}),
        (16.0, "end", {})], design="classic")
    _write(g, "grow", "c1", [
        (0.6, "consumer_start", {}),
        (1.0, "assigned", {"partitions": [["t", 0], ["t", 1]], "generation": 1}),
        (11.0, "partitions_seen", {"topic": "t", "partitions": 3, "before": 2}),  # not yet the whole growth
        (12.0, "partitions_seen", {"topic": "t", "partitions": 4, "before": 3}),  # learnt: 1.9 s after
        (12.5, "revoked", {"partitions": [["t", 0], ["t", 1]], "generation": 1}),
        (13.0, "assigned", {"partitions": [["t", 0], ["t", 1], ["t", 2], ["t", 3]], "generation": 2}),
        (13.5, "processed", {"topic": "t", "partition": 2, "offset": 0}),
        (14.0, "processed", {"topic": "t", "partition": 3, "offset": 0}),  # every new one processed: 3.9 s
        (14.2, "processed", {"topic": "t", "partition": 3, "offset": 1})], design="classic")
    _write(g, "grow", "producer", [(10.5, "produced", {"topic": "t", "partition": p, "offset": 0}) for p in (2, 3)]
           + [(10.6, "produced", {"topic": "t", "partition": 3, "offset": 1})], design="classic")
    # -- trial "cut": a trace that was never closed, and a message nobody produced -----------------
    c = root / "cut"
    _write(c, "cut", "c1", [(1.0, "consumer_start", {}),
                            (2.0, "processed", {"topic": "t", "partition": 0, "offset": 7})], close=False)
    _write(c, "cut", "producer", [(0.7, "produced", {"topic": "t", "partition": 0, "offset": 0})])
    return root


@pytest.fixture(scope="module")
def events(spark, traces):
    return load_traces(spark, traces / "*")


@pytest.fixture(scope="module")
def digest(events):
    """The events' digest as the harness has it: computed once and cached, the metrics planned in the settings
    that suit its size (`Digest.settings`). A metric given the bare events would digest them again inside its
    own plan (about 800 shuffles here, a minute of Spark for a few hundred events); `tests/test_digest.py`
    shows every way of digesting gives the same metrics."""
    d = Digest.of(events, cache=True)
    with d.settings():
        yield d
    d.release()


@pytest.fixture(scope="module")
def all_changes(digest):
    return metrics.change_metrics(digest).collect()


@pytest.fixture(scope="module")
def changes(all_changes):
    """The trials of one change, by trial."""
    return {r.trial: r.asDict() for r in all_changes}


@pytest.fixture(scope="module")
def windows(all_changes):
    """Every change, by (trial, change index)."""
    return {(r.trial, r.change_index): r.asDict() for r in all_changes}


def test_counts_per_change(changes):
    join = changes["join"]
    assert join["notifications_per_change"] == 1
    # from the change until the last assignment (12 s): c2's 3 + c1's 2; c1's read at 13 s comes after
    assert join["zk_requests_per_change"] == 5
    assert join["membership_reads_per_change"] == 2  # of those, c1's and c2's getData of a registration
    assert join["broker_requests_per_change"] == 0
    assert join["control_messages_per_change"] == 6
    assert join["rebalance_attempts"] == 3
    assert join["owner_conflicts"] == 1
    assert join["rebalance_failures"] == 0


def test_rocketmq_pushes_are_notifications_its_requests_are_group_requests_and_a_joiner_waits(changes):
    rocket = changes["rocket"]
    assert rocket["notifications_per_change"] == 3  # every NOTIFY_CONSUMER_IDS_CHANGED a member received
    assert rocket["broker_requests_per_change"] == 2  # until convergence at 2.6 s: the 5 s heartbeat is after
    assert rocket["zk_requests_per_change"] == 0
    assert rocket["first_message_ms"] == pytest.approx(800.0)  # j1 started at 2.1 s, processed at 2.9 s
    assert rocket["view_divergence"] == 1  # by 2.6 s both worked from "c1,j1"; c1's old view ended at 2.5 s
    assert changes["join"]["first_message_ms"] is None  # the joiner there named no member in its change


def test_a_grown_topic_is_learnt_owned_and_processed_from_the_moment_it_grew(changes):
    grow = changes["grow"]
    assert grow["learnt_ms"] == pytest.approx(1900.0)  # the first partitions_seen of all 4, at 12 s
    assert grow["first_new_owned_ms"] == pytest.approx(2900.0)  # c1 assigned 2 and 3 at 13 s
    assert grow["new_processing_ms"] == pytest.approx(3900.0)  # partition 3's first record, at 14 s
    assert grow["new_unowned_partition_s"] == pytest.approx(2 * 2.9)  # both new ones, 10.1 s to 13 s
    assert grow["unowned_partition_s"] == pytest.approx(2 * 2.9 + 2 * 0.5)  # and the old ones, revoked 12.5-13 s
    assert grow["converged"] and grow["convergence_ms"] == pytest.approx(3000.0)  # every one of the 4 owned
    assert changes["join"]["learnt_ms"] is None and changes["join"]["new_unowned_partition_s"] is None


def test_a_departed_share_nobody_takes_is_unowned_at_the_end_and_tubemqs_data_path_is_not_control(changes):
    tube = changes["tube"]
    assert tube["member_partitions"] == 1 and tube["unowned_at_end"] == 1  # what c1 held, still nobody's at 30 s
    assert tube["unowned_partition_s"] == pytest.approx(24.9)  # partition 0 from 5.1 s to the window's end
    assert tube["converged"] is False and tube["convergence_ms"] is None
    assert tube["broker_requests_per_change"] == 3  # unregister, heartbeat, metadata; not the fetch or its confirm
    assert tube["notifications_per_change"] == 0
    assert changes["join"]["unowned_at_end"] == 0 and changes["zombie"]["member_partitions"] == 0


def test_partitions_moved_count_new_owners_not_an_eager_revoke_given_back(changes):
    # join: c1 revoked both at 10.5 s and was given t-0 back (not moved); t-1 went to c2
    assert changes["join"]["partitions_moved"] == 1
    # zombie: c2 took t-0 at 6 s while c1 never let go: a new owner at the window's end, so moved
    assert changes["zombie"]["partitions_moved"] == 1
    # the spread needs the change's members (these changes name none)
    assert changes["join"]["partitions_spread"] is None


def test_convergence_and_unowned_time(changes):
    join = changes["join"]
    assert join["converged"] is True
    assert join["convergence_ms"] == pytest.approx(2000.0)  # change at 10 s, last assignment at 12 s
    # partition 0 unowned 10.5-11.0, partition 1 unowned 10.5-12.0
    assert join["unowned_partition_s"] == pytest.approx(2.0)
    assert join["double_owned_partition_s"] == pytest.approx(0.0)


def test_view_divergence(changes):
    # from 12 s, c1's assignment (from cversion 4) and c2's (from cversion 5) are in effect at once
    assert changes["join"]["view_divergence"] == 2
    assert changes["join"]["stale_views"] == 1  # c1 read cversion 4 after cversion 5 had been read


def test_double_ownership_and_zombie_commits(changes):
    zombie = changes["zombie"]
    # c1 owns partition 0 to the end of its trace (99 s), c2 from 6 s: two owners from 6 s to the window's end, 20 s
    assert zombie["double_owned_partition_s"] == pytest.approx(14.0)
    assert zombie["unowned_partition_s"] == pytest.approx(0.0)
    # c1's accepted commits at 8 s and 9.5 s; its fenced one and c2's do not count
    assert zombie["zombie_commits_accepted"] == 2
    assert zombie["double_processed_partition_s"] == pytest.approx(0.2)  # both processed partition 0, 7.1-7.3 s
    assert zombie["converged"] is False and zombie["convergence_ms"] is None
    # a zombie's commit counts though the consumer that took its partition has let go again before it lands
    assert changes["handback"]["zombie_commits_accepted"] == 1
    # records processed after loss: c1's at 7.1 and 7.3 s (c2 took partition 0 at 6 s), not its earlier ones nor
    # c2's; and in "handback" c1's record at 5.4 s, though nobody processed the partition at that moment
    assert zombie["processed_after_loss"] == 2
    assert changes["handback"]["processed_after_loss"] == 1 and changes["handback"]["double_processed_partition_s"] == 0


def test_duplicates_and_gaps(digest):
    per_trial = {r.trial: r for r in metrics.trial_metrics(digest).collect()}
    zombie = per_trial["zombie"]
    assert zombie.duplicates == 4  # offsets 4 to 7, processed by both
    assert zombie.offsets_moved_backwards == 1  # c1's 7 at 9.5 s, after c2's 8 at 9 s
    assert zombie.commits_fenced == 1
    assert per_trial["join"].offsets_moved_backwards == 0
    assert zombie.gaps == 1  # offset 8: below the highest processed (9), never processed; 10 and 11 are not gaps
    assert zombie.messages_produced == 12


def test_cross_check(digest):
    checks = {r.trial: r for r in metrics.cross_check(digest).collect()}
    assert checks["join"].client_notifications == checks["join"].server_notifications == 1
    assert checks["join"].client_requests == 6  # every request between the two snapshots, 13 s included
    assert checks["join"].cross_check_problem is None
    assert checks["zombie"].server_notifications == 3
    assert ("clients recorded 0 watch notifications (and 0 of their own they would not hear), the server triggered 3"
            in checks["zombie"].cross_check_problem)


def test_incomplete_trials(events):
    problems = {}
    for row in incomplete_trials(events).collect():
        problems.setdefault(row.trial, []).append(row.problem)
    assert set(problems) == {"cut"}
    assert any("c1 was never closed" in p for p in problems["cut"])
    assert any("1 processed message(s) were never produced" in p for p in problems["cut"])


def test_a_restart_costs_the_others_revocations_and_rounds_only_where_they_happen(windows):
    static, eager = windows[("storm", 1)], windows[("storm", 2)]
    # c1's restart into its own generation: its own revocation is not another member's, and no round begins
    assert (static["members_revoking"], static["partitions_revoked"], static["generations"]) == (0, 0, 0)
    assert static["unowned_partition_s"] == pytest.approx(1.4)  # its partition, 2.1-3.5 s: while it was down
    # c2's restart: c1 revokes (its empty revocation at 11.5 s names nothing), generations 2 and 3 begin
    assert (eager["members_revoking"], eager["partitions_revoked"], eager["generations"]) == (1, 2, 2)
    # c2's first life owns partition 1 until its trace closed at 10.2 s, not until its second life's assignment:
    # unowned 10.2-11.0 and 12.5-13.0 (partition 1), 10.5-11.0 (partition 0); nothing owned twice
    assert eager["unowned_partition_s"] == pytest.approx(1.8)
    assert eager["double_owned_partition_s"] == 0


def test_views_and_the_masters_rebalance_ids_are_rounds_where_members_compute(windows):
    # views 5 and 6 (the second 5 is a retry of one round), and the master's round 7 carried out in two events
    assert windows[("rounds", 1)]["generations"] == 3
