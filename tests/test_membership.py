"""The KIP-848 membership machine (`modern_coord/membership.py`) with a fake clock: every transition of Kafka's
`MemberState`, and what each heartbeat carries (everything when joining or after an error, else only changes)."""

from __future__ import annotations

import pytest

from lab_cluster.wire import ErrorCode
from modern_coord.membership import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    VALID_PREVIOUS,
    HeartbeatAction,
    Kip848MemberState,
    Membership,
    MembershipListener,
    heartbeat_error_action,
)

S = Kip848MemberState
T0, T1, T2, T3 = ("t", 0), ("t", 1), ("t", 2), ("t", 3)
INTERVAL = 5000


class Recorder(MembershipListener):
    def __init__(self):
        self.transitions, self.epochs = [], []

    def transitioned(self, old, new):
        self.transitions.append((old, new))

    def epoch_updated(self, epoch, member_id):
        self.epochs.append(epoch)


def machine(now=0, **kw):
    kw = {"group_id": "g", "topics": ["t"], "rebalance_timeout_ms": 300_000, "max_poll_interval_ms": 300_000,
          "now_ms": now, "retry_backoff_ms": 100, "listener": Recorder(), **kw}
    return Membership(**kw)


def ok(epoch, partitions=None, member_id="m1", interval=INTERVAL):
    answer = {"error_code": 0, "error": "NONE", "member_id": member_id, "member_epoch": epoch,
              "heartbeat_interval_ms": interval, "assignment": None}
    if partitions is not None:
        by_topic = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        answer["assignment"] = {"topic_partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
    return answer


def error(code: ErrorCode):
    return {"error_code": int(code), "error": code.name, "member_id": "", "member_epoch": -1,
            "heartbeat_interval_ms": 0, "assignment": None}


def heartbeat(m, now):
    request, ignore = m.poll_heartbeat(now, coordinator_known=True)
    assert request is not None and not ignore, (m.state, m.time_to_next_heartbeat(now))
    return request


def reconcile(m, owned):
    """What the consumer's poll loop does: reconcile the target against `owned`; returns the reconciliation."""
    rec = m.next_reconciliation(owned)
    assert rec is not None
    assert m.reconciliation_done(rec)
    return rec


def stable_member(partitions=(T0, T1), now=0):
    """A member that joined, reconciled `partitions` at epoch 1 and acknowledged them: STABLE."""
    m = machine(now)
    m.subscribe()
    heartbeat(m, now)
    m.on_heartbeat_response(ok(1, partitions), now)
    reconcile(m, [])
    heartbeat(m, now)  # the acknowledgement
    assert m.state is S.STABLE
    return m


# -- joining ---------------------------------------------------------------------------------------

def test_the_join_is_a_full_heartbeat_with_epoch_0_and_no_member_id_sent_at_once():
    m = machine()
    assert m.state is S.UNSUBSCRIBED and m.poll_heartbeat(0, True) == (None, False)  # not subscribed: nothing
    m.subscribe()
    assert m.state is S.JOINING and m.time_to_next_heartbeat(0) == 0
    assert heartbeat(m, 0) == {
        "api": "ConsumerGroupHeartbeat", "version": 0, "group_id": "g", "member_id": "", "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 300_000, "subscribed_topic_names": ["t"],
        "server_assignor": None, "topic_partitions": []}


def test_a_joiner_given_partitions_reconciles_acknowledges_at_once_with_them_then_is_stable():
    m = machine()
    m.subscribe()
    heartbeat(m, 0)
    assert m.on_heartbeat_response(ok(1, [T0, T1]), 10) is HeartbeatAction.PROCEED
    assert (m.state, m.member_id, m.member_epoch, m.heartbeat_interval_ms) == (S.RECONCILING, "m1", 1, INTERVAL)
    rec = m.next_reconciliation([])
    assert (rec.revoked, rec.added, rec.assigned) == ((), (T0, T1), [T0, T1])
    assert m.next_reconciliation([]) is None  # one at a time
    assert m.reconciliation_done(rec) and m.state is S.ACKNOWLEDGING
    assert m.time_to_next_heartbeat(11) == 0  # the acknowledgement does not wait for the interval
    ack = heartbeat(m, 11)
    assert ack["member_id"] == "m1" and ack["member_epoch"] == 1
    assert ack["topic_partitions"] == [{"topic": "t", "partitions": [0, 1]}]
    assert m.state is S.STABLE
    assert m.listener.transitions == [(S.UNSUBSCRIBED, S.JOINING), (S.JOINING, S.RECONCILING),
                                      (S.RECONCILING, S.ACKNOWLEDGING), (S.ACKNOWLEDGING, S.STABLE)]


def test_a_joiner_given_nothing_yet_still_reconciles_the_empty_assignment_and_acknowledges_it():
    m = machine()
    m.subscribe()
    heartbeat(m, 0)
    m.on_heartbeat_response(ok(1, []), 0)
    assert m.state is S.RECONCILING  # Kafka: an empty target is news to a member with no local assignment
    rec = reconcile(m, [])
    assert rec.added == () and rec.revoked == ()
    assert heartbeat(m, 0)["topic_partitions"] == [] and m.state is S.STABLE


def test_a_stable_member_sends_only_the_ids_and_epoch_when_nothing_changed_and_waits_for_the_interval():
    m = stable_member(now=0)
    assert m.poll_heartbeat(INTERVAL - 1, True) == (None, False)
    assert m.time_to_next_heartbeat(1000) == INTERVAL - 1000
    request = heartbeat(m, INTERVAL)
    assert (request["member_id"], request["member_epoch"]) == ("m1", 1)
    assert (request["rebalance_timeout_ms"], request["subscribed_topic_names"], request["server_assignor"],
            request["topic_partitions"]) == (-1, None, None, None)


def test_the_server_assignor_and_the_instance_id_are_sent_as_kafka_sends_them():
    m = machine(instance_id="web-1", server_assignor="range")
    m.subscribe()
    first = heartbeat(m, 0)
    assert (first["instance_id"], first["server_assignor"]) == ("web-1", "range")
    m.on_heartbeat_response(ok(1, []), 0)
    reconcile(m, [])
    heartbeat(m, 0)
    later = heartbeat(m, INTERVAL)
    assert later["instance_id"] == "web-1" and later["server_assignor"] is None  # unchanged: not sent again


def test_the_interval_is_the_coordinators_and_a_new_one_restarts_the_timer():
    m = stable_member(now=0)
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(1, interval=2000), INTERVAL + 10)
    assert m.heartbeat_interval_ms == 2000 and m.time_to_next_heartbeat(INTERVAL + 10) == 2000


