"""Cooperative rebalancing (KIP-429) on real brokers: what a member keeps, it never stops processing.

Members configured with `partition.assignment.strategy=cooperative-sticky`
speak the cooperative protocol (`lab_cluster/assignment/base.py:
rebalance_protocol`): a rebalance revokes nothing up front; the leader's
assignor withholds every partition changing owner
(`lab_cluster/assignment/cooperative_sticky.py`); its old owner revokes it
after SyncGroup and rejoins; the second round hands it to its new owner
(`modern_coord/consumer.py`). The coordinator is the same as for eager
members.
"""

from __future__ import annotations

import pytest
from conftest import _start_producer, _wait_produced
from test_modern import ALL, Group, _member_events, describe

COOPERATIVE = {"partition.assignment.strategy": "cooperative-sticky"}


@pytest.fixture
def group(cluster):
    """The group's members, each a consumer thread in this process (`test_modern.Group`); all stopped after."""
    g = Group(cluster)
    yield g
    g.stop_all()


def _owned_at_end(group, name):
    """The partitions a member's last `assigned` event gave it."""
    return {tuple(tp) for tp in _member_events(group, name, "assigned")[-1]["f"]["partitions"]}


def test_a_join_stops_only_the_moving_partition_which_passes_through_a_second_round(cluster, group):
    _start_producer(cluster, rate=40)
    _wait_produced(cluster, at_least=5)
    for name in ("c1", "c2"):
        group.add(name, **COOPERATIVE)
    before = group.settle(2)
    held = {name: set(group.members[name].assignment()) for name in ("c1", "c2")}
    seen = {name: len(_member_events(group, name, "assigned")) for name in held}
    # if c1 formed the group alone before c2 joined, it already revoked half its partitions then: judge only
    # what each member revoked after the newcomer came
    revoked_before = {name: len(_member_events(group, name, "revoked")) for name in held}
    begins_before = {name: len(_member_events(group, name, "rebalance_begin")) for name in held}
    c3 = group.add("c3", **COOPERATIVE)
    after = group.settle(3)

    # two generations: the first withholds the moving partition, the second hands it out
    assert after["generation"] == before["generation"] + 2
    assert [j["f"]["protocol"] for j in _member_events(group, "c3", "join") if j["error"] == "NONE"] == \
        ["cooperative-sticky"] * 2
    # what the leader handed the newcomer in each round: nothing in round one (the moving partition withheld),
    # the moving partition in round two. Judged from the leader's assignments, not from the newcomer's own
    # `assigned` events: the old owner's rejoin may overtake the newcomer's SyncGroup of round one, which then
    # answers REBALANCE_IN_PROGRESS (as Kafka's coordinator does), so the newcomer may never see round one.
    given = {a["generation"]: a["f"]["assignment"][c3.member_id]
             for name in ("c1", "c2") for a in _member_events(group, name, "leader_assignment")
             if c3.member_id in a["f"]["assignment"]}
    assert sorted(given) == [before["generation"] + 1, before["generation"] + 2]
    assert given[before["generation"] + 1] == [] and given[before["generation"] + 2]
    rounds = [a for a in _member_events(group, "c3", "assigned")]
    assert all(a["f"]["partitions"] == [] for a in rounds if a["generation"] == before["generation"] + 1)
    gained = {tuple(tp) for tp in rounds[-1]["f"]["partitions"]}
    assert gained == {tuple(tp) for tp in given[before["generation"] + 2]}
    assert gained and sorted(gained | _owned_at_end(group, "c1") | _owned_at_end(group, "c2")) == ALL

    moved_by = {}
    for name in ("c1", "c2"):
        revoked = _member_events(group, name, "revoked")[revoked_before[name]:]
        moved = {tuple(tp) for e in revoked for tp in e["f"]["partitions"]}
        kept = held[name] - moved
        assert kept and kept == held[name] & _owned_at_end(group, name)
        assert moved <= gained  # it revoked only what moved to the newcomer
        moved_by[name] = moved
        # it ended in round two; it may have missed round one (its SyncGroup overtaken by the other's rejoin)
        assigned = _member_events(group, name, "assigned")[seen[name]:]
        assert assigned and assigned[-1]["generation"] == before["generation"] + 2
        assert {a["generation"] for a in assigned} <= {before["generation"] + 1, before["generation"] + 2}
        # what it kept, it went on processing while the group rebalanced twice: records of every kept partition
        # processed between its first rebalance's beginning (the newcomer's join) and the group's second round's
        # end (the later of its own last assignment and the newcomer's)
        begun = _member_events(group, name, "rebalance_begin")[begins_before[name]]["ts_ns"]
        ended = max(assigned[-1]["ts_ns"], rounds[-1]["ts_ns"])
        during = {("t", e["partition"]) for e in _member_events(group, name, "processed")
                  if begun < e["ts_ns"] < ended}
        assert kept <= during, (name, kept, during)
        # a moving partition: its old owner processed none of it after revoking it, its new owner none before
        for tp in moved:
            let_go = next(e["ts_ns"] for e in revoked if list(tp) in e["f"]["partitions"])
            assert not [e for e in _member_events(group, name, "processed")
                        if (e["topic"], e["partition"]) == tp and e["ts_ns"] > let_go]
            took = next(a["ts_ns"] for a in rounds if list(tp) in a["f"]["partitions"])
            assert let_go < took
            assert all(e["ts_ns"] > took for e in _member_events(group, "c3", "processed")
                       if (e["topic"], e["partition"]) == tp)
    assert moved_by["c1"] | moved_by["c2"] == gained  # the newcomer got only what an old owner let go
    assert describe(cluster)["state"] == "Stable" and sorted(c3.assignment()) == sorted(gained)


