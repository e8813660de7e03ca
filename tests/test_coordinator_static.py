"""Static membership (KIP-345) in the group coordinator, on a fake clock: Kafka 3.6's GroupCoordinator rules.

A static member names a `group.instance.id`; a restart is a JoinGroup with
that instance id and no member id. The tests use the `Harness` of the
coordinator's unit tests.
"""

from test_coordinator_unit import REBALANCE, SESSION, Harness

from lab_cluster.assignment import RangeAssignor, RoundRobinAssignor
from lab_cluster.events import problems
from modern_coord.coordinator.group import ClassicGroupState as S
from modern_coord.leader_assignment import leader_subscriptions

LONG_SESSION = 100_000  # longer than two rebalance timeouts: a silent member outlives the join it misses


def static_group(h, instances=("i-0", "i-1", "i-2"), **join):
    """Static members, Stable in generation 1, member n assigned partition n: {instance id: member id}."""
    boxes = [h.join(instance=i, client=f"c{n}", **join) for n, i in enumerate(instances)]
    h.settle()
    ids = [box[0]["member_id"] for box in boxes]
    leader = boxes[0][0]["leader"]
    for m in ids:
        if m != leader:
            h.sync(m, 1)
    h.sync(leader, 1, {m: {"partitions": [["t", n]]} for n, m in enumerate(ids)})
    assert h.state is S.STABLE
    return dict(zip(instances, ids, strict=True))


def rebalances(h):
    return [f for kind, f in h.events if kind == "group_state" and f["to"] == "PreparingRebalance"]


def test_a_static_member_gets_its_member_id_at_once_and_the_leader_sees_its_instance_id():
    h = Harness()
    held = h.join(instance="i-0")
    assert held == [] and h.state is S.PREPARING_REBALANCE  # no MEMBER_ID_REQUIRED round
    h.settle()
    answer = held[0]
    assert answer["member_id"].startswith("i-0-")  # Kafka's generateMemberId: instance id, then a UUID
    assert answer["members"] == [{"member_id": answer["member_id"], "group_instance_id": "i-0",
                                  "metadata": {"topics": ["t"]}}]


def test_a_restart_while_stable_keeps_the_generation_and_the_assignment_and_nobody_rebalances():
    h = Harness()
    ids = static_group(h)
    before = len(rebalances(h))
    answer = h.join(instance="i-1")[0]
    new = answer["member_id"]
    assert answer["error"] == "NONE" and new != ids["i-1"] and new.startswith("i-1-")
    assert answer["generation_id"] == 1 and answer["protocol_name"] == "range"
    assert answer["leader"] == ids["i-0"] and answer["members"] == []
    assert h.state is S.STABLE
    assert h.sync(new, 1, instance="i-1")[0]["assignment"] == {"partitions": [["t", 1]]}
    for i in ("i-0", "i-2"):
        assert h.heartbeat(ids[i], 1, instance=i) == "NONE"
    assert len(rebalances(h)) == before
    # the group record names the new member id, so that a new coordinator knows it
    record = [r for r in h.store.records[0] if r["type"] == "group"][-1]
    assert {m["member_id"]: m["group_instance_id"] for m in record["members"]}[new] == "i-1"


def test_the_old_member_id_of_a_restarted_static_member_is_fenced():
    h = Harness()
    ids = static_group(h)
    old = ids["i-1"]
    h.join(instance="i-1")
    assert h.heartbeat(old, 1, instance="i-1") == "FENCED_INSTANCE_ID"
    assert h.commit(old, 1, instance="i-1") == "FENCED_INSTANCE_ID"
    assert h.sync(old, 1, instance="i-1")[0]["error"] == "FENCED_INSTANCE_ID"
    assert h.join(member_id=old, instance="i-1")[0]["error"] == "FENCED_INSTANCE_ID"
    assert h.leave(old, instance="i-1") == "FENCED_INSTANCE_ID"
    assert h.heartbeat(old, 1) == "UNKNOWN_MEMBER_ID"  # without its instance id, just an id the group lost
    assert h.state is S.STABLE


