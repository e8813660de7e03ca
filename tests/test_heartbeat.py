"""The client's heartbeat timing and configuration, with a fake clock and no I/O."""

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
                                  "partition.assignment.strategy": "cooperative-sticky"})
    with pytest.raises(LabError, match="Unknown consumer config"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "h:1", "zookeeper.connect": "x"})
    with pytest.raises(LabError, match="bootstrap.servers"):
        ConsumerConfig.from_dict({"group.id": "g", "bootstrap.servers": "nohostport"})
