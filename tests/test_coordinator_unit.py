"""The group coordinator's state machine, alone, on a fake clock: every transition, every per-state answer."""

import pytest

from lab_cluster.wire import ErrorCode as E
from modern_coord.coordinator.coordinator import CoordinatorConfig, GroupCoordinator, MemoryStore
from modern_coord.coordinator.group import ClassicGroupState as S
from modern_coord.coordinator.scheduler import FakeClock, Scheduler

SESSION, REBALANCE, DELAY = 10_000, 30_000, 3_000
G = "g"


def _static(request, instance):
    """The request, naming a group.instance.id if one is given (a dynamic member's requests have none)."""
    return request if instance is None else {**request, "group_instance_id": instance}


class Harness:
    def __init__(self, **config):
        self.clock = FakeClock()
        self.timers = Scheduler(self.clock)
        self.events = []
        self.store = MemoryStore()
        self.coord = GroupCoordinator(self.store, CoordinatorConfig(offsets_topic_num_partitions=1, **config),
                                      scheduler=self.timers, on_event=lambda k, **f: self.events.append((k, f)))
        self.coord.load_partition(0, [])

    def advance(self, ms):
        self.clock.advance(ms)
        self.timers.run_due()

    @property
    def state(self):
        return self.coord.groups[G].state

    def join(self, member_id="", protocols=("range",), session=SESSION, rebalance=REBALANCE, client="c",
             instance=None):
        box = []
        self.coord.join_group(_static({"group_id": G, "member_id": member_id, "client_id": client,
                                       "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
                                       "protocol_type": "consumer",
                                       "protocols": [{"name": p, "metadata": {"topics": ["t"]}} for p in protocols]},
                                      instance),
                              box.append)
        return box

    def new_member(self, **kw):
        """JoinGroup v4+: the first JoinGroup only hands out a member id."""
        first = self.join(**kw)
        assert first[0]["error"] == "MEMBER_ID_REQUIRED"
        return first[0]["member_id"], self.join(member_id=first[0]["member_id"], **kw)

    def sync(self, member_id, generation, assignments=None, instance=None):
        box = []
        req = _static({"group_id": G, "member_id": member_id, "generation_id": generation}, instance)
        if assignments is not None:
            req["assignments"] = [{"member_id": m, "assignment": a} for m, a in assignments.items()]
        self.coord.sync_group(req, box.append)
        return box

    def heartbeat(self, member_id, generation, instance=None):
        return self.coord.heartbeat(_static({"group_id": G, "member_id": member_id, "generation_id": generation},
                                            instance))["error"]

    def commit(self, member_id, generation, offset=5, instance=None):
        return self.coord.commit_offsets(_static({"group_id": G, "member_id": member_id, "generation_id": generation,
                                                  "offsets": [{"topic": "t", "partition": 0, "offset": offset}]},
                                                 instance))["error"]

    def leave(self, member_id, instance=None):
        return self.coord.leave_group(_static({"group_id": G, "member_id": member_id}, instance))["error"]

    def committed(self):
        return self.coord.fetch_offsets({"group_id": G, "partitions": [["t", 0]]})["offsets"][0]["offset"]

    def settle(self):
        """Let the initial delay run out: each member added during it extends it by one more delay."""
        while self.state is S.PREPARING_REBALANCE:
            self.advance(DELAY)

    def stable_group(self, n):
        """n members, Stable in generation 1; returns their ids (the first leads)."""
        joins = [self.new_member(client=f"c{i}") for i in range(n)]
        self.settle()
        ids = [m for m, _ in joins]
        leader = joins[0][1][0]["leader"]
        for m in ids:
            if m != leader:
                self.sync(m, 1)
        self.sync(leader, 1, {m: {"partitions": [["t", i]]} for i, m in enumerate(ids)})
        assert self.state is S.STABLE
        return [leader] + [m for m in ids if m != leader]