def test_a_returning_leader_is_answered_with_the_old_leader_id_and_leads_the_next_generation():
    h = Harness()
    ids = static_group(h)
    answer = h.join(instance="i-0")[0]
    new = answer["member_id"]
    assert answer["leader"] == ids["i-0"] != new and answer["members"] == []  # so it does not assign
    assert h.coord.describe("g")["leader"] == new  # but the group's leader is the new id
    assert h.sync(new, 1, instance="i-0")[0]["assignment"] == {"partitions": [["t", 0]]}
    assert h.state is S.STABLE
    rejoin = h.join(member_id=new, instance="i-0")  # a leader's JoinGroup forces a rebalance
    for i in ("i-1", "i-2"):
        h.join(member_id=ids[i], instance=i)
    assert rejoin[0]["generation_id"] == 2 and rejoin[0]["leader"] == new and len(rejoin[0]["members"]) == 3


def test_an_instance_id_the_group_does_not_know_is_unknown_member_id():
    h = Harness()
    ids = static_group(h)
    assert h.join(member_id=ids["i-1"], instance="i-9")[0]["error"] == "UNKNOWN_MEMBER_ID"
    assert h.heartbeat(ids["i-1"], 1, instance="i-9") == "UNKNOWN_MEMBER_ID"
    assert h.commit(ids["i-1"], 1, instance="i-9") == "UNKNOWN_MEMBER_ID"
    # membership comes before the generation, as in Kafka's handlers
    assert h.heartbeat("someone-else", 7, instance="i-1") == "FENCED_INSTANCE_ID"
    assert h.heartbeat(ids["i-1"], 7, instance="i-1") == "ILLEGAL_GENERATION"


def test_a_restart_during_completing_rebalance_fences_the_held_sync_and_rebalances():
    h = Harness()
    leader_box = h.join(instance="i-0")
    follower_box = h.join(instance="i-1")
    h.settle()
    leader, follower = leader_box[0]["member_id"], follower_box[0]["member_id"]
    held_sync = h.sync(follower, 1, instance="i-1")
    assert held_sync == [] and h.state is S.COMPLETING_REBALANCE
    restarted = h.join(instance="i-1")
    assert held_sync[0]["error"] == "FENCED_INSTANCE_ID"
    assert h.state is S.PREPARING_REBALANCE and restarted == []
    assert h.heartbeat(leader, 1, instance="i-0") == "REBALANCE_IN_PROGRESS"
    leader_rejoin = h.join(member_id=leader, instance="i-0")  # everyone is in: the join completes at once
    new = restarted[0]["member_id"]
    assert restarted[0]["generation_id"] == 2 and new != follower
    assert {m["member_id"] for m in leader_rejoin[0]["members"]} == {leader, new}


def test_a_restart_during_preparing_rebalance_is_held_for_the_join_in_progress():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"))
    h.join(member_id=ids["i-0"], instance="i-0")  # the leader starts a rebalance
    restarted = h.join(instance="i-1")
    assert h.state is S.COMPLETING_REBALANCE  # both are in: completed early
    assert restarted[0]["generation_id"] == 2 and restarted[0]["member_id"] != ids["i-1"]


def test_a_restart_with_a_protocol_change_while_stable_rebalances():
    h = Harness()
    ids = static_group(h, protocols=("range", "roundrobin"))
    h.join(instance="i-1", protocols=("roundrobin",))  # the group's next choice would be roundrobin
    assert h.state is S.PREPARING_REBALANCE
    assert h.heartbeat(ids["i-0"], 1, instance="i-0") == "REBALANCE_IN_PROGRESS"