# -- reconciling -----------------------------------------------------------------------------------

def test_a_new_target_revokes_owned_minus_target_and_adds_target_minus_owned():
    m = stable_member([T0, T1])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T1, T2]), INTERVAL)
    assert m.state is S.RECONCILING and m.member_epoch == 2
    rec = m.next_reconciliation([T0, T1])
    assert (rec.revoked, rec.added) == ((T0,), (T2,))
    m.reconciliation_done(rec)
    assert heartbeat(m, INTERVAL + 1)["topic_partitions"] == [{"topic": "t", "partitions": [1, 2]}]


def test_an_answer_without_an_assignment_changes_only_the_epoch():
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(4), INTERVAL)
    assert (m.state, m.member_epoch) == (S.STABLE, 4) and m.listener.epochs[-1] == 4


def test_the_same_assignment_again_changes_nothing():
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T0]), INTERVAL)
    assert m.state is S.STABLE and m.next_reconciliation([T0]) is None


def test_a_target_that_comes_back_to_what_it_owns_before_reconciling_goes_back_to_stable():
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T0, T1]), INTERVAL)
    assert m.state is S.RECONCILING
    heartbeat(m, 2 * INTERVAL)
    m.on_heartbeat_response(ok(3, [T0]), 2 * INTERVAL)
    # Kafka: the target's local epoch moved, so it is acknowledged (ACKNOWLEDGING) without any callback
    assert m.next_reconciliation([T0]) is None and m.state is S.ACKNOWLEDGING
    heartbeat(m, 2 * INTERVAL)
    assert m.state is S.STABLE


def test_a_newer_target_arriving_while_acknowledging_is_reconciled_after_the_acknowledgement():
    m = stable_member([T0, T1])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T0]), INTERVAL)
    rec = m.next_reconciliation([T0, T1])
    m.reconciliation_done(rec)
    assert m.state is S.ACKNOWLEDGING
    m.on_heartbeat_response(ok(3, [T0, T2]), INTERVAL + 1)  # a heartbeat answered meanwhile
    assert m.state is S.RECONCILING  # ACKNOWLEDGING -> RECONCILING on the new target
    rec = m.next_reconciliation([T0])
    assert rec.added == (T2,)


def test_the_acknowledging_heartbeat_goes_back_to_reconciling_when_the_target_moved_meanwhile():
    m = stable_member([T0, T1])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T0]), INTERVAL)
    rec = m.next_reconciliation([T0, T1])
    m.reconciliation_done(rec)
    m.target = m.target.update_with(frozenset({T0, T3}))  # as if stored by an answer the state ignored
    heartbeat(m, INTERVAL + 1)
    assert m.state is S.RECONCILING


