"""The client without I/O: heartbeat timing, how heartbeat answers and pre-rejoin commits are handled, configuration."""

import pytest

from lab_cluster.errors import LabError
from modern_coord.config import ConsumerConfig
from modern_coord.heartbeat import Heartbeat


def beat(**kw):
    return Heartbeat(**{"session_timeout_ms": 10_000, "heartbeat_interval_ms": 3_000, "max_poll_interval_ms": 60_000,
                        "retry_backoff_ms": 100, "now_ms": 0, **kw})


def test_heartbeats_every_interval_while_answers_come():
    hb, sent = beat(), []
    for now in range(0, 20_001, 100):
        if hb.should_heartbeat(now):
            hb.sent_heartbeat(now)
            hb.received_heartbeat(now + 5)
            sent.append(now)
        assert not hb.session_timeout_expired(now)
    assert sent == [3_000, 6_000, 9_000, 12_000, 15_000, 18_000]


def test_failed_heartbeats_are_retried_after_the_backoff_and_the_session_runs_out():
    hb, sent = beat(), []
    for now in range(0, 10_001, 50):
        if hb.should_heartbeat(now):
            hb.sent_heartbeat(now)
            hb.fail_heartbeat(now)
            sent.append(now)
    assert sent[:3] == [3_000, 3_100, 3_200]
    assert not hb.session_timeout_expired(9_999) and hb.session_timeout_expired(10_000)


def test_reset_after_a_join_restarts_the_session_and_the_interval():
    hb = beat()
    hb.reset_timeouts(50_000)
    assert not hb.session_timeout_expired(59_999) and not hb.should_heartbeat(52_999) and hb.should_heartbeat(53_000)


def test_reset_after_a_join_restarts_the_poll_timer_too():
    """Java's `resetTimeouts` resets the poll timer: a join that took most of max.poll.interval.ms does not make
    the member leave right after it."""
    hb = beat()
    hb.reset_timeouts(hb.max_poll_interval_ms - 1)
    assert not hb.poll_timeout_expired(hb.max_poll_interval_ms + 1_000)


def test_poll_timeout_counts_from_the_last_poll():
    hb = beat()
    hb.poll(30_000)
    assert not hb.poll_timeout_expired(89_999) and hb.poll_timeout_expired(90_000)


def test_java_clients_defaults_and_refusals():
    c = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:1"})
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_poll_interval_ms, c.auto_commit_interval_ms) == (
        45000, 3000, 300000, 5000)
    assert c.heartbeat_interval_ms * 3 <= c.session_timeout_ms
    with pytest.raises(LabError, match="lower than session.timeout.ms"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "h:1", "session.timeout.ms": 3000})
    with pytest.raises(LabError, match="partition.assignment.strategy"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "h:1",
                                  "partition.assignment.strategy": "range,no-such-assignor"})
    with pytest.raises(LabError, match="Unknown consumer config"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "h:1", "zookeeper.connect": "x"})
    with pytest.raises(LabError, match="bootstrap.servers"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "nohostport"})


def _member(tmp_path, state, generation):
    """A consumer that is never started: its heartbeat-answer handler alone, no I/O."""
    from lab_cluster.trace import TraceRecorder
    from modern_coord.config import ConsumerConfig
    from modern_coord.consumer import ModernConsumer

    config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9"})
    consumer = ModernConsumer(config, ["t"], TraceRecorder(tmp_path, trial="t", design="classic", actor="c"))
    consumer.state, consumer.generation, consumer._rejoin_reason = state, generation, None
    return consumer