def test_first_join_hands_out_a_member_id_and_the_group_stays_empty():
    h = Harness()
    answer = h.join(client="consumer-1")[0]
    assert answer["error"] == "MEMBER_ID_REQUIRED" and answer["member_id"].startswith("consumer-1-")
    assert h.state is S.EMPTY


def test_empty_group_waits_the_initial_delay_then_completes_with_generation_1():
    h = Harness()
    m1, held = h.new_member()
    assert h.state is S.PREPARING_REBALANCE and held == []
    h.advance(DELAY - 1)
    assert held == []
    h.advance(1)
    assert h.state is S.COMPLETING_REBALANCE
    assert held[0]["generation_id"] == 1 and held[0]["leader"] == m1 and held[0]["protocol_name"] == "range"
    assert held[0]["members"] == [{"member_id": m1, "group_instance_id": None, "metadata": {"topics": ["t"]}}]


def test_a_member_joining_during_the_initial_delay_extends_it_up_to_the_rebalance_timeout():
    h = Harness()
    h.new_member()
    h.advance(DELAY - 100)
    m2, held2 = h.new_member()
    h.advance(100)  # first delay over, but a member was added: wait another delay
    assert h.state is S.PREPARING_REBALANCE
    h.advance(DELAY)
    assert h.state is S.COMPLETING_REBALANCE and held2[0]["generation_id"] == 1


def test_initial_delay_never_exceeds_the_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=DELAY)
    h.new_member(rebalance=4_000)
    for _ in range(3):  # members keep arriving during the first delay
        h.advance(900)
        h.new_member(rebalance=4_000)
    h.advance(300)  # 3000 ms: the delay is extended, but only by the 1000 ms left of the rebalance timeout
    assert h.state is S.PREPARING_REBALANCE
    h.advance(999)
    assert h.state is S.PREPARING_REBALANCE
    h.advance(1)
    assert h.state is S.COMPLETING_REBALANCE


def test_followers_get_no_member_list_and_sync_waits_for_the_leader():
    h = Harness()
    m1, a1 = h.new_member()
    m2, a2 = h.new_member()
    h.settle()
    assert a1[0]["leader"] == m1 and len(a1[0]["members"]) == 2 and a2[0]["members"] == []
    follower = h.sync(m2, 1)
    assert follower == [] and h.state is S.COMPLETING_REBALANCE
    assert h.heartbeat(m2, 1) == "NONE"  # heartbeats are fine while completing
    leader = h.sync(m1, 1, {m1: {"partitions": [["t", 0]]}, m2: {"partitions": [["t", 1]]}})
    assert h.state is S.STABLE
    assert leader[0]["assignment"] == {"partitions": [["t", 0]]} and follower[0]["assignment"] == {
        "partitions": [["t", 1]]}
    assert h.sync(m2, 1)[0]["assignment"] == {"partitions": [["t", 1]]}  # Stable: answered at once


def test_stable_heartbeats_and_the_rebalance_signal():
    h = Harness()
    leader, other = h.stable_group(2)
    assert h.heartbeat(other, 1) == "NONE"
    m3, held3 = h.new_member()
    assert h.state is S.PREPARING_REBALANCE
    assert h.heartbeat(other, 1) == "REBALANCE_IN_PROGRESS"
    assert h.sync(other, 1)[0]["error"] == "REBALANCE_IN_PROGRESS"
    assert h.commit(other, 1) == "NONE"  # commit before rejoining is accepted while preparing
    held = [h.join(member_id=leader), h.join(member_id=other)]
    assert h.state is S.COMPLETING_REBALANCE  # all three joined: no need to wait for the timeout
    assert all(b[0]["generation_id"] == 2 for b in held + [held3])