def test_a_fence_during_a_reconciliation_aborts_it():
    m = stable_member([T0, T1])
    heartbeat(m, INTERVAL)
    m.on_heartbeat_response(ok(2, [T0]), INTERVAL)
    rec = m.next_reconciliation([T0, T1])
    m.on_heartbeat_response(error(ErrorCode.FENCED_MEMBER_EPOCH), INTERVAL + 1)
    assert m.reconciliation_aborted() and not m.reconciliation_done(rec)
    assert m.state is S.FENCED


# -- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_loses_everything_then_rejoins_with_epoch_0_and_the_same_member_id_with_a_full_heartbeat(code):
    m = stable_member([T0, T1])
    heartbeat(m, INTERVAL)
    assert m.on_heartbeat_response(error(code), INTERVAL) is HeartbeatAction.FENCE
    assert (m.state, m.member_epoch, m.member_id) == (S.FENCED, 0, "m1")
    assert m.lost_pending and m.poll_heartbeat(INTERVAL, True) == (None, False)  # no heartbeat until released
    m.released()
    assert m.state is S.JOINING and not m.lost_pending
    rejoin = heartbeat(m, INTERVAL)  # at once, no back-off
    assert (rejoin["member_id"], rejoin["member_epoch"], rejoin["topic_partitions"]) == ("m1", 0, [])
    assert rejoin["rebalance_timeout_ms"] == 300_000 and rejoin["subscribed_topic_names"] == ["t"]


def test_after_an_error_the_next_heartbeat_is_full_and_waits_for_a_doubling_backoff():
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    assert m.on_heartbeat_response(error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), INTERVAL) is HeartbeatAction.RETRY
    assert m.state is S.STABLE and m.time_to_next_heartbeat(INTERVAL) == 100
    again = heartbeat(m, INTERVAL + 100)
    assert (again["rebalance_timeout_ms"], again["subscribed_topic_names"], again["topic_partitions"]) == \
        (300_000, ["t"], [{"topic": "t", "partitions": [0]}])
    m.on_heartbeat_response(error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), INTERVAL + 100)
    assert m.time_to_next_heartbeat(INTERVAL + 100) == 200
    heartbeat(m, INTERVAL + 300)
    m.on_heartbeat_response(ok(1), INTERVAL + 300)
    assert m.time_to_next_heartbeat(INTERVAL + 300) == INTERVAL  # success: the back-off is forgotten


@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE])
def test_coordinator_errors_rediscover_and_heartbeat_again_without_backoff(code):
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    assert m.on_heartbeat_response(error(code), INTERVAL) is HeartbeatAction.REDISCOVER
    assert m.state is S.STABLE and m.time_to_next_heartbeat(INTERVAL) == 0
    assert m.poll_heartbeat(INTERVAL, coordinator_known=False) == (None, False)
    assert heartbeat(m, INTERVAL)["topic_partitions"] is not None  # full again


def test_no_answer_rediscovers_after_the_backoff():
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    assert m.on_heartbeat_response(None, INTERVAL) is HeartbeatAction.REDISCOVER
    assert m.time_to_next_heartbeat(INTERVAL) == 100


@pytest.mark.parametrize("code", [ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNRELEASED_INSTANCE_ID,
                                  ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.GROUP_MAX_SIZE_REACHED,
                                  ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_ID_NOT_FOUND])
def test_fatal_errors_lose_everything_and_stop_heartbeating(code):
    m = stable_member([T0])
    heartbeat(m, INTERVAL)
    assert m.on_heartbeat_response(error(code), INTERVAL) is HeartbeatAction.FATAL
    assert m.state is S.FATAL and m.lost_pending
    m.released()
    assert m.state is S.FATAL and m.poll_heartbeat(10 * INTERVAL, True) == (None, False)
    m.subscribe()
    assert m.state is S.FATAL


def test_the_error_policy_table():
    assert heartbeat_error_action(ErrorCode.NONE) is HeartbeatAction.PROCEED
    assert heartbeat_error_action(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) is HeartbeatAction.RETRY
    assert heartbeat_error_action(ErrorCode.UNSUPPORTED_VERSION) is HeartbeatAction.FATAL
    assert heartbeat_error_action(ErrorCode.REBALANCE_IN_PROGRESS) is HeartbeatAction.FATAL  # unexpected in KIP-848


# -- leaving ---------------------------------------------------------------------------------------

