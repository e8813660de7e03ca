"""Static membership (KIP-345) on real brokers: Kafka's own system tests, as lab tests.

Kafka's `tests/kafkatest/tests/client/consumer_test.py` asserts, for static
members, that a bounced member causes no revocation in the live ones
(`test_static_consumer_bounce`), and that of two consumers with one
`group.instance.id` only one stays alive (`test_fencing_static_consumer`).
The coordinator's side is `modern_coord/coordinator/coordinator.py`
(`_join_static_new_member`), the client's `modern_coord/consumer.py`.
"""

from __future__ import annotations

import time

import pytest
from conftest import wait_for
from test_modern import FAST, Group, _member_events, describe

#: a session long enough for a restart to fall well within it
STATIC = {"session.timeout.ms": 10000}


@pytest.fixture
def group(cluster):
    """The group's members, each a consumer thread in this process (`test_modern.Group`); all stopped after."""
    g = Group(cluster)
    yield g
    g.stop_all()


def _static(group: Group, name: str, instance: str):
    return group.add(name, **{"group.instance.id": instance, **STATIC})


def test_a_static_member_restarted_within_its_session_timeout_gets_its_share_back_and_nobody_rebalances(cluster,
                                                                                                        group):
    c1 = _static(group, "c1", "i1")
    _static(group, "c2", "i2")
    before = group.settle(2)
    held = c1.assignment()
    seen_by_c2 = {kind: len(_member_events(group, "c2", kind)) for kind in ("rebalance_begin", "revoked")}
    c1.stop()
    assert not _member_events(group, "c1", "leave")  # a static member sends no LeaveGroup
    restarted = _static(group, "c1-again", "i1")
    after = group.settle(2)
    time.sleep(3 * FAST["heartbeat.interval.ms"] / 1000)  # a rebalance would show within a heartbeat or two
    assert describe(cluster)["generation"] == after["generation"] == before["generation"]
    assert restarted.assignment() == held and restarted.generation.generation_id == before["generation"]
    # the live member saw nothing: no rebalance began, nothing was revoked
    assert {kind: len(_member_events(group, "c2", kind)) for kind in seen_by_c2} == seen_by_c2
    joins = _member_events(group, "c1-again", "join")
    assert [j["error"] for j in joins] == ["NONE"]  # no MEMBER_ID_REQUIRED round for a static member


def test_a_second_consumer_with_the_same_instance_id_fences_the_first(cluster, group):
    first = _static(group, "c1", "i1")
    _static(group, "c2", "i2")
    before = group.settle(2)
    held = first.assignment()
    second = _static(group, "c1-twin", "i1")
    wait_for(lambda: _member_events(group, "c1", "consumer_failed"), "the first consumer to be fenced")
    (failed,) = _member_events(group, "c1", "consumer_failed")
    assert "FENCED_INSTANCE_ID" in failed["f"]["reason"]
    assert first.snapshot().gave_up
    first.stop()  # the application closes the failed consumer
    after = group.settle(2)
    assert after["generation"] == before["generation"] and second.assignment() == held