def test_heartbeat_answers_are_handled_as_the_java_clients_handler_does(tmp_path):
    from lab_cluster.wire import ErrorCode as E
    from modern_coord.member import ClassicMemberState, Generation

    g3, g4 = Generation(3, "m", "range"), Generation(4, "m", "range")
    # REBALANCE_IN_PROGRESS: a rejoin only when STABLE; mid-rebalance it belongs to the rebalance under way
    stable = _member(tmp_path, ClassicMemberState.STABLE, g3)
    stable._handle_heartbeat_response(E.REBALANCE_IN_PROGRESS, g3)
    assert stable._rejoin_reason == "Heartbeat: REBALANCE_IN_PROGRESS"
    completing = _member(tmp_path, ClassicMemberState.COMPLETING_REBALANCE, g4)
    completing._handle_heartbeat_response(E.REBALANCE_IN_PROGRESS, g4)
    assert completing._rejoin_reason is None
    # a fencing error resets only the generation it was sent under; a stale one is ignored, as answered
    current = _member(tmp_path, ClassicMemberState.STABLE, g4)
    current._handle_heartbeat_response(E.ILLEGAL_GENERATION, g4)
    assert current._reset is E.ILLEGAL_GENERATION and current._rejoin_reason == "Heartbeat: ILLEGAL_GENERATION"
    moved_on = _member(tmp_path, ClassicMemberState.STABLE, g4)
    answered_before = moved_on.heartbeat.last_received_ms
    moved_on._handle_heartbeat_response(E.UNKNOWN_MEMBER_ID, g3)
    assert moved_on._reset is None and moved_on._rejoin_reason is None
    assert moved_on.heartbeat.last_received_ms >= answered_before


def test_the_commit_before_rejoining_is_retried_while_its_error_is_retriable(tmp_path):
    """Java's onJoinPrepare retries the auto-commit until the rebalance timeout; a fenced one is not retried."""
    from lab_cluster.wire import ErrorCode as E
    from modern_coord.member import ClassicMemberState, Generation

    for answers, calls in (([E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.NONE], 3),
                           ([E.ILLEGAL_GENERATION, E.NONE], 1)):
        member = _member(tmp_path, ClassicMemberState.STABLE, Generation(1, "m", "range"))
        member.config = ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "127.0.0.1:9",
                                                  "retry.backoff.ms": 1})
        left = list(answers)
        member._commit_positions = lambda why, call=None, left=left: left.pop(0)
        member._ensure_coordinator = lambda: True
        member._commit_before_rejoining()
        assert len(answers) - len(left) == calls


def test_the_heartbeat_thread_looks_the_coordinator_up_itself(tmp_path):
    """Java's HeartbeatThread: coordinator unknown -> lookupCoordinator, then the back-off (the poll loop may be
    busy processing); it does not wait for the poll loop to do it."""
    from modern_coord.member import ClassicMemberState, Generation

    member = _member(tmp_path, ClassicMemberState.STABLE, Generation(2, "m", "range"))
    looked_up = []
    member._ensure_coordinator = lambda: looked_up.append(True) or False
    assert member._hb_client is None
    member._heartbeat_step(0)
    assert looked_up == [True]
    unjoined = _member(tmp_path, ClassicMemberState.PREPARING_REBALANCE, Generation(2, "m", "range"))
    unjoined._ensure_coordinator = lambda: looked_up.append(True) or False
    unjoined._heartbeat_step(0)  # no generation to heartbeat for: the thread is disabled
    assert looked_up == [True]


def test_a_fenced_join_or_sync_is_retried_at_once_and_other_failures_after_the_back_off(tmp_path):
    """Java's joinGroupIfNeeded: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS and
    MEMBER_ID_REQUIRED `continue` at once; other retriable errors sleep retry.backoff.ms."""
    from modern_coord.member import NO_GENERATION, ClassicMemberState

    for outcome, waits in (("unknown_member_id", 0), ("illegal_generation", 0), ("rebalance_in_progress", 0),
                           ("member_id_required", 0), ("coordinator_unavailable", 1)):
        member = _member(tmp_path, ClassicMemberState.UNJOINED, NO_GENERATION)
        member._join_and_sync = lambda outcome=outcome: outcome
        waited = []
        member._stop.wait = lambda s, waited=waited: waited.append(s)
        member._rebalance()
        assert len(waited) == waits, (outcome, waited)
        assert member._rejoin_reason == outcome