def test_a_static_member_that_misses_a_join_stays_in_the_next_generation():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"), session=LONG_SESSION)
    leader = h.join(member_id=ids["i-0"], instance="i-0", session=LONG_SESSION)  # i-1 is down, does not rejoin
    h.advance(REBALANCE)
    assert h.state is S.COMPLETING_REBALANCE and leader[0]["generation_id"] == 2
    assert [(m["member_id"], m["group_instance_id"]) for m in leader[0]["members"]] == [
        (ids["i-0"], "i-0"), (ids["i-1"], "i-1")]
    h.sync(ids["i-0"], 2, {ids["i-0"]: {"partitions": [["t", 0]]}, ids["i-1"]: {"partitions": [["t", 1]]}},
           instance="i-0")
    assert h.state is S.STABLE
    # it comes back: generation 2 at once, and the share the leader kept for it
    back = h.join(instance="i-1", session=LONG_SESSION)[0]
    assert back["generation_id"] == 2 and h.state is S.STABLE
    assert h.sync(back["member_id"], 2, instance="i-1")[0]["assignment"] == {"partitions": [["t", 1]]}


def test_a_static_member_that_missed_the_join_is_removed_if_it_does_not_sync_in_time():
    """Kafka's onExpirePendingSync makes no exception for static members."""
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"), session=LONG_SESSION)
    h.join(member_id=ids["i-0"], instance="i-0", session=LONG_SESSION)
    h.advance(REBALANCE)
    h.sync(ids["i-0"], 2, {ids["i-0"]: {"partitions": [["t", 0]]}}, instance="i-0")
    h.advance(REBALANCE)
    assert h.state is S.PREPARING_REBALANCE
    assert h.coord.describe("g")["members"] == [ids["i-0"]]
    assert h.heartbeat(ids["i-1"], 2, instance="i-1") == "UNKNOWN_MEMBER_ID"


def test_a_replaced_member_does_not_take_over_the_old_ids_pending_sync():
    """As in Kafka: the old id stays pending, so the sync timer rebalances the group even though the new id synced."""
    h = Harness()
    leader_box = h.join(instance="i-0", session=LONG_SESSION)
    follower_box = h.join(instance="i-1", session=LONG_SESSION)
    h.settle()
    leader = leader_box[0]["member_id"]
    h.sync(leader, 1, {leader: {"partitions": [["t", 0]]}, follower_box[0]["member_id"]: {"partitions": [["t", 1]]}},
           instance="i-0")
    assert h.state is S.STABLE  # the follower has not synced yet, and now restarts
    new = h.join(instance="i-1", session=LONG_SESSION)[0]["member_id"]
    assert h.sync(new, 1, instance="i-1")[0]["assignment"] == {"partitions": [["t", 1]]}
    h.advance(REBALANCE)
    assert h.state is S.PREPARING_REBALANCE
    assert sorted(h.coord.describe("g")["members"]) == sorted([leader, new])  # nobody removed


