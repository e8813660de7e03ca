"""The ZooKeeper-era consumer's rules (`legacy_zk/rules.py`) with no server: syncedRebalance's attempts, the commit
of what moved, the fixed-rate auto-commit on a fake clock, session-state changes, and a claimed partition's start."""

from __future__ import annotations

import pytest

from lab_cluster.clock import FakeClock
from legacy_zk.rules import (
    FIRE_ALL_EVENTS,
    HANDLE_NEW_SESSION,
    REWATCH,
    SESSION_EXPIRED,
    ConsumerState,
    Session,
    attempt_outcome,
    auto_commit_wait,
    commit_offsets_due,
    process_state_changed,
    start_position,
    synced_rebalance_step,
)

S = ConsumerState
T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


# -- syncedRebalance ----------------------------------------------------------------------------------------------
def test_an_attempt_is_ok_a_conflict_or_an_error_named_by_its_exception():
    from kazoo.exceptions import NoNodeError

    assert attempt_outcome(True) == "ok"
    assert attempt_outcome(False) == "conflict"
    assert attempt_outcome(False, NoNodeError()) == "error:NoNodeError"


def test_an_ok_attempt_ends_the_round_consuming_whichever_attempt_it_is():
    assert [synced_rebalance_step(n, "ok", 4) for n in (1, 2, 3, 4)] == [S.CONSUMING] * 4


@pytest.mark.parametrize("failure", ["conflict", "error:KeyError"])
def test_failed_attempts_are_retried_until_rebalance_max_retries_then_the_consumer_is_failed(failure):
    assert [synced_rebalance_step(n, failure, 4) for n in (1, 2, 3, 4)] == [S.REBALANCING] * 3 + [S.FAILED]
    assert synced_rebalance_step(1, failure, 1) is S.FAILED  # rebalance.max.retries 1: one attempt only


def test_a_round_makes_as_many_attempts_as_it_needs_and_never_more_than_the_retries():
    def attempts(outcomes, retries):
        for n, outcome in enumerate(outcomes, 1):
            then = synced_rebalance_step(n, outcome, retries)
            if then is not S.REBALANCING:
                return n, then
        raise AssertionError("the round did not end")

    assert attempts(["conflict", "conflict", "ok"], 4) == (3, S.CONSUMING)
    assert attempts(["conflict"] * 10, 4) == (4, S.FAILED)
    assert attempts(["conflict"] * 10, 6) == (6, S.FAILED)


# -- commitOffsets ------------------------------------------------------------------------------------------------
def test_only_positions_that_moved_since_the_last_write_are_committed_in_partition_order():
    snapshot = {T2: (30, "c-1"), T0: (10, "c-0"), T1: (20, "c-0")}
    assert list(commit_offsets_due(snapshot, {T0: 10, T1: 15, T2: 25})) == [(T1, 20, "c-0"), (T2, 30, "c-1")]
    assert list(commit_offsets_due(snapshot, {T0: 10, T1: 20, T2: 30})) == []


def test_a_position_behind_its_checkpoint_or_never_checkpointed_is_committed_too():
    assert list(commit_offsets_due({T0: (5, "c-0"), T1: (0, "c-0")}, {T0: 9})) == [(T0, 5, "c-0"), (T1, 0, "c-0")]


def test_the_caller_checkpoints_each_write_so_the_next_commit_writes_nothing_until_a_position_moves():
    checkpointed = {T0: 0, T1: 0}
    writes = []

    def commit(snapshot):
        for key, position, thread_id in commit_offsets_due(snapshot, checkpointed):
            writes.append((key, position, thread_id))
            checkpointed[key] = position

    commit({T0: (4, "c-0"), T1: (6, "c-0")})
    commit({T0: (4, "c-0"), T1: (6, "c-0")})
    commit({T0: (4, "c-0"), T1: (9, "c-1")})
    assert writes == [(T0, 4, "c-0"), (T1, 6, "c-0"), (T1, 9, "c-1")]


def test_each_partition_is_compared_when_its_turn_comes_so_a_checkpoint_recorded_meanwhile_counts():
    checkpointed = {T0: 0, T1: 0}
    due = commit_offsets_due({T0: (4, "c-0"), T1: (6, "c-0")}, checkpointed)
    assert next(due) == (T0, 4, "c-0")
    checkpointed[T1] = 6  # another commit wrote T1 while this one waited on its write of T0
    assert list(due) == []