def test_fencing_unknown_member_and_illegal_generation():
    h = Harness()
    leader, other = h.stable_group(2)
    assert h.heartbeat("nobody", 1) == "UNKNOWN_MEMBER_ID"
    assert h.heartbeat(other, 0) == "ILLEGAL_GENERATION"
    assert h.commit(other, 7) == "ILLEGAL_GENERATION"
    assert h.commit("nobody", 1) == "UNKNOWN_MEMBER_ID"
    assert h.sync(other, 3)[0]["error"] == "ILLEGAL_GENERATION"
    assert h.join(member_id="nobody")[0]["error"] == "UNKNOWN_MEMBER_ID"
    assert h.committed() == -1


def test_commit_during_completing_rebalance_is_rebalance_in_progress():
    h = Harness()
    m1, _ = h.new_member()
    h.advance(DELAY)
    assert h.commit(m1, 1) == "REBALANCE_IN_PROGRESS"


def test_leader_rejoining_a_stable_group_triggers_a_rebalance_a_follower_does_not():
    h = Harness()
    leader, other = h.stable_group(2)
    assert h.join(member_id=other)[0]["generation_id"] == 1 and h.state is S.STABLE
    h.join(member_id=leader)
    assert h.state is S.PREPARING_REBALANCE


def test_a_silent_member_is_evicted_after_its_session_timeout():
    h = Harness()
    leader, other = h.stable_group(2)
    for _ in range(4):
        h.advance(SESSION // 2)
        assert h.heartbeat(leader, 1) in ("NONE", "REBALANCE_IN_PROGRESS")
    assert other not in h.coord.groups[G].members
    assert ("member_expired", {"group": G, "member": other, "session_timeout_ms": SESSION}) in h.events
    assert h.heartbeat(other, 1) == "UNKNOWN_MEMBER_ID"


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed():
    h = Harness()
    leader, other = h.stable_group(2)
    h.new_member()  # a third member triggers a rebalance
    held = h.join(member_id=leader)
    for _ in range(REBALANCE // 5_000):  # the other member heartbeats (and is told to rejoin) but never does
        assert h.heartbeat(other, 1) == "REBALANCE_IN_PROGRESS"
        h.advance(5_000)
    assert held[0]["generation_id"] == 2 and other not in h.coord.groups[G].members
    assert any(k == "member_removed" and f["reason"].startswith("did not rejoin") for k, f in h.events)


def test_a_new_leader_is_chosen_when_the_leader_leaves():
    h = Harness()
    leader, other = h.stable_group(2)
    assert h.coord.leave_group({"group_id": G, "member_id": leader})["error"] == "NONE"
    assert h.state is S.PREPARING_REBALANCE and h.coord.groups[G].leader_id == other
    held = h.join(member_id=other)
    assert held[0]["leader"] == other and held[0]["generation_id"] == 2


def test_the_last_member_leaving_empties_the_group_with_a_new_generation():
    h = Harness()
    (only,) = h.stable_group(1)
    h.coord.leave_group({"group_id": G, "member_id": only})
    assert h.state is S.EMPTY and h.coord.groups[G].generation_id == 2
    assert h.heartbeat(only, 2) == "UNKNOWN_MEMBER_ID"


def test_leave_during_completing_rebalance_sends_waiting_syncs_back_to_rejoin():
    h = Harness()
    m1, _ = h.new_member()
    m2, _ = h.new_member()
    h.settle()
    waiting = h.sync(m2, 1)
    h.coord.leave_group({"group_id": G, "member_id": m1})
    assert waiting[0]["error"] == "REBALANCE_IN_PROGRESS" and h.state is S.PREPARING_REBALANCE


def test_protocol_vote_picks_the_most_supported_common_assignor():
    h = Harness()
    h.new_member(protocols=("sticky", "range"))
    h.new_member(protocols=("range", "sticky"))
    _, held = h.new_member(protocols=("range", "roundrobin", "sticky"))
    h.settle()
    assert held[0]["protocol_name"] == "range"


def test_a_member_sharing_no_protocol_is_refused():
    h = Harness()
    h.new_member(protocols=("range",))
    assert h.join(protocols=("roundrobin",))[0]["error"] == "INCONSISTENT_GROUP_PROTOCOL"


@pytest.mark.parametrize("session", [5_999, 1_800_001])
def test_session_timeout_outside_the_brokers_bounds_is_refused(session):
    assert Harness().join(session=session)[0]["error"] == "INVALID_SESSION_TIMEOUT"


def test_groups_of_partitions_this_coordinator_does_not_own_get_not_coordinator():
    h = Harness()
    h.coord.unload_partition(0)
    assert h.join()[0]["error"] == "NOT_COORDINATOR"
    h.coord.begin_loading(0)
    assert h.commit("m", 1) == "COORDINATOR_LOAD_IN_PROGRESS"
    box = []
    h.coord.join_group({"group_id": "", "session_timeout_ms": SESSION, "protocols": []}, box.append)
    assert box[0]["error"] == "INVALID_GROUP_ID"


def test_malformed_requests_get_invalid_request_and_the_group_goes_on():
    h = Harness()
    leader, other = h.stable_group(2)
    box = []
    h.coord.join_group({"group_id": G, "member_id": leader, "protocols": "nope"}, box.append)
    assert box[0]["error"] == "INVALID_REQUEST"
    assert h.coord.commit_offsets({"group_id": G, "offsets": [{"topic": "t"}]})["error"] == "INVALID_REQUEST"
    assert h.heartbeat(other, 1) == "NONE" and h.state is S.STABLE


def test_unloading_answers_held_joins_with_not_coordinator_and_marks_the_group_dead():
    h = Harness()
    leader, other = h.stable_group(2)
    h.new_member()
    held = h.join(member_id=leader)
    h.coord.unload_partition(0)
    assert held[0]["error"] == "NOT_COORDINATOR"
    assert ("group_state", ) != () and any(k == "group_state" and f["to"] == "Dead" for k, f in h.events)


def test_offsets_and_groups_survive_a_coordinator_move_through_the_log():
    h = Harness()
    leader, other = h.stable_group(2)
    assert h.commit(other, 1, offset=42) == "NONE"
    records = h.store.records[0]
    moved = Harness()
    moved.coord.unload_partition(0)
    moved.coord.load_partition(0, records)
    assert moved.committed() == 42
    assert moved.state is S.STABLE and moved.heartbeat(other, 1) == "NONE"
    assert moved.sync(other, 1)[0]["assignment"] == {"partitions": [["t", 1]]}


def test_commit_without_group_management_is_accepted_only_with_generation_minus_one():
    h = Harness()
    assert h.commit("", 3) == "ILLEGAL_GENERATION"
    assert h.commit("", -1, offset=9) == "NONE" and h.committed() == 9


def test_every_state_change_is_a_valid_kafka_transition():
    h = Harness()
    leader, other = h.stable_group(2)
    h.coord.leave_group({"group_id": G, "member_id": leader})
    h.join(member_id=other)
    h.sync(other, 2, {other: {}})
    h.coord.leave_group({"group_id": G, "member_id": other})
    seen = [(f["from"], f["to"]) for k, f in h.events if k == "group_state"]
    assert seen == [("Empty", "PreparingRebalance"), ("PreparingRebalance", "CompletingRebalance"),
                    ("CompletingRebalance", "Stable"), ("Stable", "PreparingRebalance"),
                    ("PreparingRebalance", "CompletingRebalance"), ("CompletingRebalance", "Stable"),
                    ("Stable", "PreparingRebalance"), ("PreparingRebalance", "Empty")]
    assert E.ILLEGAL_GENERATION == 22 and E.UNKNOWN_MEMBER_ID == 25 and E.REBALANCE_IN_PROGRESS == 27


def test_while_loading_heartbeats_are_answered_blindly_and_syncs_send_members_back_to_rejoin():
    """Kafka's handleHeartbeat ("respond just blindly") and handleSyncGroup while the offsets partition loads."""
    h = Harness()
    leader, other = h.stable_group(2)
    records = h.store.records[0]
    h.coord.unload_partition(0)
    h.coord.begin_loading(0)
    assert h.heartbeat(other, 1) == "NONE"
    assert h.sync(other, 1)[0]["error"] == "REBALANCE_IN_PROGRESS"
    assert h.join(member_id=other)[0]["error"] == "COORDINATOR_LOAD_IN_PROGRESS"
    assert h.commit(other, 1) == "COORDINATOR_LOAD_IN_PROGRESS"
    h.coord.load_partition(0, records)
    assert h.heartbeat(other, 1) == "NONE" and h.state is S.STABLE


def test_a_pending_member_that_leaves_no_longer_holds_up_the_join():
    """Kafka's removePendingMemberAndUpdateGroup: without it the join waits for the pending id's session."""
    h = Harness()
    leader, other = h.stable_group(2)
    first = h.join(client="c-late")
    pending = first[0]["member_id"]
    held = [h.join(member_id=leader), h.join(member_id=other)]  # a rebalance, held for the pending member
    assert h.state is S.PREPARING_REBALANCE and not held[0] and not held[1]
    left = h.coord.leave_group({"group_id": G, "member_id": pending})
    assert left["error"] == "NONE"
    assert h.state is S.COMPLETING_REBALANCE and held[0][0]["generation_id"] == 2
    assert ("member_removed", {"group": G, "member": pending, "reason": "pending member left"}) in h.events


def test_a_new_member_is_removed_when_its_join_has_not_completed_within_five_minutes():
    """Kafka's NewMemberJoinTimeoutMs (KAFKA-7610): a held JoinGroup keeps an old member, not a new one."""
    h = Harness()
    ten_minutes = 10 * 60 * 1000
    (old,) = [m for m, _ in [h.new_member(rebalance=ten_minutes)]]
    h.settle()
    h.sync(old, 1, {old: {"partitions": [["t", 0]]}})
    new_id, held = h.new_member(client="c-new", rebalance=ten_minutes)
    assert h.state is S.PREPARING_REBALANCE  # waits for the old member, which never rejoins
    for _ in range(4 * 60):
        h.heartbeat(old, 1)  # the old member heartbeats (REBALANCE_IN_PROGRESS) but does not rejoin
        h.advance(1_000)
    assert new_id in h.coord.groups[G].members
    for _ in range(60):
        h.heartbeat(old, 1)
        h.advance(1_000)
    assert new_id not in h.coord.groups[G].members
    assert held[0]["error"] == "UNKNOWN_MEMBER_ID"


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout_and_the_group_rebalances():
    """KAFKA-12890's DelayedSync: without it the group stays in CompletingRebalance while the others heartbeat."""
    h = Harness()
    joins = [h.new_member(client=f"c{i}") for i in range(2)]
    h.settle()
    (a, _), (b, _) = joins
    leader = joins[0][1][0]["leader"]
    follower = b if leader == a else a
    assert h.state is S.COMPLETING_REBALANCE
    held = h.sync(follower, 1)  # the follower syncs; the leader heartbeats but never syncs
    for _ in range(REBALANCE // 1_000 - 1):
        assert h.heartbeat(leader, 1) == "NONE" and h.heartbeat(follower, 1) == "NONE"
        h.advance(1_000)
    assert leader in h.coord.groups[G].members
    h.heartbeat(follower, 1)
    h.advance(1_000)
    assert leader not in h.coord.groups[G].members
    assert h.state is S.PREPARING_REBALANCE
    assert held[0]["error"] == "REBALANCE_IN_PROGRESS"
    assert any(k == "member_removed" and f["reason"] == "no SyncGroup within the rebalance timeout"
               for k, f in h.events)


def test_a_groups_offsets_partition_is_kafkas_partition_for():
    """`Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`: abs, not a sign mask (which gives 12 and 8)."""
    coord = GroupCoordinator(MemoryStore(), CoordinatorConfig(offsets_topic_num_partitions=50))
    assert coord.partition_for("hello-group") == 36
    assert coord.partition_for("zombie") == 40