def test_a_silent_static_member_goes_at_its_session_timeout_and_the_group_rebalances():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"))
    for _ in range(4):
        h.advance(SESSION // 4)
        h.heartbeat(ids["i-0"], 1, instance="i-0")
    assert h.state is S.PREPARING_REBALANCE
    assert h.coord.describe("g")["members"] == [ids["i-0"]]
    assert h.heartbeat(ids["i-1"], 1, instance="i-1") == "UNKNOWN_MEMBER_ID"  # its instance id is free again
    h.join(member_id=ids["i-0"], instance="i-0")
    assert h.state is S.COMPLETING_REBALANCE
    back = h.join(instance="i-1")  # a later start is a new member: the group rebalances
    assert back == [] and h.state is S.PREPARING_REBALANCE


def test_a_leader_that_did_not_rejoin_is_replaced_by_a_member_that_did():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"), session=LONG_SESSION)
    h.join(instance="i-2", session=LONG_SESSION)  # a newcomer starts a rebalance; the leader i-0 is down
    follower = h.join(member_id=ids["i-1"], instance="i-1", session=LONG_SESSION)
    h.advance(REBALANCE)
    assert follower[0]["leader"] == ids["i-1"] and len(follower[0]["members"]) == 3  # i-0 stays, but does not lead


def test_a_join_that_nobody_rejoined_is_postponed_until_someone_does():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1", "i-2"), session=LONG_SESSION)
    assert h.leave(ids["i-2"], instance="i-2") == "NONE"
    h.advance(REBALANCE)  # the others are silent: nobody to lead the next generation
    assert h.state is S.PREPARING_REBALANCE
    leader = h.join(member_id=ids["i-0"], instance="i-0", session=LONG_SESSION)
    h.advance(REBALANCE)  # the postponed join completes, keeping the silent i-1
    assert h.state is S.COMPLETING_REBALANCE and leader[0]["generation_id"] == 2
    assert {m["member_id"] for m in leader[0]["members"]} == {ids["i-0"], ids["i-1"]}
    assert "join_postponed" in [kind for kind, _ in h.events]


def test_the_coordinators_static_member_events_are_in_the_trace_vocabulary():
    """A broker's trace refuses an event kind lab_cluster/events.py does not list."""
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"), session=LONG_SESSION)
    h.join(instance="i-1", session=LONG_SESSION)  # member_replaced
    h.leave("", instance="i-1")
    h.advance(REBALANCE)  # i-0 does not rejoin: join_postponed
    h.join(member_id=ids["i-0"], instance="i-0")
    kinds = {kind for kind, _ in h.events}
    assert {"member_replaced", "join_postponed"} <= kinds
    assert [p for kind, f in h.events for p in problems({"kind": kind, "broker": 1, **f})] == []


def test_leave_group_by_instance_id_alone_removes_the_static_member():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"))
    assert h.leave("", instance="i-9") == "UNKNOWN_MEMBER_ID"
    assert h.leave("", instance="i-1") == "NONE"
    assert h.state is S.PREPARING_REBALANCE and h.coord.describe("g")["members"] == [ids["i-0"]]


def test_a_pending_member_id_cannot_join_with_an_instance_id():
    h = Harness()
    pending = h.join()[0]["member_id"]
    assert h.join(member_id=pending, instance="i-0")[0]["error"] == "UNKNOWN_SERVER_ERROR"


def test_static_members_survive_a_coordinator_move_through_the_log():
    h = Harness()
    ids = static_group(h, ("i-0", "i-1"))
    new = h.join(instance="i-1")[0]["member_id"]  # the restart is written to the log
    moved = Harness()
    moved.coord.unload_partition(0)
    moved.coord.load_partition(0, h.store.records[0])
    assert moved.heartbeat(new, 1, instance="i-1") == "NONE"
    assert moved.heartbeat(ids["i-1"], 1, instance="i-1") == "FENCED_INSTANCE_ID"
    again = moved.join(instance="i-1")[0]  # and it knows the instance: another restart is no rebalance
    assert again["generation_id"] == 1 and moved.state is S.STABLE


def test_the_leaders_assignor_orders_static_members_by_instance_id():
    """The leader's member list carries instance ids to range and round-robin (Kafka's MemberInfo order)."""
    h = Harness()
    boxes = [h.join(instance=i) for i in ("i-2", "i-0", "i-1")]
    h.settle()
    members = boxes[0][0]["members"]
    by_instance = {m["group_instance_id"]: m["member_id"] for m in members}
    subscriptions = leader_subscriptions(members)
    for assignor in (RangeAssignor(), RoundRobinAssignor()):
        out = assignor.assign({"t": 3}, subscriptions)
        assert [out[by_instance[i]] for i in ("i-0", "i-1", "i-2")] == [[("t", 0)], [("t", 1)], [("t", 2)]]


def test_an_instance_id_that_is_not_a_string_is_an_invalid_request():
    h = Harness()
    assert h.join(instance=["i-0"])[0]["error"] == "INVALID_REQUEST"
    assert "g" not in h.coord.groups