def test_leaving_revokes_then_sends_epoch_minus_1_at_once_and_ignores_the_answer():
    m = stable_member([T0])
    assert m.leave() is True and m.state is S.PREPARE_LEAVING  # in the group: revoke, not lose
    assert m.leave() is None  # already leaving
    m.left_prepared()
    assert (m.state, m.member_epoch) == (S.LEAVING, LEAVE_EPOCH) and m.time_to_next_heartbeat(1) == 0
    request = heartbeat(m, 1)
    assert (request["member_id"], request["member_epoch"]) == ("m1", -1)
    assert m.state is S.UNSUBSCRIBED
    m.on_heartbeat_response(ok(-1), 2)
    assert m.state is S.UNSUBSCRIBED


def test_a_static_member_leaves_with_epoch_minus_2():
    m = machine(instance_id="web-1")
    m.subscribe()
    heartbeat(m, 0)
    m.on_heartbeat_response(ok(1, [T0]), 0)
    m.leave()
    m.left_prepared()
    assert heartbeat(m, 1)["member_epoch"] == LEAVE_STATIC_EPOCH


def test_a_joining_member_that_leaves_loses_rather_than_revokes():
    m = machine()
    m.subscribe()
    assert m.leave() is False  # epoch 0: Kafka calls onPartitionsLost


def test_a_leave_with_no_coordinator_is_given_up():
    m = stable_member([T0])
    m.leave()
    m.left_prepared()
    assert m.poll_heartbeat(1, coordinator_known=False) == (None, False) and m.state is S.UNSUBSCRIBED


def test_fenced_while_preparing_to_leave_or_leaving_ends_unsubscribed():
    m = stable_member([T0])
    m.leave()
    m.on_heartbeat_response(error(ErrorCode.FENCED_MEMBER_EPOCH), 1)
    assert m.state is S.UNSUBSCRIBED
    m = stable_member([T0])
    m.leave()
    m.left_prepared()
    m.on_heartbeat_response(error(ErrorCode.UNKNOWN_MEMBER_ID), 1)
    assert m.state is S.UNSUBSCRIBED


def test_a_fenced_member_that_closes_does_not_rejoin():
    m = stable_member([T0])
    m.on_heartbeat_response(error(ErrorCode.FENCED_MEMBER_EPOCH), 1)
    assert m.leave() is None and m.state is S.UNSUBSCRIBED


# -- the poll timer --------------------------------------------------------------------------------

def test_an_expired_poll_timer_sends_the_leave_goes_stale_loses_everything_and_rejoins_on_the_next_poll():
    m = stable_member([T0, T1], now=0)
    m.on_poll(1000)
    request, ignore = m.poll_heartbeat(1000 + 300_000, True)
    assert ignore and request["member_epoch"] == LEAVE_EPOCH and request["member_id"] == "m1"
    assert m.state is S.STALE and m.lost_pending
    assert (S.STABLE, S.PREPARE_LEAVING) in m.listener.transitions
    assert (S.PREPARE_LEAVING, S.LEAVING) in m.listener.transitions
    assert m.poll_heartbeat(400_000, True) == (None, False)  # stale: silent
    m.released()
    assert m.state is S.STALE  # until the application polls again
    m.on_poll(500_000)
    assert (m.state, m.member_epoch) == (S.JOINING, 0)
    rejoin = heartbeat(m, 500_000)
    assert rejoin["member_id"] == "m1" and rejoin["topic_partitions"] == []


def test_a_static_member_leaves_on_the_poll_timer_with_epoch_minus_2():
    m = machine(instance_id="web-1")
    m.subscribe()
    heartbeat(m, 0)
    m.on_heartbeat_response(ok(1, []), 0)
    request, ignore = m.poll_heartbeat(300_000, True)
    assert ignore and request["member_epoch"] == LEAVE_STATIC_EPOCH


def test_polling_keeps_the_member_in_the_group():
    m = stable_member([T0], now=0)
    for now in range(0, 1_000_000, 100_000):
        m.on_poll(now)
        request, ignore = m.poll_heartbeat(now, True)
        assert not ignore
        if request is not None:
            m.on_heartbeat_response(ok(1), now)
    assert m.state is S.STABLE


# -- the transition table --------------------------------------------------------------------------

def test_invalid_transitions_are_refused():
    m = machine()
    with pytest.raises(ValueError, match="UNSUBSCRIBED to STABLE"):
        m._transition_to(S.STABLE)
    assert S.STALE in VALID_PREVIOUS[S.JOINING] and VALID_PREVIOUS[S.STALE] == {S.LEAVING}
    assert S.STABLE.can_handle_new_assignment() and not S.PREPARE_LEAVING.can_handle_new_assignment()


def test_a_leaving_member_ignores_a_new_assignment():
    m = stable_member([T0])
    m.leave()
    m.on_heartbeat_response(ok(2, [T0, T1]), 1)
    assert m.state is S.PREPARE_LEAVING and m.next_reconciliation([T0]) is None