def test_default_strategies_stay_eager_and_a_mixed_list_picks_the_common_protocol():
    from lab_cluster.assignment import ASSIGNORS, rebalance_protocol
    from modern_coord import ConsumerConfig

    def protocol(strategy):
        config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:1",
                                           "partition.assignment.strategy": strategy})
        return rebalance_protocol([ASSIGNORS[s] for s in config.strategies])

    assert protocol("range") == "eager"
    assert protocol("range,cooperative-sticky") == "eager"  # Kafka 3.x's default list: eager, voting range
    assert protocol("cooperative-sticky") == "cooperative"


def test_each_strategy_is_told_what_the_member_owns_now_but_eager_sticky_its_last_generation(tmp_path):
    """Java sends the partitions a member owns (none, under eager, once it has revoked everything) and its
    generation; eager `sticky` reads its own user data instead. So `cooperative-sticky` in an eager group (Kafka's
    upgrade path, `range,cooperative-sticky`) sees nothing owned and withholds nothing."""
    from lab_cluster.trace import TraceRecorder
    from modern_coord import ConsumerConfig, ModernConsumer
    from modern_coord.member import Generation

    def member(strategy):
        config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9",
                                           "partition.assignment.strategy": strategy})
        consumer = ModernConsumer(config, ["t"], TraceRecorder(tmp_path, trial="t", design="classic", actor=strategy))
        consumer.generation = Generation(4, "m", "x")
        consumer._last_owned, consumer._last_owned_generation = [("t", 0), ("t", 1)], 4
        return consumer

    eager = member("sticky,cooperative-sticky")  # revoked everything: owns nothing now
    assert eager._subscription_metadata("sticky")["owned"] == [["t", 0], ["t", 1]]
    assert eager._subscription_metadata("cooperative-sticky") == {"topics": ["t"], "owned": [], "generation": 4}
    cooperative = member("cooperative-sticky")
    cooperative._assignment = [("t", 1)]  # kept through the rebalance
    assert cooperative._subscription_metadata("cooperative-sticky")["owned"] == [["t", 1]]