# -- the auto-commit schedule --------------------------------------------------------------------------------------
def run_ticks(clock: FakeClock, start: int, interval: int, count: int, *, tick_ms: int = 0,
              pause: tuple[int, int] | None = None) -> list[int]:
    """Drive the schedule as the auto-commit thread does, on a fake clock: wait, tick, repeat. Each tick takes
    `tick_ms`; `pause` = (at, until): the process is stopped from the first wait that reaches `at` until `until`."""
    times = []
    while len(times) < count:
        wait = auto_commit_wait(start, interval, len(times), clock())
        if pause and clock() + wait >= pause[0] > clock():
            clock.advance(pause[1] - clock())
            pause = None
            continue
        clock.advance(wait)
        times.append(clock())
        clock.advance(tick_ms)
    return times


def test_auto_commit_ticks_at_a_fixed_rate_from_the_start():
    clock = FakeClock(start_ms=0)
    assert run_ticks(clock, 0, 1000, 3) == [1000, 2000, 3000]


def test_a_slow_tick_does_not_move_the_beat():
    clock = FakeClock(start_ms=0)
    assert run_ticks(clock, 0, 1000, 4, tick_ms=300) == [1000, 2000, 3000, 4000]


def test_ticks_missed_during_a_pause_run_at_once_then_the_old_beat_goes_on():
    clock = FakeClock(start_ms=0)
    assert run_ticks(clock, 0, 1000, 5, pause=(1500, 3500)) == [1000, 3500, 3500, 4000, 5000]


def test_a_tick_is_due_exactly_at_its_time_and_not_before():
    assert auto_commit_wait(0, 1000, 0, 999) == 1
    assert auto_commit_wait(0, 1000, 0, 1000) == 0
    assert auto_commit_wait(500, 1000, 2, 1000) == 2500


# -- session-state changes -----------------------------------------------------------------------------------------
def changes(*states, closing=False):
    session, done = Session(), []
    for state in states:
        session, todo = process_state_changed(session, state, closing=closing)
        done.extend(todo)
    return session, done


def test_the_first_connection_and_a_lost_connection_do_nothing():
    assert changes("CONNECTED") == (Session(), [])
    assert changes("CONNECTED", "SUSPENDED") == (Session(suspended=True), [])


def test_a_connection_regained_within_the_session_rewatches():
    assert changes("CONNECTED", "SUSPENDED", "CONNECTED") == (Session(), [REWATCH])


def test_an_expiry_is_recorded_and_the_next_connection_is_a_new_session_then_every_listener_fires():
    assert changes("CONNECTED", "SUSPENDED", "LOST") == (Session(suspended=True, expired=True), [SESSION_EXPIRED])
    session, done = changes("CONNECTED", "SUSPENDED", "LOST", "CONNECTED")
    assert session == Session() and done == [SESSION_EXPIRED, HANDLE_NEW_SESSION, FIRE_ALL_EVENTS]


def test_an_expiry_is_remembered_through_a_further_lost_connection_until_the_next_connection():
    _, done = changes("SUSPENDED", "LOST", "SUSPENDED", "CONNECTED")
    assert done == [SESSION_EXPIRED, HANDLE_NEW_SESSION, FIRE_ALL_EVENTS]


def test_after_a_new_session_a_short_cut_is_a_plain_rewatch_again():
    _, done = changes("SUSPENDED", "LOST", "CONNECTED", "SUSPENDED", "CONNECTED")
    assert done == [SESSION_EXPIRED, HANDLE_NEW_SESSION, FIRE_ALL_EVENTS, REWATCH]


def test_the_consumers_own_close_is_no_expiry():
    assert changes("CONNECTED", "LOST", closing=True) == (Session(expired=True), [])


# -- a claimed partition's start ------------------------------------------------------------------------------------
def test_a_committed_offset_wins_and_no_broker_is_asked():
    def never():
        raise AssertionError("the leader was asked")

    assert start_position(42, "largest", never) == 42
    assert start_position(0, "largest", never) == 0  # 0 is a committed offset, not "none"
    assert start_position(None, "smallest", never) == 0


def test_largest_without_a_commit_is_the_log_end_now_else_zero():
    assert start_position(None, "largest", lambda: 120) == 120
    assert start_position(None, "largest", lambda: None) == 0
